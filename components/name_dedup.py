"""Pattern 1: EventBridge -> starter Lambda -> StartExecution with a name derived from the event."""

from __future__ import annotations

import dataclasses
from typing import Any

import pulumi
import pulumi_aws as aws

from components.event_patterns import s3_object_created_pattern
from components.functions import (
    allow,
    dead_letter_queue,
    handler_function,
    invoke_from_rule,
)
from components.state_machines import (
    StateMachineType,
    executions_of,
    require_standard,
    require_target,
    target_state_machine,
)
from handlers.executions import REUSE_POLICIES, ReusePolicy
from handlers.keys import key_extractor
from handlers.runtime import LogLevel
from handlers.settings import encode
from handlers.starter import StarterSettings


@dataclasses.dataclass
class NameDedupStarterArgs:
    """Either `bucket_name` (S3 "Object Created" events of that bucket) or `event_pattern`;
    either `state_machine_arn` (an existing STANDARD machine) or a `definition` to create."""

    bucket_name: pulumi.Input[str] | None = None
    event_pattern: pulumi.Input[str] | None = None
    state_machine_arn: pulumi.Input[str] | None = None
    state_machine_type: StateMachineType = "STANDARD"
    definition: pulumi.Input[str] | dict[str, Any] | None = None
    key_strategy: str = "object-key"
    reuse_policy: ReusePolicy = "REJECT_DUPLICATE"
    hide_key: bool = False
    event_bus_name: str = "default"
    log_level: LogLevel = "INFO"
    timeout: int = 30

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        require_standard(self.state_machine_type, "NameDedupStarter")
        key_extractor(self.key_strategy)  # raises on an unknown strategy
        if self.reuse_policy not in REUSE_POLICIES:
            raise ValueError(
                f"reuse_policy must be one of {REUSE_POLICIES}, got {self.reuse_policy!r}"
            )
        if (self.bucket_name is None) == (self.event_pattern is None):
            raise ValueError("give exactly one of bucket_name and event_pattern")
        require_target(self.state_machine_arn, self.definition, "NameDedupStarter")


class NameDedupStarter(pulumi.ComponentResource):
    dlq: aws.sqs.Queue
    function: aws.lambda_.Function
    rule: aws.cloudwatch.EventRule
    state_machine_arn: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        args: NameDedupStarterArgs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        args.validate()
        super().__init__("exactly-once:index:NameDedupStarter", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.state_machine_arn = target_state_machine(
            name, args.state_machine_arn, args.definition, self
        )
        executions = executions_of(self.state_machine_arn)

        self.dlq = dead_letter_queue(name, self)
        starter = handler_function(
            f"{name}-starter",
            handler="handlers.starter.handler",
            statements=[
                allow(["states:StartExecution"], [self.state_machine_arn]),
                allow(["states:DescribeExecution"], [executions]),
            ],
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
