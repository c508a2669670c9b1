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
    assert notify["ResultSelector"] == {
        "done": True,
        "output.$": "$.MessageId",
        "by.$": "$$.Execution.Id",
    }


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


def deploy_durable() -> object:
    steps = [WorkflowStep("reserve", ARN + "reserve"), WorkflowStep("charge", ARN + "charge")]
    args = ResumableWorkflowArgs(steps, "$.order.id", backend="durable-function")
    return run(lambda: ResumableWorkflow("wf", args))


def test_the_durable_backend_is_one_published_durable_function_and_no_state_machine() -> None:
    world = deploy_durable()
    assert world.of_type("aws:sfn/stateMachine:StateMachine") == []  # type: ignore[attr-defined]
    function = world.named("wf-workflow")  # type: ignore[attr-defined]
    assert function.inputs["handler"] == "exactly_once.handlers.resumable_durable.handler"
    assert function.inputs["runtime"] == "python3.13" and function.inputs["publish"] is True
    assert function.inputs["durableConfig"] == {"executionTimeout": 86400, "retentionPeriod": 7}
    env = function.inputs["environment"]["variables"]
    assert json.loads(env["STEP_FUNCTIONS"]) == [ARN + "reserve", ARN + "charge"]
    assert env["KEY_PATH"] == "$.order.id"


def test_the_durable_workflow_may_touch_its_table_its_steps_and_its_own_executions() -> None:
    world = deploy_durable()
    policy = json.loads(world.named("wf-workflow-policy").inputs["policy"])  # type: ignore[attr-defined]
    by_action = {tuple(s["Action"]): s["Resource"] for s in policy["Statement"]}
    table = "arn:aws:dynamodb:us-east-1:123456789012:table/wf-checkpoints"
    assert by_action[("dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem")] == [table]
    assert by_action[("lambda:InvokeFunction",)] == [
        ARN + "reserve",
        ARN + "reserve:*",
        ARN + "charge",
        ARN + "charge:*",
    ]
    own = json.loads(world.named("wf-workflow-executions").inputs["policy"])  # type: ignore[attr-defined]
    [statement] = own["Statement"]
    assert statement["Resource"] == [ARN + "wf-workflow:*"]
    assert set(statement["Action"]) == {
        "lambda:CheckpointDurableExecution",
        "lambda:GetDurableExecutionState",
        "lambda:GetDurableExecution",
    }


@pytest.mark.parametrize(
    ("step", "key_path", "message"),
    [
        (WorkflowStep("s", "arn:aws:sqs:us-east-1:123456789012:q"), "$.id", "Lambda steps only"),
        (WorkflowStep("s", ARN + "s", retry=[]), "$.items[0].id", r"\$\.field"),
    ],
)
def test_what_the_durable_form_cannot_run_is_refused_with_the_reason(
    step: WorkflowStep, key_path: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ResumableWorkflowArgs([step], key_path, backend="durable-function")


def test_step_functions_retry_rules_are_refused_on_the_durable_form() -> None:
    from exactly_once.components.resumable import StepRetry

    step = WorkflowStep("s", ARN + "s", retry=[StepRetry(["Timeout"])])
    with pytest.raises(ValueError, match="retry rules are Step Functions'"):
        ResumableWorkflowArgs([step], "$.id", backend="durable-function")
