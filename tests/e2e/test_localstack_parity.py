"""Where LocalStack is laxer than AWS, our host_executor plugins make it behave as AWS does.

Each test shows one difference on the running LocalStack, so a LocalStack upgrade that
changes the behaviour (or a plugin that stops loading) fails here, not in a pattern's test:
- Step Functions refuses execution names AWS refuses (`execution_names.py`): the API
  starter relies on a name over 80 characters being refused to answer 400 KeyTooLong.
- S3's EventBridge events carry the raw object key, notifications a URL-encoded one
  (`s3_events.py`): the starters and the ETL pass the key on as the object's real key.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote_plus

import pytest
from botocore.exceptions import ClientError

from tooling.clients import client, eventually, new_tag

KEY = "dir/a b+c é%41:1.csv"  # space, plus, unicode, a literal %41, a colon


def _start(machine: str, name: str) -> dict[str, Any]:
    return client("stepfunctions").start_execution(stateMachineArn=machine, name=name, input="{}")


@pytest.fixture(scope="module")
def machine() -> Iterator[str]:
    """A Pass-only machine of this test's own, so no pattern's workflow is started."""
    sfn, iam = client("stepfunctions"), client("iam")
    name = f"parity-{new_tag()}"
    role = iam.create_role(
        RoleName=name,
        AssumeRolePolicyDocument=json.dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "states.amazonaws.com"},
                        "Action": "sts:AssumeRole",
                    }
                ],
            }
        ),
    )["Role"]["Arn"]
    definition = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
    arn = sfn.create_state_machine(name=name, definition=json.dumps(definition), roleArn=role)[
        "stateMachineArn"
    ]
    try:
        yield arn
    finally:
        sfn.delete_state_machine(stateMachineArn=arn)
        iam.delete_role(RoleName=name)


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("x" * 81, "ValidationException"),
        ("a/b", "InvalidName"),
        ("a b", "InvalidName"),
        ("a:b", "InvalidName"),
        ("a#b", "InvalidName"),
        ("a\u0001b", "InvalidName"),
    ],
)
def test_step_functions_refuses_names_aws_refuses(machine: str, name: str, code: str) -> None:
    with pytest.raises(ClientError) as refused:
        _start(machine, name)
    assert refused.value.response["Error"]["Code"] == code
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_step_functions_takes_names_aws_takes(machine: str) -> None:
    for name in ("x" * 79 + new_tag()[:1], f"a-b_C9.{new_tag()}", f"donn\u00e9es-{new_tag()}"):
        name = name[:80]
        started = _start(machine, name)
        assert started["executionArn"].endswith(f":{name}")


@pytest.fixture(scope="module")
def bucket_events() -> Iterator[tuple[str, str, str]]:
    """A bucket sending both S3 event forms to queues:
    (bucket, notification queue, EventBridge queue)."""
    s3, sqs, events = client("s3"), client("sqs"), client("events")
    tag = new_tag()
    bucket, rule = f"parity-{tag}", f"parity-{tag}"
    s3.create_bucket(Bucket=bucket)
    queues = {}
    for form, principal in (("notification", "s3"), ("eventbridge", "events")):
        url = sqs.create_queue(QueueName=f"parity-{form}-{tag}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": f"{principal}.amazonaws.com"},
                    "Action": "sqs:SendMessage",
                    "Resource": arn,
                }
            ],
        }
        sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": json.dumps(policy)})
        queues[form] = (url, arn)
    s3.put_bucket_notification_configuration(
        Bucket=bucket,
        NotificationConfiguration={
            "QueueConfigurations": [
                {"QueueArn": queues["notification"][1], "Events": ["s3:ObjectCreated:*"]}
            ],
            "EventBridgeConfiguration": {},
        },
    )
    events.put_rule(
        Name=rule,
        EventPattern=json.dumps({"source": ["aws.s3"], "detail": {"bucket": {"name": [bucket]}}}),
    )
    events.put_targets(Rule=rule, Targets=[{"Id": "queue", "Arn": queues["eventbridge"][1]}])
    try:
        yield bucket, queues["notification"][0], queues["eventbridge"][0]
    finally:
        events.remove_targets(Rule=rule, Ids=["queue"])
        events.delete_rule(Name=rule)
        for url, _ in queues.values():
            sqs.delete_queue(QueueUrl=url)
        for listed in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
            s3.delete_object(Bucket=bucket, Key=listed["Key"])
        s3.delete_bucket(Bucket=bucket)


def _object_keys(queue_url: str) -> list[Any]:
    """The object keys of the S3 events on the queue (test events S3 sends first skipped)."""
    received = client("sqs").receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1
    )
    found = []
    for message in received.get("Messages", []):
        body = json.loads(message["Body"])
        if "detail" in body:
            found.append(body["detail"]["object"]["key"])
        found.extend(record["s3"]["object"]["key"] for record in body.get("Records", []))
    return found


def test_s3_event_keys_are_raw_in_eventbridge_and_url_encoded_in_notifications(
    bucket_events: tuple[str, str, str],
) -> None:
    bucket, notification_queue, eventbridge_queue = bucket_events
    client("s3").put_object(Bucket=bucket, Key=KEY, Body=b"x")

    [raw] = eventually(lambda: _object_keys(eventbridge_queue))
    assert raw == KEY  # AWS: detail.object.key is the key itself

    [encoded] = eventually(lambda: _object_keys(notification_queue))
    assert encoded != KEY and "%41" not in encoded  # AWS: URL-encoded
    assert unquote_plus(encoded) == KEY  # what handlers/s3_events.py reads it as
