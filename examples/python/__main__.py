"""The components from Python: the classes themselves, no SDK to generate.

    pulumi up   (in a project whose Pulumi.yaml has runtime python and this project installed)

tests/unit/test_package.py runs this program under Pulumi mocks.
"""

from pathlib import Path

import pulumi

from exactly_once.components.api_starter import ApiGatewayStarter, ApiGatewayStarterArgs
from exactly_once.components.etl import IdempotentEtl, IdempotentEtlArgs, Trigger
from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs
from exactly_once.components.resumable import (
    ResumableWorkflow,
    ResumableWorkflowArgs,
    StepRetry,
    WorkflowStep,
)
from exactly_once.components.scheduler import Scheduler, SchedulerArgs
from exactly_once.handlers.executions import ReusePolicy

EXAMPLES = Path(__file__).resolve().parent.parent  # examples/: etl/ holds the transforms
config = pulumi.Config()
uploads = config.get("uploadsBucket") or "acme-uploads"  # EventBridge notifications on
workflow_arn = (
    config.get("stateMachineArn") or "arn:aws:states:us-east-1:123456789012:stateMachine:orders"
)
functions = "arn:aws:lambda:us-east-1:123456789012:function:"

starter = NameDedupStarter(
    "uploads-starter",
    NameDedupStarterArgs(
        bucket_name=uploads,
        state_machine_arn=workflow_arn,
        key_strategy="bucket-key-version",
        reuse_policy=ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    ),
)
api = ApiGatewayStarter(
    "orders-api", ApiGatewayStarterArgs(key_source="$.orderId", state_machine_arn=workflow_arn)
)
scheduler = Scheduler("reminders", SchedulerArgs(channels={"email": functions + "email"}))
orders = ResumableWorkflow(
    "orders",
    ResumableWorkflowArgs(
        steps=[
            WorkflowStep("reserve", functions + "reserve"),
            WorkflowStep("charge", functions + "charge", retry=[StepRetry(["Timeout"], 2)]),
            WorkflowStep("ship", functions + "ship"),
        ],
    ),
)
etl = IdempotentEtl(
    "invoices",
    IdempotentEtlArgs(
        transform="etl_transforms.csv_jsonl:transform",
        transform_source=str(EXAMPLES / "etl"),  # a team's own transform folder
        output_suffix=".jsonl",
        content_type="application/x-ndjson",
        input_bucket_name=uploads,
        input_prefix="invoices/",
        trigger=Trigger.EVENTBRIDGE,
    ),
)

# Each component's outputs under its own name: what `exactly-once ... --outputs FILE
# --component NAME` reads from `pulumi stack output --json > FILE` (docs/operations.md).
for name, component in {
    "starter": starter,
    "api": api,
    "scheduler": scheduler,
    "orders": orders,
    "invoices": etl,
}.items():
    pulumi.export(name, component.exports())
