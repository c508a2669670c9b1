"""ResumableWorkflow under Pulumi mocks: generated definition and least privilege."""

from __future__ import annotations

import json

import pytest

from exactly_once.components.resumable import ResumableWorkflow, ResumableWorkflowArgs, WorkflowStep
from tests.unit.pulumi_harness import run

ARN = "arn:aws:lambda:us-east-1:123456789012:function:"


def deploy():
    steps = [WorkflowStep("reserve", ARN + "reserve"), WorkflowStep("charge", ARN + "charge")]
    return run(lambda: ResumableWorkflow("wf", ResumableWorkflowArgs(steps, "$.orderId")))


def test_the_definition_is_generated_from_the_steps() -> None:
    machine = deploy().named("wf-workflow")
    definition = json.loads(machine.inputs["definition"])
    assert definition["States"]["reserve"]["Parameters"]["FunctionName"] == ARN + "reserve"
    assert machine.inputs["type"] == "STANDARD"


def test_the_role_may_touch_only_its_table_and_its_functions() -> None:
    policy = json.loads(deploy().named("wf-workflow-policy").inputs["policy"])
    [table, invoke] = policy["Statement"]
    assert sorted(table["Action"]) == [
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    ]
    assert table["Resource"] == ["arn:aws:dynamodb:us-east-1:123456789012:table/wf-checkpoints"]
    assert invoke["Resource"] == [
        ARN + "reserve",
        ARN + "charge",
        ARN + "reserve:*",
        ARN + "charge:*",
    ]


def test_ttl_is_on() -> None:
    table = deploy().named("wf-checkpoints")
    assert table.inputs["ttl"] == {"attributeName": "expires_at", "enabled": True}


def test_bad_steps_are_refused_before_anything_is_created() -> None:
    with pytest.raises(ValueError, match="unique"):
        ResumableWorkflowArgs([WorkflowStep("a", "x"), WorkflowStep("a", "y")]).validate()
