"""Pattern 4: a resumable workflow; a re-run from the top skips the steps that already succeeded."""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
import dataclasses
import json

import pulumi
import pulumi_aws as aws

from exactly_once.components import resumable_asl
from exactly_once.components.config import Defaulted, as_args
from exactly_once.components.functions import allow
from exactly_once.components.state_machines import state_machine
from exactly_once.components.tables import key_table


@dataclasses.dataclass
class StepRetry:
    """A Step Functions Retry rule for a step's own errors (state-retries)."""

    error_equals: list[str]
    """The errors retried, e.g. ["Timeout"] or ["States.TaskFailed"]."""
    max_attempts: Defaulted[int] = 3
    """Retries after the first attempt."""
    interval_seconds: Defaulted[int] = 1
    """The wait before the first retry."""
    backoff_rate: Defaulted[float] = 2.0
    """The factor each wait grows by."""

    def asl(self) -> dict[str, object]:
        return {
            "ErrorEquals": list(self.error_equals),
            "MaxAttempts": self.max_attempts,
            "IntervalSeconds": self.interval_seconds,
            "BackoffRate": self.backoff_rate,
        }


@dataclasses.dataclass
class WorkflowStep:
    """One step: a Lambda function invoked with the whole state."""

    name: str
    """The step's name (its checkpoint's name: keep it stable across deployments)."""
    function: pulumi.Input[str]
    """The step's Lambda function ARN."""
    retry: Defaulted[list[StepRetry]] = dataclasses.field(default_factory=list)
    """Extra retries for the function's own errors."""


@dataclasses.dataclass
class ResumableWorkflowArgs:
    steps: list[WorkflowStep]
    """The steps, in order."""
    key_path: Defaulted[str] = "$.orderId"
    """JSONPath to the business key in the execution input."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        placeholder = [resumable_asl.Step(step.name, "arn") for step in self.steps]
        resumable_asl.validate(placeholder, self.key_path)


class ResumableWorkflow(pulumi.ComponentResource):
    """Pattern 4: a workflow with a DynamoDB checkpoint per business key; a re-run from the
    top skips the steps that already succeeded."""

    table: aws.dynamodb.Table
    """The checkpoints (TTL attribute `expires_at`)."""
    state_machine: aws.sfn.StateMachine
    """The workflow."""

    def __init__(
        self, name: str, args: ResumableWorkflowArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        args = as_args(ResumableWorkflowArgs, args)  # a dict from the package host
        args.validate()
        super().__init__("exactly-once:index:ResumableWorkflow", name, {}, opts)
        # One item per business key; `expires_at` (epoch seconds, set by `python -m ops`)
        # lets DynamoDB drop checkpoints of runs nobody resumes.
        self.table = key_table(
            f"{name}-checkpoints", self, ttl_attribute="expires_at", point_in_time_recovery=True
        )
        arns = [pulumi.Output.from_input(step.function) for step in args.steps]
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
                        resumable_asl.Step(step.name, arn, tuple(r.asl() for r in step.retry))
                        for step, arn in zip(args.steps, values[1:], strict=True)
                    ],
                    values[0],
                    args.key_path,
                )
            )
        )
        self.state_machine = state_machine(f"{name}-workflow", definition, self, statements)
        self.register_outputs({"stateMachineArn": self.state_machine.arn, "table": self.table.name})
