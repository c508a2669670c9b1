"""What a platform team sets on every resource a component creates: tags, X-Ray tracing,
log retention and format, Step Functions logging, and each function's memory and timeout.

Set once per component as `platform=PlatformOptions(...)`; anything not covered here is
reachable with Pulumi transforms (docs/platform.md).
"""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
import dataclasses
import enum
import functools
import importlib
import inspect
from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from exactly_once.components.config import Defaulted
from exactly_once.handlers.settings import choice

# CloudWatch Logs PutRetentionPolicy: the retention periods it accepts (0: never expire,
# which is leaving retention unset).
RETENTION_DAYS: tuple[int, ...] = (0, 1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400)
RETENTION_DAYS += (545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)

# Lambda developer guide, "Using AWS Lambda with AWS X-Ray": the function's execution role
# needs these to send traces (the AWSXRayDaemonWriteAccess managed policy); Step Functions
# developer guide, "IAM policies for using AWS X-Ray in Step Functions", adds the sampling
# reads for a state machine. X-Ray grants none of them on a resource narrower than "*".
FUNCTION_TRACING = ("xray:PutTraceSegments", "xray:PutTelemetryRecords")
STATE_MACHINE_TRACING = (*FUNCTION_TRACING, "xray:GetSamplingRules", "xray:GetSamplingTargets")
# Step Functions developer guide, "Logging using CloudWatch Logs", IAM policies for logging:
# the vended-logs delivery actions, on "*" (CloudWatch Logs grants them on nothing narrower).
STATE_MACHINE_LOGGING = (
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
)


class LogFormat(enum.StrEnum):
    TEXT = "Text"
    JSON = "JSON"


class SystemLogLevel(enum.StrEnum):
    """Lambda's own lines (START, END, REPORT as platform records), JSON format only."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARN = "WARN"


class StateMachineLogLevel(enum.StrEnum):
    OFF = "OFF"
    ALL = "ALL"
    ERROR = "ERROR"
    FATAL = "FATAL"


@dataclasses.dataclass
class FunctionOptions:
    """One function's size: None keeps the component's choice (docs/platform.md)."""

    memory_size: int | None = None
    """MB, 128 to 10,240 (CPU grows with it: a whole vCPU at 1,769 MB)."""
    timeout: int | None = None
    """Seconds, 1 to 900."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        if self.memory_size is not None and not 128 <= self.memory_size <= 10240:
            raise ValueError(f"memory_size {self.memory_size}: Lambda takes 128 to 10240 MB")
        if self.timeout is not None and not 1 <= self.timeout <= 900:
            raise ValueError(f"timeout {self.timeout}: Lambda takes 1 to 900 seconds")


@dataclasses.dataclass
class PlatformOptions:
    """Settings applied to every resource the component creates."""

    tags: dict[str, str] = dataclasses.field(default_factory=dict)
    """Tags on every taggable resource it creates (merged over any the component sets)."""
    tracing: Defaulted[bool] = False
    """X-Ray active tracing on its functions, state machines and API stages (and the
    permissions to send traces)."""
    log_retention_days: Defaulted[int] = 14
    """How long its log groups keep lines (a value CloudWatch Logs accepts; 0: forever)."""
    log_format: Defaulted[LogFormat] = LogFormat.TEXT
    """Its functions' log format: Text, or JSON (Lambda's own lines as JSON records, and
    log-level filtering of the system lines)."""
    system_log_level: Defaulted[SystemLogLevel] = SystemLogLevel.INFO
    """With JSON: the lowest level of Lambda's own lines that are kept."""
    state_machine_log_level: Defaulted[StateMachineLogLevel] = StateMachineLogLevel.OFF
    """Step Functions logging to CloudWatch Logs (a log group per state machine it
    creates): OFF, ALL, ERROR or FATAL. Billed as vended logs."""
    state_machine_log_execution_data: Defaulted[bool] = False
    """Include execution input, output and state data in those lines (messages' and
    events' contents reach the logs)."""
    functions: dict[str, FunctionOptions] = dataclasses.field(default_factory=dict)
    """Memory and timeout by function (the component's names: docs/platform.md)."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        self.log_format = choice(LogFormat, self.log_format, "log_format")
        self.system_log_level = choice(SystemLogLevel, self.system_log_level, "system_log_level")
        self.state_machine_log_level = choice(
            StateMachineLogLevel, self.state_machine_log_level, "state_machine_log_level"
        )
        if self.log_retention_days not in RETENTION_DAYS:
            raise ValueError(
                f"log_retention_days {self.log_retention_days}: CloudWatch Logs keeps lines "
                f"for one of {', '.join(map(str, RETENTION_DAYS))} days (0: forever)"
            )
        if len(self.tags) > 50:
            raise ValueError(f"{len(self.tags)} tags: AWS resources take at most 50")
        for key, value in self.tags.items():
            # Tagging best practices (AWS whitepaper): keys up to 128, values up to 256
            # characters; the aws: prefix is AWS's own.
            if not key or len(key) > 128 or key.lower().startswith("aws:"):
                raise ValueError(f"tag key {key!r}: 1 to 128 characters, not starting aws:")
            if not isinstance(value, str) or len(value) > 256:
                raise ValueError(f"tag {key!r}: its value must be a string of up to 256")
        for options in self.functions.values():
            options.validate()


class Platform:
    """One component's PlatformOptions, as its resources take them."""

    def __init__(self, component: str, options: PlatformOptions | None) -> None:
        self.component = component
        self.options = options or PlatformOptions()
        self.functions: list[str] = []  # what the component made, for the unknown-key check

    def resource_options(self, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
        """The component's options plus a transformation tagging every taggable resource
        it creates: one place, whatever creates the resource."""
        tags = dict(self.options.tags)
        if not tags:
            return opts or pulumi.ResourceOptions()

        def tag(
            args: pulumi.ResourceTransformationArgs,
        ) -> pulumi.ResourceTransformationResult | None:
            if not taggable(args.type_):
                return None
            given: Any = pulumi.Output.from_input(args.props.get("tags") or {})
            merged = given.apply(lambda own: {**(own or {}), **tags})
            return pulumi.ResourceTransformationResult({**args.props, "tags": merged}, args.opts)

        return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=[tag]))

    def function(
        self, name: str, memory_size: int, timeout: int, log_level: object = None
    ) -> dict[str, Any]:
        """A function's inputs that the platform sets (`name`: its Pulumi name;
        `log_level`: its handler's LOG_LEVEL, if it has one)."""
        self.functions.append(self._short(name))
        size = self.options.functions.get(self._short(name), FunctionOptions())
        options = self.options
        logging: dict[str, Any] = {"log_format": str(options.log_format)}
        if options.log_format == LogFormat.JSON:
            # The handlers filter by their own LOG_LEVEL; Lambda's filter keeps what they
            # write: INFO, or DEBUG for a handler at DEBUG (their WARNING, Python's name,
            # reads as INFO to it: Lambda developer guide, "Log-level filtering", an
            # invalid level is INFO). Never lower: the runtime sets the root logger to
            # this level, and botocore's DEBUG records carry request bodies.
            debug = str(log_level).upper() == "DEBUG"
            logging |= {
                "application_log_level": "DEBUG" if debug else "INFO",
                "system_log_level": str(options.system_log_level),
            }
        # Off is sent as off (PassThrough, AWS's default), not left out: the AWS provider
        # keeps a setting it is no longer given, so tracing once on would stay on.
        mode = "Active" if options.tracing else "PassThrough"
        return {
            "memory_size": size.memory_size or memory_size,
            "timeout": size.timeout or timeout,
            "tracing_config": aws.lambda_.FunctionTracingConfigArgs(mode=mode),
            "logging": logging,
        }

    def function_statements(self) -> list[dict[str, Any]]:
        if not self.options.tracing:
            return []
        return [{"Effect": "Allow", "Action": list(FUNCTION_TRACING), "Resource": ["*"]}]

    def state_machine(
        self, name: str, parent: pulumi.Resource
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """A state machine's inputs that the platform sets, and what its role then needs
        (with logging on, its log group)."""
        options = self.options
        statements: list[dict[str, Any]] = []
        # Off is sent as off, not left out (the AWS provider keeps a setting it is no
        # longer given): tracing disabled, logging OFF.
        inputs: dict[str, Any] = {
            "tracing_configuration": aws.sfn.StateMachineTracingConfigurationArgs(
                enabled=bool(options.tracing)
            ),
            "logging_configuration": aws.sfn.StateMachineLoggingConfigurationArgs(level="OFF"),
        }
        if options.tracing:
            statements.append(
                {"Effect": "Allow", "Action": list(STATE_MACHINE_TRACING), "Resource": ["*"]}
            )
        if options.state_machine_log_level != StateMachineLogLevel.OFF:
            # /aws/vendedlogs/: the prefix AWS recommends for the log groups of vended
            # logs (Step Functions developer guide, "Logging using CloudWatch Logs").
            group = aws.cloudwatch.LogGroup(
                f"{name}-logs",
                name_prefix=f"/aws/vendedlogs/states/{name}-",
                retention_in_days=options.log_retention_days or None,
                opts=pulumi.ResourceOptions(parent=parent),
            )
            inputs["logging_configuration"] = aws.sfn.StateMachineLoggingConfigurationArgs(
                level=str(options.state_machine_log_level),
                include_execution_data=options.state_machine_log_execution_data,
                log_destination=group.arn.apply(lambda arn: f"{arn.removesuffix(':*')}:*"),
            )
            statements.append(
                {"Effect": "Allow", "Action": list(STATE_MACHINE_LOGGING), "Resource": ["*"]}
            )
        return inputs, statements

    def check(self, functions: Sequence[str]) -> None:
        """Every `functions` key names one of `functions` (the component's)."""
        unknown = sorted(set(self.options.functions) - set(functions))
        if unknown:
            names = ", ".join(sorted(functions)) or "none"
            raise ValueError(
                f"platform.functions: {', '.join(map(repr, unknown))} is not a function of "
                f"{self.component!r} (its functions: {names})"
            )

    def _short(self, name: str) -> str:
        return name.removeprefix(f"{self.component}-")


@functools.cache
def taggable(type_token: str) -> bool:
    """Whether a pulumi-aws resource type takes `tags` (read from its Args class, so a
    resource type a component adds later is covered without a list to keep)."""
    if not type_token.startswith("aws:"):
        return False
    _, module_path, kind = type_token.split(":")
    module = module_path.split("/")[0]
    module = {"lambda": "lambda_"}.get(module, module)
    try:
        found = getattr(importlib.import_module(f"pulumi_aws.{module}"), f"{kind}Args")
    except (ImportError, AttributeError):
        return False
    return "tags" in inspect.signature(found.__init__).parameters
