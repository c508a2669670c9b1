"""Every IAM role a component creates takes the caller's permissions boundary and path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from exactly_once.components.api_starter import ApiGatewayStarter, ApiGatewayStarterArgs
from exactly_once.components.etl import IdempotentEtl, IdempotentEtlArgs
from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs
from exactly_once.components.resumable import (
    ResumableWorkflow,
    ResumableWorkflowArgs,
    WorkflowStep,
)
from exactly_once.components.roles import RoleOptions
from exactly_once.components.scheduler import Scheduler, SchedulerArgs
from tests.unit.pulumi_harness import run

BOUNDARY = "arn:aws:iam::123456789012:policy/team-boundary"
FN = "arn:aws:lambda:us-east-1:123456789012:function:f"
WORKFLOW = '{"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}'
ETL = {"transform": "etl_transforms.csv_jsonl:transform", "transform_source": "examples/etl"}

COMPONENTS: dict[str, Callable[[RoleOptions | None], Any]] = {
    "name-dedup": lambda roles: NameDedupStarter(
        "c", NameDedupStarterArgs(bucket_name="b", definition=WORKFLOW, roles=roles)
    ),
    "api-starter": lambda roles: ApiGatewayStarter(
        "c", ApiGatewayStarterArgs(definition=WORKFLOW, bucket_name="b", roles=roles)
    ),
    "scheduler": lambda roles: Scheduler("c", SchedulerArgs({"demo": FN}, roles=roles)),
    "resumable": lambda roles: ResumableWorkflow(
        "c", ResumableWorkflowArgs([WorkflowStep("a", FN)], roles=roles)
    ),
    "etl": lambda roles: IdempotentEtl("c", IdempotentEtlArgs(**ETL, roles=roles)),
}


@pytest.mark.parametrize("component", list(COMPONENTS))
def test_every_role_gets_the_boundary_and_path(component: str) -> None:
    roles = RoleOptions(permissions_boundary=BOUNDARY, path="/service/exactly-once/")
    created = run(lambda: COMPONENTS[component](roles)).of_type("aws:iam/role:Role")
    assert created, f"{component} creates no role"
    for role in created:
        assert role.inputs.get("permissionsBoundary") == BOUNDARY, role.name
        assert role.inputs.get("path") == "/service/exactly-once/", role.name


def test_without_options_roles_are_left_as_they_were() -> None:
    created = run(lambda: COMPONENTS["scheduler"](None)).of_type("aws:iam/role:Role")
    assert all("permissionsBoundary" not in role.inputs for role in created)
