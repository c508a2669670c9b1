"""Pattern 1: EventBridge -> starter Lambda -> StartExecution with a name derived from the
event (or, backend 'durable-function', an Invoke of a durable function named by it)."""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
import dataclasses
import re

import pulumi
import pulumi_aws as aws

from exactly_once.components.audit import AuditOptions, scheduled_audit
from exactly_once.components.component import Component
from exactly_once.components.config import Defaulted, as_args
from exactly_once.components.event_patterns import s3_object_created_pattern
from exactly_once.components.functions import (
    allow,
    dead_letter_queue,
    handler_function,
    invoke_from_rule,
)
from exactly_once.components.monitoring import (
    MonitoringOptions,
    Watch,
    metrics_environment,
)
from exactly_once.components.platform import PlatformOptions
from exactly_once.components.roles import RoleOptions
from exactly_once.components.state_machines import (
    StateMachineType,
    StateMachineTypeName,
    require_standard,
    require_target,
    target_state_machine,
)
from exactly_once.handlers.audit import starter_refusal
from exactly_once.handlers.backends import BACKENDS
from exactly_once.handlers.executions import Backend, BackendName, ReusePolicy, ReusePolicyName
from exactly_once.handlers.keys import key_extractor
from exactly_once.handlers.metrics import CATALOGUE
from exactly_once.handlers.name_dedup import PATTERN, StarterSettings
from exactly_once.handlers.runtime import LogLevel, LogLevelName
from exactly_once.handlers.settings import choice, encode

# A durable function is invoked by version or alias (Lambda developer guide, durable
# functions' best practices: "Invoke functions with version numbers or aliases"; Lambda's
# maintainers: a qualified ARN is needed, aws-durable-execution-sdk-js discussion 499).
QUALIFIED_FUNCTION = re.compile(r"^arn:aws[a-z-]*:lambda:[^:]+:\d{12}:function:[\w-]+:[\w$-]+$")


@dataclasses.dataclass
class NameDedupStarterArgs:
    """Either `bucket_name` or `event_pattern`; for the step-functions backend (the
    default) either `state_machine_arn` or `definition`, for the durable-function backend
    `durable_function_arn`."""

    bucket_name: pulumi.Input[str] | None = None
    """Start on S3 "Object Created" events of this bucket (its EventBridge notifications on)."""
    event_pattern: pulumi.Input[str] | None = None
    """Or start on the events this EventBridge pattern (JSON) matches."""
    backend: Defaulted[Backend | BackendName] = Backend.STEP_FUNCTIONS
    """What it starts: 'step-functions' (a STANDARD state machine's execution) or
    'durable-function' (a Lambda durable function's execution; docs/choosing.md)."""
    state_machine_arn: pulumi.Input[str] | None = None
    """The STANDARD state machine to start (yours)."""
    state_machine_type: Defaulted[StateMachineType | StateMachineTypeName] = (
        StateMachineType.STANDARD
    )
    """The type of that state machine: STANDARD (EXPRESS cannot deduplicate by name)."""
    definition: pulumi.Input[str] | None = None
    """Or the ASL (JSON) of a STANDARD state machine for the component to create."""
    durable_function_arn: pulumi.Input[str] | None = None
    """The durable function to start (yours, backend 'durable-function'), by a qualified
    ARN: a version or an alias."""
    key_strategy: Defaulted[str] = "object-key"
    """What names an execution: object-key, bucket-key-version, key-sequencer, event-id,
    or jmespath:<expression> (docs/name-dedup-starter.md)."""
    reuse_policy: Defaulted[ReusePolicy | ReusePolicyName] = ReusePolicy.REJECT_DUPLICATE
    """REJECT_DUPLICATE, or ALLOW_DUPLICATE_FAILED_ONLY to re-run a failed start."""
    hide_key: Defaulted[bool] = False
    """Name executions by a hash of the key instead of the readable key."""
    event_bus_name: Defaulted[str] = "default"
    """The event bus of the rule."""
    log_level: Defaulted[LogLevel | LogLevelName] = LogLevel.INFO
    """The starter function's log level."""
    timeout: Defaulted[int] = 30
    """The starter function's timeout, seconds."""

    roles: RoleOptions | None = None
    """Permissions boundary and path for every IAM role this component creates."""
    platform: PlatformOptions | None = None
    """Tags, X-Ray tracing, log retention and format, Step Functions logging, the logs'
    service name, and each function's settings, on everything this component creates
    (docs/platform.md)."""
    monitoring: MonitoringOptions | None = None
    """Metrics namespace, alarms (and whom they tell), dashboard (docs/operations.md)."""
    audit: AuditOptions | None = None
    """A scheduled audit: every object version uploaded to `bucket_name` started its
    execution (Lost metric, alarmed; docs/operations.md). For a bucket, the step-functions
    backend and an object-key or bucket-key-version strategy."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        self.state_machine_type = choice(
            StateMachineType, self.state_machine_type, "state_machine_type"
        )
        self.reuse_policy = choice(ReusePolicy, self.reuse_policy, "reuse_policy")
        self.backend = choice(Backend, self.backend, "backend")
        self.log_level = choice(LogLevel, self.log_level, "log_level")
        require_standard(self.state_machine_type, "NameDedupStarter")
        key_extractor(self.key_strategy)  # raises on an unknown strategy
        if (self.bucket_name is None) == (self.event_pattern is None):
            raise ValueError("give exactly one of bucket_name and event_pattern")
        if self.backend == Backend.DURABLE_FUNCTION:
            self._require_durable_function()
            return
        if self.durable_function_arn is not None:
            raise ValueError("durable_function_arn is for backend='durable-function'")
        require_target(self.state_machine_arn, self.definition, "NameDedupStarter")
        if self.audit is not None:
            refused = starter_refusal(
                {
                    "bucket": self.bucket_name,
                    "backend": str(self.backend),
                    "keyStrategy": self.key_strategy,
                }
            )
            if refused is not None:
                raise ValueError(f"audit: this starter cannot be audited: {refused}")

    def _require_durable_function(self) -> None:
        if self.state_machine_arn is not None or self.definition is not None:
            raise ValueError(
                "backend='durable-function' starts durable_function_arn: give no "
                "state_machine_arn or definition"
            )
        arn = self.durable_function_arn
        if arn is None:
            raise ValueError(
                "backend='durable-function' needs durable_function_arn (your durable "
                "function's version or alias ARN)"
            )
        if isinstance(arn, str) and not QUALIFIED_FUNCTION.match(arn):
            raise ValueError(
                f"durable_function_arn {arn!r} must name a version or alias "
                "(arn:aws:lambda:REGION:ACCOUNT:function:NAME:QUALIFIER): Lambda invokes "
                "durable functions by qualified ARN"
            )


class NameDedupStarter(Component):
    """Pattern 1: EventBridge -> starter Lambda -> StartExecution named by the event's key,
    so a redelivered event starts nothing new."""

    _kind = "NameDedupStarter"
    _functions = ("starter",)

    alarm_names: pulumi.Output[list[str]]
    """Its alarms (its DLQ not empty; docs/operations.md)."""
    dashboard_name: pulumi.Output[str] | None
    """Its CloudWatch dashboard (None with monitoring.dashboard off)."""

    dlq: aws.sqs.Queue
    """Events that can never start (with the reason)."""
    function: aws.lambda_.Function
    """The starter function."""
    rule: aws.cloudwatch.EventRule
    """The EventBridge rule that invokes it."""
    state_machine_arn: pulumi.Output[str] | None
    """The state machine it starts (backend 'step-functions')."""
    durable_function_arn: pulumi.Output[str] | None
    """The durable function it starts (backend 'durable-function')."""

    def __init__(
        self,
        name: str,
        args: NameDedupStarterArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        args = as_args(NameDedupStarterArgs, args)  # a dict from the package host
        super().__init__(name, args.roles, args.platform, opts)
        child = pulumi.ResourceOptions(parent=self)

        target, statements = self._target(name, args)
        self.dlq = dead_letter_queue(name, self)
        starter = handler_function(
            f"{name}-starter",
            # handlers/starter.py: the 0.3 string, kept through 0.4 for a safe upgrade
            handler="exactly_once.handlers.starter.handler",
            statements=statements,
            environment={
                **StarterSettings.environment(
                    backend=args.backend,
                    target_arn=target,
                    key_strategy=args.key_strategy,
                    reuse_policy=args.reuse_policy,
                    hide_key=encode(args.hide_key),
                ),
                "DLQ_URL": self.dlq.url,
                "LOG_LEVEL": args.log_level,
                **metrics_environment(name, args.monitoring),
            },
            dead_letter_arn=self.dlq.arn,
            timeout=args.timeout,
            requirements=BACKENDS[Backend(args.backend)].requirements,
            parent=self,
            platform=self._platform,
            args=args,
        )
        self.function = starter.function

        self.rule = aws.cloudwatch.EventRule(
            f"{name}-rule",
            event_bus_name=args.event_bus_name,
            event_pattern=self._event_pattern(args),
            opts=child,
        )
        invoke_from_rule(
            name, self.rule, self.function, self, self.dlq, event_bus_name=args.event_bus_name
        )
        watch = Watch(name, PATTERN, args.monitoring, self)
        watch.dead_letters(self.dlq)
        watch.counts("Events", list(CATALOGUE[PATTERN]))
        outputs = {
            "functionName": self.function.name,
            "ruleArn": self.rule.arn,
            "dlqUrl": self.dlq.url,
            "stateMachineArn": self.state_machine_arn,
            "durableFunctionArn": self.durable_function_arn,
            # what the audit derives each upload's execution name from
            "bucket": args.bucket_name,
            "keyStrategy": args.key_strategy,
            "hideKey": args.hide_key,
            "backend": str(args.backend),
        }
        if args.audit is not None:
            assert self.state_machine_arn is not None  # (checked: the step-functions backend)
            assert args.bucket_name is not None  # (checked: a bucket's starter)
            bucket = pulumi.Output.from_input(args.bucket_name)
            invoke = pulumi.InvokeOptions(parent=self)
            partition = aws.get_partition_output(opts=invoke).partition
            audit_reads = [
                allow(
                    ["s3:ListBucket", "s3:ListBucketVersions", "s3:GetBucketVersioning"],
                    [pulumi.Output.concat("arn:", partition, ":s3:::", bucket)],
                ),
                allow(["states:ListExecutions"], [self.state_machine_arn]),
            ]
            scheduled_audit(self, name, outputs, audit_reads, args.audit, args.monitoring, watch)
        self._finish(watch, outputs)

    def _target(
        self, name: str, args: NameDedupStarterArgs
    ) -> tuple[pulumi.Output[str], list[dict[str, object]]]:
        """The ARN the starter starts, and what its role may do with it (the backend's
        grants, on ARNs derived from the target's)."""
        self.state_machine_arn = self.durable_function_arn = None
        if args.backend == Backend.DURABLE_FUNCTION:  # args name the target per backend
            self.durable_function_arn = pulumi.Output.from_input(args.durable_function_arn or "")
            target = self.durable_function_arn
        else:
            self.state_machine_arn = target_state_machine(
                name, args.state_machine_arn, args.definition, self, self._platform
            )
            target = self.state_machine_arn
        grants = BACKENDS[Backend(args.backend)].grants(ReusePolicy(args.reuse_policy))
        return target, [
            allow(list(g.actions), [target.apply(resource) for resource in g.resources])
            for g in grants
        ]

    @staticmethod
    def _event_pattern(args: NameDedupStarterArgs) -> pulumi.Input[str]:
        if args.event_pattern is not None:
            return args.event_pattern
        assert args.bucket_name is not None  # validate(): exactly one of the two
        return s3_object_created_pattern(args.bucket_name)
