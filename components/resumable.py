"""Pattern 4: a resumable workflow; a re-run from the top skips the steps that already succeeded."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pulumi
import pulumi_aws as aws

from components import resumable_asl
from components.functions import allow
from components.state_machines import state_machine
from components.tables import key_table


@dataclasses.dataclass
class WorkflowStep:
    """`function`: a Lambda ARN or an aws.lambda_.Function. `retry`: extra ASL Retry rules."""

    name: str
    function: pulumi.Input[str] | aws.lambda_.Function
    retry: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    @property
    def arn(self) -> pulumi.Output[str]:
        if isinstance(self.function, aws.lambda_.Function):
            return self.function.arn
        return pulumi.Output.from_input(self.function)


@dataclasses.dataclass
class ResumableWorkflowArgs:
    steps: list[WorkflowStep]
    key_path: str = "$.orderId"

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        placeholder = [resumable_asl.Step(step.name, "arn") for step in self.steps]
        resumable_asl.validate(placeholder, self.key_path)


class ResumableWorkflow(pulumi.ComponentResource):
    table: aws.dynamodb.Table
    state_machine: aws.sfn.StateMachine

    def __init__(
        self, name: str, args: ResumableWorkflowArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        args.validate()
        super().__init__("exactly-once:index:ResumableWorkflow", name, {}, opts)
        # One item per business key; `expires_at` (epoch seconds, set by `python -m ops`)
        # lets DynamoDB drop checkpoints of runs nobody resumes.
        self.table = key_table(
            f"{name}-checkpoints", self, ttl_attribute="expires_at", point_in_time_recovery=True
        )
        arns = [step.arn for step in args.steps]
        item_actions = [
            "dynamodb:GetItem",
            "dynamodb:PutItem",
            "dynamodb:UpdateItem",
            "dynamodb:DeleteItem",
        ]
        statements = [
            allow(item_actions, [self.table.arn]),
            # The function and its qualified versions/aliases, nothing else.
            allow(["lambda:InvokeFunction"], [*arns, *[a.apply(lambda v: f"{v}:*") for a in arns]]),
        ]
        definition = pulumi.Output.all(self.table.name, *arns).apply(
            lambda values: json.dumps(
                resumable_asl.definition(
                    [
                        resumable_asl.Step(step.name, arn, tuple(step.retry))
                        for step, arn in zip(args.steps, values[1:], strict=True)
                    ],
                    values[0],
                    args.key_path,
                )
            )
        )
        self.state_machine = state_machine(f"{name}-workflow", definition, self, statements)
        self.register_outputs({"stateMachineArn": self.state_machine.arn, "table": self.table.name})
