"""A state machine created from `definition` gets the permissions its Tasks need, no more."""

from __future__ import annotations

import json

import pytest

from exactly_once.components.state_machines import task_statements
from tests.unit.pulumi_harness import run

FN = "arn:aws:lambda:us-east-1:123456789012:function:charge"
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/orders"
TOPIC = "arn:aws:sns:us-east-1:123456789012:alerts"


def task(resource: str, **parameters: object) -> dict:
    return {"Type": "Task", "Resource": resource, "Parameters": parameters, "End": True}


def machine(*states: dict) -> dict:
    named = {f"S{i}": state for i, state in enumerate(states)}
    return {"StartAt": "S0", "States": named}


def test_each_integration_is_granted_on_the_resource_its_task_names() -> None:
    definition = machine(
        task("arn:aws:states:::lambda:invoke", FunctionName=FN, **{"Payload.$": "$"}),
        task("arn:aws:states:::sqs:sendMessage", QueueUrl=QUEUE, **{"MessageBody.$": "$"}),
        task("arn:aws:states:::sns:publish", TopicArn=TOPIC, Message="m"),
        task("arn:aws:states:::dynamodb:putItem", TableName="orders", Item={}),
        task("arn:aws:states:::events:putEvents", Entries=[{"Detail": {}, "EventBusName": "b"}]),
        {"Type": "Pass", "End": True},
    )
    assert task_statements(json.dumps(definition)) == [
        {
            "Effect": "Allow",
            "Action": ["dynamodb:PutItem"],
            "Resource": ["arn:aws:dynamodb:*:*:table/orders"],
        },
        {
            "Effect": "Allow",
            "Action": ["events:PutEvents"],
            "Resource": ["arn:aws:events:*:*:event-bus/b"],
        },
        {"Effect": "Allow", "Action": ["lambda:InvokeFunction"], "Resource": [FN, f"{FN}:*"]},
        {"Effect": "Allow", "Action": ["sns:Publish"], "Resource": [TOPIC]},
        {
            "Effect": "Allow",
            "Action": ["sqs:SendMessage"],
            "Resource": ["arn:aws:sqs:us-east-1:123456789012:orders"],
        },
    ]


def test_tasks_inside_parallel_and_map_states_and_direct_function_arns_count() -> None:
    inner = machine(task(f"{FN}:live"))
    definition = machine(
        {"Type": "Parallel", "Branches": [inner], "End": True},
        {
            "Type": "Map",
            "ItemProcessor": machine(task(TOPIC.replace("sns", "lambda"))),
            "End": True,
        },
    )
    [statement] = task_statements(definition)
    assert statement["Action"] == ["lambda:InvokeFunction"]
    assert FN in statement["Resource"] and f"{FN}:*" in statement["Resource"]


def test_a_definition_without_tasks_needs_nothing() -> None:
    assert task_statements(machine({"Type": "Wait", "Seconds": 1, "End": True})) == []


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (task("arn:aws:states:::lambda:invoke", **{"FunctionName.$": "$.fn"}), "at run time"),
        (
            task("arn:aws:states:::lambda:invoke.waitForTaskToken", FunctionName=FN),
            "cannot be derived",
        ),
        (
            task("arn:aws:states:::states:startExecution.sync", StateMachineArn="x"),
            "cannot be derived",
        ),
        (task("arn:aws:states:::aws-sdk:s3:getObject", Bucket="b"), "cannot be derived"),
    ],
)
def test_what_cannot_be_derived_is_refused_with_the_way_out(state: dict, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as refused:
        task_statements(machine(state))
    assert "state_machine_arn" in str(refused.value)


def test_a_starter_given_a_definition_grants_its_tasks_to_the_machines_role() -> None:
    from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs

    definition = json.dumps(machine(task("arn:aws:states:::lambda:invoke", FunctionName=FN)))
    mocks = run(
        lambda: NameDedupStarter(
            "nd", NameDedupStarterArgs(bucket_name="uploads", definition=definition)
        )
    )
    policy = json.loads(mocks.named("nd-workflow-policy").inputs["policy"])
    assert policy["Statement"] == [
        {"Effect": "Allow", "Action": ["lambda:InvokeFunction"], "Resource": [FN, f"{FN}:*"]}
    ]


def test_a_starter_refuses_a_definition_it_cannot_grant_where_it_is_written() -> None:
    from exactly_once.components.name_dedup import NameDedupStarterArgs

    definition = json.dumps(machine(task("arn:aws:states:::aws-sdk:s3:getObject", Bucket="b")))
    with pytest.raises(ValueError, match="cannot be derived"):
        NameDedupStarterArgs(bucket_name="uploads", definition=definition)


@pytest.mark.parametrize(
    "arn",
    [
        "arn:aws:sqs:us-east-1:123456789012:queue",
        "arn:aws:lambda:us-east-1:123456789012:function:f",
        "arn:aws:states:us-east-1:123456789012:execution:m:run",
    ],
)
def test_a_starter_target_must_be_a_state_machine(arn: str) -> None:
    from exactly_once.components.api_starter import ApiGatewayStarterArgs
    from exactly_once.components.name_dedup import NameDedupStarterArgs

    with pytest.raises(ValueError, match="not a Step Functions state machine ARN"):
        NameDedupStarterArgs(bucket_name="uploads", state_machine_arn=arn)
    with pytest.raises(ValueError, match="not a Step Functions state machine ARN"):
        ApiGatewayStarterArgs(state_machine_arn=arn)
