"""Pattern 4: a resumable workflow; a re-run from the top skips the steps that already succeeded.

A state machine (the default), or with backend 'durable-function' a Lambda durable
function running the same steps over the same checkpoints (handlers/resumable_durable.py)."""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_aws as aws

from exactly_once.components import resumable_asl
from exactly_once.components.audit import AuditOptions, scheduled_audit
from exactly_once.components.component import Component
from exactly_once.components.config import Defaulted, as_args
from exactly_once.components.functions import (
    Durable,
    allow,
    handler_function,
)
from exactly_once.components.monitoring import (
    MonitoringOptions,
    Watch,
    metrics_environment,
)
from exactly_once.components.platform import PlatformOptions
from exactly_once.components.roles import RoleOptions
from exactly_once.components.state_machines import executions_of, state_machine
from exactly_once.components.tables import key_table
from exactly_once.components.targets import ACTIONS
from exactly_once.handlers.executions import Backend, BackendName
from exactly_once.handlers.resumable import (
    PATTERN,
    ResumableDurableSettings,
    ResumableSettings,
)
from exactly_once.handlers.settings import choice, encode
from exactly_once.handlers.targets import TargetKind, kind_of


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
    """The ARN of the step's target, given the whole state: a Lambda function (its result is
    the step's output), or an SQS queue, SNS topic, Step Functions state machine (started,
    not awaited) or EventBridge bus (delivered; its answer is the output)."""
    retry: Defaulted[list[StepRetry]] = dataclasses.field(default_factory=list)
    """Extra retries for the function's own errors."""


@dataclasses.dataclass
class ResumableWorkflowArgs:
    steps: list[WorkflowStep]
    """The steps, in order."""
    key_path: Defaulted[str] = "$.orderId"
    """JSONPath to the business key in the execution input."""
    completed_retention_days: Defaulted[int] = 7
    """How long a completed key is kept: a run of it within this time runs no step and
    answers with the stored results; after it, the key runs afresh."""
    checkpoint_ttl_days: Defaulted[int] = 30
    """How long an unfinished (failed) key's checkpoint is kept from its last run's start:
    a re-run within it skips the steps done; after it, the key starts afresh."""
    timeout_seconds: Defaulted[int] = 24 * 3600
    """A run's time limit (the state machine's TimeoutSeconds): a concurrent run of the key
    is refused while one runs, so this bounds how long a stuck run holds its key."""

    backend: Defaulted[Backend | BackendName] = Backend.STEP_FUNCTIONS
    """'step-functions' (a state machine), or 'durable-function': a Lambda durable function
    running the same steps over the same checkpoints (Lambda steps, key_path $.a.b)."""

    roles: RoleOptions | None = None
    """Permissions boundary and path for every IAM role this component creates."""
    platform: PlatformOptions | None = None
    """Tags, X-Ray tracing, log retention and format, Step Functions logging, the logs'
    service name, and each function's settings, on everything this component creates
    (docs/platform.md)."""
    monitoring: MonitoringOptions | None = None
    """Metrics namespace, alarms (and whom they tell), dashboard (docs/operations.md)."""
    audit: AuditOptions | None = None
    """A scheduled audit: no key held past `timeout_seconds` plus the grace, none completed
    with a step not recorded (Lost metric, alarmed; docs/operations.md)."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        self.backend = choice(Backend, self.backend, "backend")
        if self.backend == Backend.DURABLE_FUNCTION:
            self._validate_durable()
        placeholder = [resumable_asl.Step(step.name, "arn") for step in self.steps]
        resumable_asl.validate(placeholder, self.key_path)
        for step in self.steps:
            if isinstance(step.function, str):  # an Output is checked when it resolves
                kind_of(step.function, f"step {step.name!r}'s target")
        for field in ("completed_retention_days", "checkpoint_ttl_days", "timeout_seconds"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} must be at least 1, got {getattr(self, field)}")

    def _validate_durable(self) -> None:
        """What the durable form runs: Lambda steps with the SDK's retries, a dotted key."""
        if not DOTTED.match(self.key_path):
            raise ValueError(
                f"backend='durable-function' reads key_path as $.field[.field...], "
                f"got {self.key_path!r}"
            )
        for step in self.steps:
            if step.retry:
                raise ValueError(
                    f"step {step.name!r}: retry rules are Step Functions'; the durable form "
                    "retries a failed step with the durable-execution SDK's default strategy"
                )
            if isinstance(step.function, str):
                kind = kind_of(step.function, f"step {step.name!r}'s target")
                if kind != TargetKind.LAMBDA:
                    raise ValueError(
                        f"step {step.name!r}: backend='durable-function' runs Lambda steps "
                        f"only, got a {kind.value} target"
                    )


DOTTED = re.compile(r"^\$(\.[A-Za-z_][A-Za-z0-9_]*)+$")


# A backend's build: what runs the workflow; it adds its alarms to the watch and returns
# its outputs (ResumableWorkflow.__init__).
Build = Callable[[str, ResumableWorkflowArgs, Watch], dict[str, pulumi.Output[str]]]

RUNS_FAILED = (
    "workflow runs failed; fix the cause, then run the key again: it resumes from the "
    "step that failed (docs/resumable-workflow.md)"
)


class ResumableWorkflow(Component):
    """Pattern 4: a workflow with a DynamoDB checkpoint per business key; a re-run from the
    top skips the steps that already succeeded."""

    _kind = "ResumableWorkflow"
    _functions = ("checkpoint", "workflow")

    alarm_names: pulumi.Output[list[str]]
    """Its alarms (runs failed; docs/operations.md)."""
    dashboard_name: pulumi.Output[str] | None
    """Its CloudWatch dashboard (None with monitoring.dashboard off)."""

    table: aws.dynamodb.Table
    """The checkpoints (TTL attribute `expires_at`)."""
    state_machine: aws.sfn.StateMachine | None
    """The workflow (backend 'step-functions')."""
    checkpoint_function: aws.lambda_.Function | None
    """Takes a key's lease and loads its checkpoint; marks it completed (the state
    machine's; the durable function does it itself)."""
    durable_function: aws.lambda_.Function | None
    """The workflow (backend 'durable-function')."""
    durable_function_arn: pulumi.Output[str] | None
    """Its published version: invoke it with the input to run the workflow."""

    def __init__(
        self, name: str, args: ResumableWorkflowArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        args = as_args(ResumableWorkflowArgs, args)  # a dict from the package host
        super().__init__(name, args.roles, args.platform, opts)
        # One item per business key; every write sets `expires_at` (epoch seconds), so
        # DynamoDB drops checkpoints nobody resumes and completed keys past their retention.
        self.table = key_table(
            f"{name}-checkpoints", self, ttl_attribute="expires_at", point_in_time_recovery=True
        )
        self.state_machine = self.checkpoint_function = None
        self.durable_function = self.durable_function_arn = None
        watch = Watch(name, PATTERN, args.monitoring, self)
        # Each backend builds what runs the workflow over the same checkpoint table, and
        # says what to watch and output: one method each, one signature (Build).
        builds: dict[Backend, Build] = {
            Backend.STEP_FUNCTIONS: self._state_machine,
            Backend.DURABLE_FUNCTION: self._durable,
        }
        outputs = builds[Backend(args.backend)](name, args, watch)
        watch.counts("Runs", ["RunsStarted", "RunsSucceeded", "RunsFailed", "KeysCompleted"])
        watch.counts("Steps", ["StepsRun", "StepsSkipped"])
        # timeoutSeconds: a key held longer than this by one run is stuck (the audit's)
        timeout = {"timeoutSeconds": args.timeout_seconds}
        every: dict[str, Any] = {"table": self.table.name, **timeout, **outputs}
        if args.audit is not None:
            audit_reads = [allow(["dynamodb:Scan"], [self.table.arn])]  # every checkpoint
            scheduled_audit(self, name, every, audit_reads, args.audit, args.monitoring, watch)
        self._finish(watch, every)

    def _state_machine(
        self, name: str, args: ResumableWorkflowArgs, watch: Watch
    ) -> dict[str, pulumi.Output[str]]:
        """The workflow as a state machine (components/resumable_asl.py) and its checkpoint
        function."""
        day = 24 * 3600
        checkpoint = handler_function(
            f"{name}-checkpoint",
            handler="exactly_once.handlers.resumable.handler",
            statements=[
                allow(
                    ["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                    [self.table.arn],
                )
            ],
            environment={
                **ResumableSettings.environment(
                    table=self.table.name,
                    steps=json.dumps([step.name for step in args.steps]),
                    checkpoint_ttl_seconds=encode(args.checkpoint_ttl_days * day),
                    retention_seconds=encode(args.completed_retention_days * day),
                ),
                **metrics_environment(name, args.monitoring),
            },
            parent=self,
            platform=self._platform,
        )
        self.checkpoint_function = checkpoint.function
        arns = [pulumi.Output.from_input(step.function) for step in args.steps]

        def statements(values: list[str]) -> list[dict[str, object]]:
            table_arn, checkpoint_arn, *targets = values
            by_action: dict[str, list[str]] = {ACTIONS[TargetKind.LAMBDA]: [checkpoint_arn]}
            for arn in targets:
                kind = kind_of(arn, "a step's target")
                # a function with its qualified versions/aliases
                found = [arn, f"{arn}:*"] if kind == TargetKind.LAMBDA else [arn]
                by_action.setdefault(ACTIONS[kind], []).extend(found)
            return [
                # The Saves and Resyncs; the checkpoint function does the rest.
                allow(["dynamodb:UpdateItem"], [table_arn]),
                *[allow([action], found) for action, found in sorted(by_action.items())],
            ]

        granted: Any = pulumi.Output.all(self.table.arn, self.checkpoint_function.arn, *arns).apply(
            statements
        )
        definition = pulumi.Output.all(self.table.name, self.checkpoint_function.arn, *arns).apply(
            lambda values: json.dumps(
                resumable_asl.definition(
                    [
                        resumable_asl.Step(step.name, arn, tuple(r.asl() for r in step.retry))
                        for step, arn in zip(args.steps, values[2:], strict=True)
                    ],
                    values[0],
                    values[1],
                    args.key_path,
                    args.timeout_seconds,
                )
            )
        )
        self.state_machine = state_machine(
            f"{name}-workflow", definition, self, granted, self._platform
        )
        # Load asks whether a lease's holder still runs (a crashed run's lease is taken over).
        # A policy of its own: the machine's definition already names the function.
        aws.iam.RolePolicy(
            f"{name}-checkpoint-describe",
            role=checkpoint.role.id,
            policy=pulumi.Output.json_dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        allow(["states:DescribeExecution"], [executions_of(self.state_machine.arn)])
                    ],
                }
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        # A failed run is a failed execution (its step's error, KeyInProgress, LeaseLost).
        watch.failed_executions(self.state_machine.arn, RUNS_FAILED)
        return {
            "stateMachineArn": self.state_machine.arn,
            "checkpointFunction": self.checkpoint_function.name,
        }

    def _durable(
        self, name: str, args: ResumableWorkflowArgs, watch: Watch
    ) -> dict[str, pulumi.Output[str]]:
        """The workflow as a durable function (handlers/resumable_durable.py)."""
        day = 24 * 3600
        arns = [pulumi.Output.from_input(step.function) for step in args.steps]
        workflow = handler_function(
            f"{name}-workflow",
            handler="exactly_once.handlers.resumable_durable.handler",
            statements=[
                allow(
                    ["dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
                    [self.table.arn],
                ),
                # each step's function with its qualified versions/aliases
                allow(
                    ["lambda:InvokeFunction"],
                    [a for arn in arns for a in (arn, arn.apply(lambda x: f"{x}:*"))],
                ),
            ],
            environment={
                **ResumableDurableSettings.environment(
                    table=self.table.name,
                    steps=json.dumps([step.name for step in args.steps]),
                    step_functions=pulumi.Output.all(*arns).apply(json.dumps),
                    key_path=args.key_path,
                    checkpoint_ttl_seconds=encode(args.checkpoint_ttl_days * day),
                    retention_seconds=encode(args.completed_retention_days * day),
                ),
                **metrics_environment(name, args.monitoring),
            },
            timeout=900,  # one invocation runs steps until it checkpoints and returns
            durable=Durable(args.timeout_seconds, min(90, args.completed_retention_days)),
            parent=self,
            platform=self._platform,
        )
        self.durable_function = workflow.function
        self.durable_function_arn = workflow.function.qualified_arn
        # Its own executions: checkpoints, state, and (Load) whether a lease's holder still
        # runs; on `function:NAME:*`, as the Lambda developer guide's durable-functions
        # security page gives them (a policy of its own: it names the function).
        executions = workflow.function.arn.apply(lambda arn: f"{arn}:*")
        aws.iam.RolePolicy(
            f"{name}-workflow-executions",
            role=workflow.role.id,
            policy=pulumi.Output.json_dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        allow(
                            [
                                "lambda:CheckpointDurableExecution",
                                "lambda:GetDurableExecutionState",
                                "lambda:GetDurableExecution",
                            ],
                            [executions],
                        )
                    ],
                }
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        watch.alarm("runs-failed", watch.own("RunsFailed"), RUNS_FAILED)
        return {"durableFunctionArn": self.durable_function_arn}
