"""The IAM model LocalStack enforces in host mode (localstack/host_executor/.../iam_policy.py):
what each call needs, and AWS's evaluation of the policies that may grant it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "localstack" / "host_executor"))
from host_executor.iam_policy import (
    Principal,
    Unmapped,
    decide,
    function_arn,
    queue_arn,
    required,
)

ACCOUNT, REGION = "123456789012", "us-east-1"
ROLE = Principal(arn=f"arn:aws:sts::{ACCOUNT}:assumed-role/worker-role/session-1")
EVENTS = Principal(service="events.amazonaws.com")
TABLE = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/orders"
FUNCTION = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:starter"
RULE = f"arn:aws:events:{REGION}:{ACCOUNT}:rule/uploads"


def needs(service: str, operation: str, **params: object) -> list[tuple[str, str]]:
    return required(service, operation, params, REGION, ACCOUNT)


def policy(*statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def allow(actions: list[str], resources: list[str], **extra: object) -> dict:
    return {"Effect": "Allow", "Action": actions, "Resource": resources, **extra}


# -- what a call needs ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("operation", "params", "expected"),
    [
        ("GetObject", {"Key": "a/b.csv"}, [("s3:GetObject", "arn:aws:s3:::b/a/b.csv")]),
        (
            "GetObject",
            {"Key": "k", "VersionId": "v1"},
            [("s3:GetObjectVersion", "arn:aws:s3:::b/k")],
        ),
        ("HeadObject", {"Key": "k"}, [("s3:GetObject", "arn:aws:s3:::b/k")]),
        ("PutObject", {"Key": "k"}, [("s3:PutObject", "arn:aws:s3:::b/k")]),
        (
            "CopyObject",
            {"Key": "out", "CopySource": "src/in%20put.csv?versionId=v2"},
            [
                ("s3:PutObject", "arn:aws:s3:::b/out"),
                ("s3:GetObjectVersion", "arn:aws:s3:::src/in put.csv"),
            ],
        ),
        ("ListObjectsV2", {}, [("s3:ListBucket", "arn:aws:s3:::b")]),
        ("AbortMultipartUpload", {"Key": "k"}, [("s3:AbortMultipartUpload", "arn:aws:s3:::b/k")]),
    ],
)
def test_s3_calls(operation: str, params: dict, expected: list) -> None:
    assert needs("s3", operation, Bucket="b", **params) == expected


def test_dynamodb_calls_name_the_table_or_the_index() -> None:
    assert needs("dynamodb", "PutItem", TableName="orders") == [("dynamodb:PutItem", TABLE)]
    assert needs("dynamodb", "Query", TableName="orders", IndexName="by-status") == [
        ("dynamodb:Query", f"{TABLE}/index/by-status")
    ]
    write = needs(
        "dynamodb",
        "TransactWriteItems",
        TransactItems=[{"Put": {"TableName": "orders"}}, {"ConditionCheck": {"TableName": "o"}}],
    )
    assert [action for action, _ in write] == ["dynamodb:PutItem", "dynamodb:ConditionCheckItem"]


def test_stream_calls_name_the_stream_and_list_streams_only_star() -> None:
    stream = f"{TABLE}/stream/2026-01-01T00:00:00.000"
    assert needs("dynamodbstreams", "GetRecords", ShardIterator=f"{stream}|1|abc") == [
        ("dynamodb:GetRecords", stream)
    ]
    assert needs("dynamodbstreams", "ListStreams") == [("dynamodb:ListStreams", "*")]


def test_step_functions_calls() -> None:
    machine = f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:m"
    assert needs("stepfunctions", "StartExecution", stateMachineArn=machine) == [
        ("states:StartExecution", machine)
    ]
    execution = f"arn:aws:states:{REGION}:{ACCOUNT}:execution:m:x"
    assert needs("stepfunctions", "StopExecution", executionArn=execution) == [
        ("states:StopExecution", execution)
    ]


@pytest.mark.parametrize(
    "url",
    [
        f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/dlq",
        f"http://sqs.{REGION}.localhost.localstack.cloud:4566/{ACCOUNT}/dlq",
        f"http://127.0.0.1:4566/{ACCOUNT}/dlq",
    ],
)
def test_queue_urls_become_queue_arns(url: str) -> None:
    assert queue_arn(url, REGION, ACCOUNT) == f"arn:aws:sqs:{REGION}:{ACCOUNT}:dlq"
    assert needs("sqs", "SendMessageBatch", QueueUrl=url) == [
        ("sqs:SendMessage", f"arn:aws:sqs:{REGION}:{ACCOUNT}:dlq")
    ]


@pytest.mark.parametrize(
    ("name", "qualifier", "expected"),
    [
        ("starter", None, FUNCTION),
        ("starter:live", None, f"{FUNCTION}:live"),
        ("starter", "3", f"{FUNCTION}:3"),
        (f"{ACCOUNT}:function:starter", None, FUNCTION),
        (FUNCTION, None, FUNCTION),
    ],
)
def test_function_names_become_function_arns(name: str, qualifier: str | None, expected: str):
    assert function_arn(name, qualifier, REGION, ACCOUNT) == expected


def test_log_writes_name_the_stream_inside_the_group() -> None:
    assert needs("logs", "PutLogEvents", logGroupName="/fn", logStreamName="s") == [
        ("logs:PutLogEvents", f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/fn:log-stream:s")
    ]


@pytest.mark.parametrize(
    ("service", "operation"), [("s3", "PutBucketPolicy"), ("iam", "CreateRole"), ("sqs", "X")]
)
def test_an_unknown_operation_is_unmapped_never_passed(service: str, operation: str) -> None:
    with pytest.raises(Unmapped):
        needs(service, operation)


# -- AWS's evaluation ---------------------------------------------------------------------------
def test_an_identity_policy_allows_what_it_names_and_nothing_else() -> None:
    granted = [policy(allow(["dynamodb:PutItem"], [TABLE]))]
    assert decide(ROLE, "dynamodb:PutItem", TABLE, granted).allowed
    refused = decide(ROLE, "dynamodb:DeleteItem", TABLE, granted)
    assert not refused.allowed
    assert refused.reason == (
        f"User: {ROLE.arn} is not authorized to perform: dynamodb:DeleteItem on resource: "
        f"{TABLE} because no identity-based policy allows the dynamodb:DeleteItem action"
    )
    assert not decide(ROLE, "dynamodb:PutItem", f"{TABLE}-other", granted).allowed


def test_actions_compare_case_insensitively_resources_do_not() -> None:
    granted = [policy(allow(["DynamoDB:putitem"], [TABLE]))]
    assert decide(ROLE, "dynamodb:PutItem", TABLE, granted).allowed
    assert not decide(ROLE, "dynamodb:PutItem", TABLE.upper(), granted).allowed


def test_an_explicit_deny_wins() -> None:
    documents = [
        policy(allow(["dynamodb:*"], ["*"])),
        policy({"Effect": "Deny", "Action": "dynamodb:DeleteItem", "Resource": TABLE}),
    ]
    assert decide(ROLE, "dynamodb:PutItem", TABLE, documents).allowed
    assert "explicit deny" in decide(ROLE, "dynamodb:DeleteItem", TABLE, documents).reason


def test_wildcards_are_iam_wildcards_not_regular_expressions() -> None:
    granted = [policy(allow(["s3:GetObject"], ["arn:aws:s3:::b/in+put/?.csv"]))]
    assert decide(ROLE, "s3:GetObject", "arn:aws:s3:::b/in+put/a.csv", granted).allowed
    assert not decide(ROLE, "s3:GetObject", "arn:aws:s3:::b/innput/a.csv", granted).allowed
    assert not decide(ROLE, "s3:GetObject", "arn:aws:s3:::b/in+put/ab.csv", granted).allowed


def test_a_resource_policy_lets_in_the_service_it_names_from_the_source_it_names() -> None:
    # GIVEN the function policy `aws lambda add-permission --principal events... --source-arn`
    statement = allow(
        ["lambda:InvokeFunction"],
        [FUNCTION],
        Principal={"Service": "events.amazonaws.com"},
        Condition={"ArnLike": {"AWS:SourceArn": RULE}},
    )
    resource = policy(statement)

    def invoke(principal: Principal, source: str | None) -> bool:
        context = {"aws:SourceArn": source} if source else {}
        return decide(principal, "lambda:InvokeFunction", FUNCTION, [], resource, context).allowed

    assert invoke(EVENTS, RULE)
    assert not invoke(EVENTS, f"{RULE}-other")  # another rule
    assert not invoke(EVENTS, None)  # no source: a positive condition fails
    assert not invoke(Principal(service="s3.amazonaws.com"), RULE)  # another service
    assert not invoke(ROLE, RULE)  # a role, with no identity policy granting it


def test_arn_like_matches_each_arn_part_on_its_own() -> None:
    statement = allow(
        ["sqs:SendMessage"],
        ["*"],
        Principal={"Service": "events.amazonaws.com"},
        Condition={"ArnLike": {"aws:SourceArn": "arn:aws:events:*:123456789012:rule/*"}},
    )
    resource = policy(statement)
    queue = f"arn:aws:sqs:{REGION}:{ACCOUNT}:dlq"

    def send(source: str) -> bool:
        context = {"aws:sourcearn": source}
        return decide(EVENTS, "sqs:SendMessage", queue, [], resource, context).allowed

    assert send(RULE)
    assert not send(f"arn:aws:events:{REGION}:999999999999:rule/uploads")
    # a '*' never spans a ':' (the region part cannot swallow the account part)
    assert not send("arn:aws:events:us-east-1:x:123456789012:rule/r")


def test_a_condition_operator_it_cannot_evaluate_fails_closed() -> None:
    statement = allow(
        ["dynamodb:PutItem"], [TABLE], Condition={"DateGreaterThan": {"aws:CurrentTime": "x"}}
    )
    decision = decide(ROLE, "dynamodb:PutItem", TABLE, [policy(statement)])
    assert not decision.allowed
    assert "DateGreaterThan" in decision.reason


def test_a_trust_policy_names_the_service_that_may_assume_the_role() -> None:
    trust = policy(
        {
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    )
    role = f"arn:aws:iam::{ACCOUNT}:role/worker-role"
    lam = Principal(service="lambda.amazonaws.com")
    assert decide(lam, "sts:AssumeRole", role, [], trust).allowed
    states = Principal(service="states.amazonaws.com")
    assert not decide(states, "sts:AssumeRole", role, [], trust).allowed


def test_a_durable_execution_call_is_authorized_on_the_execution_arn_aws_gives_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN the local runner's opaque execution id, and the ARN AWS would give the execution
    # (function:NAME:VERSION/durable-execution/NAME/ID), as durable.py records them
    from host_executor import iam_policy

    runner = "5b1c/9e2f"
    aws = f"{FUNCTION}:3/durable-execution/order-7/9e2f"
    monkeypatch.setattr(iam_policy, "durable_execution_arn", {runner: aws}.get)
    for operation in ("CheckpointDurableExecution", "GetDurableExecutionState"):
        assert needs("lambda", operation, DurableExecutionArn=runner) == [
            (f"lambda:{operation}", aws)
        ]
    # THEN the role AWS documents for a durable function (function:NAME:*) is allowed, an
    # unqualified function ARN never matches an execution
    allowed = policy(allow(["lambda:CheckpointDurableExecution"], [f"{FUNCTION}:*"]))
    unqualified = policy(allow(["lambda:CheckpointDurableExecution"], [FUNCTION]))
    assert decide(ROLE, "lambda:CheckpointDurableExecution", aws, [allowed], None, {}).allowed
    assert not decide(
        ROLE, "lambda:CheckpointDurableExecution", aws, [unqualified], None, {}
    ).allowed
    assert needs("lambda", "ListDurableExecutionsByFunction", FunctionName="starter") == [
        ("lambda:ListDurableExecutionsByFunction", FUNCTION)
    ]
