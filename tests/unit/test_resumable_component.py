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
    world = deploy()
    policy = json.loads(world.named("wf-workflow-policy").inputs["policy"])
    [table, invoke] = policy["Statement"]
    assert table["Action"] == ["dynamodb:UpdateItem"]  # the Saves; the function does the rest
    assert table["Resource"] == ["arn:aws:dynamodb:us-east-1:123456789012:table/wf-checkpoints"]
    assert invoke["Action"] == ["lambda:InvokeFunction"]
    assert invoke["Resource"][0].endswith(":function:wf-checkpoint")
    assert invoke["Resource"][1:] == [
        ARN + "reserve",
        ARN + "reserve:*",
        ARN + "charge",
        ARN + "charge:*",
    ]


def test_steps_of_other_kinds_are_delivered_and_granted_with_their_own_action() -> None:
    queue = "arn:aws:sqs:us-east-1:123456789012:orders"
    steps = [WorkflowStep("reserve", ARN + "reserve"), WorkflowStep("notify", queue)]
    world = run(lambda: ResumableWorkflow("wf", ResumableWorkflowArgs(steps, "$.orderId")))
    policy = json.loads(world.named("wf-workflow-policy").inputs["policy"])
    by_action = {tuple(s["Action"]): s["Resource"] for s in policy["Statement"]}
    assert by_action[("sqs:SendMessage",)] == [queue]
    definition = json.loads(world.named("wf-workflow").inputs["definition"])
    notify = definition["States"]["notify"]
    assert notify["Resource"] == "arn:aws:states:::sqs:sendMessage"
    assert (
        notify["Parameters"]["QueueUrl"]
        == "https://sqs.us-east-1.amazonaws.com/123456789012/orders"
    )
    assert notify["ResultSelector"] == {"done": True, "output.$": "$.MessageId"}


def test_a_step_of_an_unsupported_kind_is_refused_where_it_is_written() -> None:
    with pytest.raises(ValueError, match="step 'save'"):
        ResumableWorkflowArgs([WorkflowStep("save", "arn:aws:s3:::bucket")])


def test_the_checkpoint_function_reads_its_table_and_asks_after_its_own_executions() -> None:
    world = deploy()
    [table, _logs] = json.loads(world.named("wf-checkpoint-policy").inputs["policy"])["Statement"]
    assert sorted(table["Action"]) == [
        "dynamodb:DeleteItem",
        "dynamodb:GetItem",
        "dynamodb:UpdateItem",
    ]
    [describe] = json.loads(world.named("wf-checkpoint-describe").inputs["policy"])["Statement"]
    assert describe["Action"] == ["states:DescribeExecution"]
    assert describe["Resource"] == ["arn:aws:states:us-east-1:123456789012:execution:wf-workflow:*"]


def test_retention_ttl_and_timeout_reach_the_function_and_the_machine() -> None:
    world = deploy()
    variables = world.named("wf-checkpoint").inputs["environment"]["variables"]
    assert json.loads(variables["STEPS"]) == ["reserve", "charge"]
    assert variables["RETENTION_SECONDS"] == str(7 * 86400)
    assert variables["CHECKPOINT_TTL_SECONDS"] == str(30 * 86400)
    definition = json.loads(world.named("wf-workflow").inputs["definition"])
    assert definition["TimeoutSeconds"] == 24 * 3600


def test_ttl_is_on() -> None:
    table = deploy().named("wf-checkpoints")
    assert table.inputs["ttl"] == {"attributeName": "expires_at", "enabled": True}


def test_bad_steps_are_refused_before_anything_is_created() -> None:
    with pytest.raises(ValueError, match="unique"):
        ResumableWorkflowArgs([WorkflowStep("a", "x"), WorkflowStep("a", "y")]).validate()
    with pytest.raises(ValueError, match="completed_retention_days must be at least 1"):
        ResumableWorkflowArgs([WorkflowStep("a", ARN + "a")], completed_retention_days=0)
