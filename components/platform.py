"""What a platform team sets on every resource a component creates: tags, X-Ray tracing,
log retention and format, Step Functions logging, the service name of its logs, and each
function's memory, timeout, processor, reserved concurrency, log level, environment and
layers.

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
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pulumi
import pulumi_aws as aws

from exactly_once.components.config import Defaulted
from exactly_once.handlers.runtime import LogLevel, LogLevelName
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


# Lambda quotas: layers a function may reference; CreateFunction's Layers pattern, a layer
# version's ARN (LayerVersionArn: arn:[a-zA-Z0-9-]+:lambda:[a-zA-Z0-9-]+:\d{12}:layer:
# [a-zA-Z0-9-_]+:[0-9]+, at most 140 characters), its version number last. ASCII classes
# alone: Python's \w and \d also take other scripts' letters and digits, which Lambda refuses.
MAX_LAYERS = 5
MAX_LAYER_ARN = 140
LAYER_ARN = re.compile(r"arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:[0-9]{12}:layer:[a-zA-Z0-9_-]+:[0-9]+")
# Lambda's Environment Variables key pattern, [a-zA-Z]([a-zA-Z0-9_])+: two characters or more.
VARIABLE = re.compile(r"[a-zA-Z][a-zA-Z0-9_]+")
# Lambda developer guide, "Working with Lambda environment variables": "The total size of all
# environment variables doesn't exceed 4 KB". Lambda measures them as one compact JSON object,
# names and values (its refusal quotes the "String measured": {"NAME":"value",...}).
MAX_ENVIRONMENT_BYTES = 4096
# LoggingConfig's ApplicationLogLevel for a handler's LOG_LEVEL: Lambda's names (TRACE,
# DEBUG, INFO, WARN, ERROR, FATAL; Lambda API reference, "LoggingConfig"). Never TRACE: the
# Python runtime sets the root logger to DEBUG for it (awslambdaric), where botocore logs
# request bodies; a handler's level has no TRACE and no FATAL.
APPLICATION_LOG_LEVEL: dict[LogLevel, str] = {
    LogLevel.DEBUG: "DEBUG",
    LogLevel.INFO: "INFO",
    LogLevel.WARNING: "WARN",
    LogLevel.ERROR: "ERROR",
}
# Variables with an option of their own: set in the environment they would disagree with it.
OWN_OPTION = {"LOG_LEVEL": "log_level", "POWERTOOLS_SERVICE_NAME": "platform.service"}


class Architecture(enum.StrEnum):
    """A function's processor: its requirements are installed as wheels for it."""

    X86_64 = "x86_64"
    ARM64 = "arm64"


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


# Each enum's values, for the args that take either (components/config.py).
ArchitectureName = Literal["x86_64", "arm64"]
LogFormatName = Literal["Text", "JSON"]
SystemLogLevelName = Literal["DEBUG", "INFO", "WARN"]
StateMachineLogLevelName = Literal["OFF", "ALL", "ERROR", "FATAL"]


@dataclasses.dataclass
class FunctionOptions:
    """One function's settings: None keeps the component's choice (docs/platform.md)."""

    memory_size: int | None = None
    """MB, 128 to 10,240 (CPU grows with it: a whole vCPU at 1,769 MB)."""
    timeout: int | None = None
    """Seconds, 1 to 900."""
    architecture: Architecture | ArchitectureName | None = None
    """x86_64 or arm64 (Graviton: 20% less per GB-second); its requirements are
    installed as wheels for it."""
    reserved_concurrency: int | None = None
    """Concurrent executions reserved for it, and its most at once (0 stops it: every
    invocation is throttled)."""
    log_level: LogLevel | LogLevelName | None = None
    """Its handler's LOG_LEVEL; with JSON logs, also Lambda's application log level (WARNING
    as WARN), which Powertools' Logger in your own code then takes over any other
    (docs/platform.md, "Log levels")."""
    environment: Mapping[str, pulumi.Input[str]] | None = None
    """Variables of your own (an extension's, a layer's wrapper); a name the component
    sets on it is refused, and all of them with the component's take at most 4 KB."""
    layers: Sequence[pulumi.Input[str]] | None = None
    """Layer version ARNs (up to 5), in the order Lambda extracts them."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        if self.memory_size is not None and not 128 <= self.memory_size <= 10240:
            raise ValueError(f"memory_size {self.memory_size}: Lambda takes 128 to 10240 MB")
        if self.timeout is not None and not 1 <= self.timeout <= 900:
            raise ValueError(f"timeout {self.timeout}: Lambda takes 1 to 900 seconds")
        if self.architecture is not None:
            self.architecture = choice(Architecture, self.architecture, "architecture")
        if self.log_level is not None:
            self.log_level = choice(LogLevel, self.log_level, "log_level")
        if self.reserved_concurrency is not None and self.reserved_concurrency < 0:
            raise ValueError(
                f"reserved_concurrency {self.reserved_concurrency}: Lambda takes 0 (the "
                "function stopped) or more"
            )
        self._validate_environment()
        self._validate_layers()

    def _validate_environment(self) -> None:
        variables = dict(self.environment or {})
        names = list(variables)
        # (fullmatch: a pattern's $ would take a name ending in a newline)
        bad = [name for name in names if not VARIABLE.fullmatch(name)]
        if bad:
            raise ValueError(
                f"environment {bad}: a variable's name is two characters or more, a letter "
                "then letters, digits or _ (Lambda's [a-zA-Z]([a-zA-Z0-9_])+)"
            )
        # (a stack's config gives `PORT: 8080` as a number; an Output is a string to come)
        bad = [name for name, value in variables.items() if isinstance(value, int | float)]
        if bad:
            raise ValueError(f"environment {bad}: a variable's value is a string (quote it)")
        own = [f"{name} (set {OWN_OPTION[name]})" for name in names if name in OWN_OPTION]
        if own:
            raise ValueError(f"environment may not set {', '.join(own)}")

    def _validate_layers(self) -> None:
        layers = self.layers or []
        if len(layers) > MAX_LAYERS:
            raise ValueError(f"{len(layers)} layers: a function takes at most {MAX_LAYERS}")
        # (an ARN known only at deploy, a LayerVersion's output, is Lambda's to check)
        bad = [
            arn
            for arn in layers
            if isinstance(arn, str) and not (len(arn) <= MAX_LAYER_ARN and LAYER_ARN.fullmatch(arn))
        ]
        if bad:
            raise ValueError(
                f"layers {bad}: give each layer version's ARN "
                "(arn:aws:lambda:<region>:<account>:layer:<name>:<version>)"
            )


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
    log_format: Defaulted[LogFormat | LogFormatName] = LogFormat.TEXT
    """Its functions' log format: Text, or JSON (Lambda's own lines as JSON records, and
    log-level filtering of the system lines)."""
    system_log_level: Defaulted[SystemLogLevel | SystemLogLevelName] = SystemLogLevel.INFO
    """With JSON: the lowest level of Lambda's own lines that are kept."""
    state_machine_log_level: Defaulted[StateMachineLogLevel | StateMachineLogLevelName] = (
        StateMachineLogLevel.OFF
    )
    """Step Functions logging to CloudWatch Logs (a log group per state machine it
    creates): OFF, ALL, ERROR or FATAL. Billed as vended logs."""
    state_machine_log_execution_data: Defaulted[bool] = False
    """Include execution input, output and state data in those lines (messages' and
    events' contents reach the logs)."""
    service: str | None = None
    """The `service` of its functions' log lines: POWERTOOLS_SERVICE_NAME, which
    Powertools in your own code reads too (None: the component's name)."""
    functions: dict[str, FunctionOptions] = dataclasses.field(default_factory=dict)
    """Each function's settings, by its name in the component (docs/platform.md)."""

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
        if self.service is not None and not (isinstance(self.service, str) and self.service):
            raise ValueError(f"service {self.service!r}: give a name, or None for the component's")
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


@dataclasses.dataclass(frozen=True)
class FunctionSettings:
    """What one function is deployed with (Platform.function)."""

    memory_size: int
    timeout: int
    architecture: str
    reserved_concurrency: int | None
    environment: dict[str, pulumi.Input[str]]
    layers: list[pulumi.Input[str]] | None
    tracing_config: aws.lambda_.FunctionTracingConfigArgs
    logging: dict[str, Any]
    """FunctionLoggingConfigArgs' inputs but the log group."""


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
        self,
        name: str,
        *,
        memory_size: int,
        timeout: int,
        architecture: str,
        reserved_concurrency: int | None,
        environment: Mapping[str, pulumi.Input[str]],
        args: object = None,
    ) -> FunctionSettings:
        """What function `name` (its Pulumi name) is deployed with: the component's choices
        (its size, processor, reserved concurrency and environment; `args`, the
        component's args, when theirs of FunctionOptions' names set this function) with the
        platform's options over them."""
        short = self._short(name)
        self.functions.append(short)
        chosen = self.options.functions.get(short, FunctionOptions())
        self._agree(short, chosen, args)
        taken = sorted(set(chosen.environment or {}) & set(environment))
        if taken:
            raise ValueError(
                f"platform.functions[{short!r}].environment may not set {taken}: "
                f"{self.component!r} sets them on that function"
            )
        variables = dict(environment)
        if chosen.log_level is not None:
            variables["LOG_LEVEL"] = str(chosen.log_level)
        variables["POWERTOOLS_SERVICE_NAME"] = self.options.service or self.component
        theirs = dict(variables)
        variables |= chosen.environment or {}
        check_environment_size(name, short, theirs, dict(chosen.environment or {}))
        level = variables.get("LOG_LEVEL")
        return FunctionSettings(
            memory_size=chosen.memory_size or memory_size,
            timeout=chosen.timeout or timeout,
            architecture=str(chosen.architecture or architecture),
            reserved_concurrency=(
                reserved_concurrency
                if chosen.reserved_concurrency is None
                else chosen.reserved_concurrency
            ),
            environment=variables,
            layers=list(chosen.layers) if chosen.layers else None,
            # Off is sent as off (PassThrough, AWS's default), not left out: the AWS
            # provider keeps a setting it is no longer given, so tracing once on would stay.
            tracing_config=aws.lambda_.FunctionTracingConfigArgs(
                mode="Active" if self.options.tracing else "PassThrough"
            ),
            # (a LOG_LEVEL is a LogLevel's value, from log_level or the component's arg)
            logging=self._logging(LogLevel(str(level)) if level is not None else LogLevel.INFO),
        )

    def _agree(self, short: str, chosen: FunctionOptions, args: object) -> None:
        """A component arg the user set (one not at its default) and the platform's option
        of the same name for the same function may not disagree: one would be dropped."""
        if not dataclasses.is_dataclass(args) or isinstance(args, type):
            return
        defaults = {field.name: field.default for field in dataclasses.fields(args)}
        for field in dataclasses.fields(FunctionOptions):
            theirs = getattr(chosen, field.name)
            if field.name not in defaults or theirs is None:
                continue
            mine = getattr(args, field.name)
            if mine != defaults[field.name] and mine != theirs:
                raise ValueError(
                    f"{type(args).__name__}.{field.name}={mine} and "
                    f"platform.functions[{short!r}].{field.name}={theirs} disagree: set one"
                )

    def _logging(self, log_level: LogLevel) -> dict[str, Any]:
        """The function's logging config (but its log group): `log_level`, its handler's."""
        options = self.options
        logging: dict[str, Any] = {"log_format": str(options.log_format)}
        if options.log_format == LogFormat.JSON:
            # One level for all who filter: Lambda drops application lines below
            # ApplicationLogLevel, and sets AWS_LAMBDA_LOG_LEVEL to it, which Powertools'
            # Logger in the user's code takes over its constructor's level and
            # POWERTOOLS_LOG_LEVEL (Powertools' Logger docs, "Priority of log level
            # settings"); our handlers filter by LOG_LEVEL, the same level. Lambda's system
            # lines keep the platform's own level: a function at ERROR still has its REPORT
            # lines (INFO), its duration and memory.
            logging |= {
                "application_log_level": APPLICATION_LOG_LEVEL[log_level],
                "system_log_level": str(options.system_log_level),
            }
        return logging

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


def check_environment_size(
    name: str,
    short: str,
    theirs: Mapping[str, pulumi.Input[str]],
    yours: Mapping[str, pulumi.Input[str]],
) -> None:
    """Function `name`'s variables (the component's, `theirs`, and the platform option's,
    `yours`) fit Lambda's 4 KB, measured as Lambda does, or a preview refuses them with their
    sizes. A value known only at deploy (an Output) counts as empty: a lower bound, so a
    function this passes may still be refused by Lambda at deploy."""
    sizes = {key: _entry_size(key, value) for key, value in {**theirs, **yours}.items()}
    # {"A":"1","B":"2"}: the braces, and a comma between two entries
    total = 2 + sum(sizes.values()) + max(len(sizes) - 1, 0)
    if total <= MAX_ENVIRONMENT_BYTES:
        return
    pending = sum(1 for value in {**theirs, **yours}.values() if not isinstance(value, str))
    largest = sorted(sizes, key=lambda key: -sizes[key])[:3]
    raise ValueError(
        f"function {name!r}: its environment variables measure {total:,} bytes, over "
        f"Lambda's {MAX_ENVIRONMENT_BYTES:,} (4 KB, names and values as one JSON object): "
        f"the component's {sum(sizes[k] for k in theirs if k not in yours):,}, "
        f"platform.functions[{short!r}].environment's {sum(sizes[k] for k in yours):,}; "
        f"largest {', '.join(f'{k} ({sizes[k]:,})' for k in largest)}"
        + (f"; {pending} value(s) known only at deploy counted as empty" if pending else "")
    )


def _entry_size(key: str, value: pulumi.Input[str]) -> int:
    """The bytes of `"key":"value"` in Lambda's measure (UTF-8), an unknown value empty."""
    known = value if isinstance(value, str) else ""
    return len(
        f"{json.dumps(key, ensure_ascii=False)}:{json.dumps(known, ensure_ascii=False)}".encode()
    )


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
