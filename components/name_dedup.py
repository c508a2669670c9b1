"""Pattern 1: EventBridge -> starter Lambda -> StartExecution with a name derived from the event."""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
import dataclasses

import pulumi
import pulumi_aws as aws

from exactly_once.components.config import Defaulted, as_args
from exactly_once.components.event_patterns import s3_object_created_pattern
from exactly_once.components.functions import (
    allow,
    dead_letter_queue,
    handler_function,
    invoke_from_rule,
)
from exactly_once.components.roles import RoleOptions, with_role_options
from exactly_once.components.state_machines import (
    StateMachineType,
    executions_of,
    require_standard,
    require_target,
    target_state_machine,
)
from exactly_once.handlers.executions import ReusePolicy
from exactly_once.handlers.keys import key_extractor
from exactly_once.handlers.runtime import LogLevel
from exactly_once.handlers.settings import choice, encode
from exactly_once.handlers.starter import StarterSettings


@dataclasses.dataclass
class NameDedupStarterArgs:
    """Either `bucket_name` or `event_pattern`; either `state_machine_arn` or `definition`."""

    bucket_name: pulumi.Input[str] | None = None
    """Start on S3 "Object Created" events of this bucket (its EventBridge notifications on)."""
    event_pattern: pulumi.Input[str] | None = None
    """Or start on the events this EventBridge pattern (JSON) matches."""
    state_machine_arn: pulumi.Input[str] | None = None
    """The STANDARD state machine to start (yours)."""
    state_machine_type: Defaulted[StateMachineType] = StateMachineType.STANDARD
    """The type of that state machine: STANDARD (EXPRESS cannot deduplicate by name)."""
    definition: pulumi.Input[str] | None = None
    """Or the ASL (JSON) of a STANDARD state machine for the component to create."""
    key_strategy: Defaulted[str] = "object-key"
    """What names an execution: object-key, bucket-key-version, key-sequencer, event-id,
    or jmespath:<expression> (docs/name-dedup-starter.md)."""
    reuse_policy: Defaulted[ReusePolicy] = ReusePolicy.REJECT_DUPLICATE
    """REJECT_DUPLICATE, or ALLOW_DUPLICATE_FAILED_ONLY to re-run a failed start."""
    hide_key: Defaulted[bool] = False
    """Name executions by a hash of the key instead of the readable key."""
    event_bus_name: Defaulted[str] = "default"
    """The event bus of the rule."""
    log_level: Defaulted[LogLevel] = LogLevel.INFO
    """The starter function's log level."""
    timeout: Defaulted[int] = 30
    """The starter function's timeout, seconds."""

    roles: RoleOptions | None = None
    """Permissions boundary and path for every IAM role this component creates."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        self.state_machine_type = choice(
            StateMachineType, self.state_machine_type, "state_machine_type"
        )
        self.reuse_policy = choice(ReusePolicy, self.reuse_policy, "reuse_policy")
        self.log_level = choice(LogLevel, self.log_level, "log_level")
        require_standard(self.state_machine_type, "NameDedupStarter")
        key_extractor(self.key_strategy)  # raises on an unknown strategy
        if (self.bucket_name is None) == (self.event_pattern is None):
            raise ValueError("give exactly one of bucket_name and event_pattern")
        require_target(self.state_machine_arn, self.definition, "NameDedupStarter")


class NameDedupStarter(pulumi.ComponentResource):
    """Pattern 1: EventBridge -> starter Lambda -> StartExecution named by the event's key,
    so a redelivered event starts nothing new."""

    dlq: aws.sqs.Queue
    """Events that can never start (with the reason)."""
    function: aws.lambda_.Function
    """The starter function."""
    rule: aws.cloudwatch.EventRule
    """The EventBridge rule that invokes it."""
    state_machine_arn: pulumi.Output[str]
    """The state machine it starts."""

    def __init__(
        self,
        name: str,
        args: NameDedupStarterArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        args = as_args(NameDedupStarterArgs, args)  # a dict from the package host
        args.validate()
        super().__init__(
            "exactly-once:index:NameDedupStarter", name, {}, with_role_options(opts, args.roles)
        )
        child = pulumi.ResourceOptions(parent=self)

        self.state_machine_arn = target_state_machine(
            name, args.state_machine_arn, args.definition, self
        )
        statements = [
            allow(["states:StartExecution"], [self.state_machine_arn]),
            # Once per cold start: the target must be STANDARD (handlers/starter.py).
            allow(["states:DescribeStateMachine"], [self.state_machine_arn]),
        ]
        if args.reuse_policy == ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY:
            # Only this policy asks how a taken name's execution ended.
            executions = executions_of(self.state_machine_arn)
            statements.append(allow(["states:DescribeExecution"], [executions]))

        self.dlq = dead_letter_queue(name, self)
        starter = handler_function(
            f"{name}-starter",
            handler="exactly_once.handlers.starter.handler",
            statements=statements,
            environment={
                **StarterSettings.environment(
                    state_machine_arn=self.state_machine_arn,
                    key_strategy=args.key_strategy,
                    reuse_policy=args.reuse_policy,
                    hide_key=encode(args.hide_key),
                ),
                "DLQ_URL": self.dlq.url,
                "LOG_LEVEL": args.log_level,
            },
            dead_letter_arn=self.dlq.arn,
            timeout=args.timeout,
            parent=self,
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
        self.register_outputs(
            {
                "functionName": self.function.name,
                "ruleArn": self.rule.arn,
                "dlqUrl": self.dlq.url,
                "stateMachineArn": self.state_machine_arn,
            }
        )

    @staticmethod
    def _event_pattern(args: NameDedupStarterArgs) -> pulumi.Input[str]:
        if args.event_pattern is not None:
            return args.event_pattern
        assert args.bucket_name is not None  # validate(): exactly one of the two
        return s3_object_created_pattern(args.bucket_name)
