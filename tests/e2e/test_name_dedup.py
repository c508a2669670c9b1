"""Pattern 1 on LocalStack, triggered by S3 PutObject (stack: bucket-key-version strategy,
ALLOW_DUPLICATE_FAILED_ONLY reuse policy, demo workflow failing keys with 'fail')."""

from __future__ import annotations

import copy
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tooling import events
from tooling.clients import (
    client,
    dead_letters,
    eventually,
    execution_input,
    executions,
    invoke,
    log_lines,
    new_tag,
    steady,
)


@pytest.fixture
def starter(stack: dict[str, Any]) -> dict[str, Any]:
    return stack["nameDedup"]


def upload(starter: dict[str, Any], key: str, body: bytes = b"data") -> None:
    client("s3").put_object(Bucket=starter["bucket"], Key=key, Body=body)


def delivered_event(starter: dict[str, Any], tag: str) -> dict[str, Any]:
    """The EventBridge event S3 produced for the upload tagged `tag`."""
    [execution] = eventually(lambda: executions(starter["stateMachineArn"], tag))
    return execution_input(execution["executionArn"])["event"]


def count(starter: dict[str, Any], tag: str) -> int:
    return len(executions(starter["stateMachineArn"], tag))


def test_one_object_starts_exactly_one_execution(starter: dict[str, Any]) -> None:
    tag = new_tag()
    upload(starter, f"in/{tag}/a.csv")
    eventually(lambda: count(starter, tag))
    assert steady(lambda: count(starter, tag)) == 1


def test_redelivered_event_adds_no_execution(starter: dict[str, Any]) -> None:
    # GIVEN an upload and the event it produced
    tag = new_tag()
    upload(starter, f"in/{tag}/a.csv")
    event = delivered_event(starter, tag)
    # WHEN the identical event reaches the starter again, as a Lambda retry would deliver it
    assert invoke(starter["functionName"], event)["status"] == "DUPLICATE"
    # AND the identical event is put on the bus again (a new EventBridge event id)
    response = client("events").put_events(Entries=[events.rebroadcast(event)])
    assert response["FailedEntryCount"] == 0
    event_id = response["Entries"][0]["EventId"]
    # THEN the rule delivered it, the starter called it a duplicate, and one execution stands
    eventually(
        lambda: [
            line
            for line in log_lines(starter["functionName"])
            if event_id in line and '"DUPLICATE"' in line
        ]
    )
    assert steady(lambda: count(starter, tag)) == 1


def test_a_redelivery_after_the_execution_completed_adds_nothing(starter: dict[str, Any]) -> None:
    # GIVEN an upload whose execution has finished
    tag = new_tag()
    upload(starter, f"in/{tag}/done.csv")
    event = delivered_event(starter, tag)
    [execution] = executions(starter["stateMachineArn"], tag)
    sfn = client("stepfunctions")
    arn = execution["executionArn"]
    eventually(lambda: sfn.describe_execution(executionArn=arn)["status"] == "SUCCEEDED")
    # WHEN the same event is delivered again (STANDARD keeps a closed execution's name)
    assert invoke(starter["functionName"], event)["status"] == "DUPLICATE"
    # THEN the finished execution is still the only one
    assert steady(lambda: count(starter, tag), seconds=2) == 1


def test_concurrent_burst_of_twenty_identical_deliveries_starts_one(
    starter: dict[str, Any],
) -> None:
    # GIVEN a real S3 event, re-keyed so that no upload has started it yet
    tag = new_tag()
    upload(starter, f"in/{tag}/template.csv")
    template = delivered_event(starter, tag)
    burst_tag = new_tag()
    event = copy.deepcopy(template)
    event["detail"]["object"]["key"] = f"in/{burst_tag}/a.csv"
    # WHEN 20 identical deliveries arrive at once
    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(lambda _: invoke(starter["functionName"], event), range(20)))
    # THEN exactly one execution exists, and exactly one delivery says it started it
    assert sorted(r["status"] for r in results) == ["DUPLICATE"] * 19 + ["STARTED"]
    assert len({r["execution_arn"] for r in results}) == 1
    assert steady(lambda: count(starter, burst_tag)) == 1


def test_overwrite_of_the_same_key_is_new_work(starter: dict[str, Any]) -> None:
    tag = new_tag()
    key = f"in/{tag}/a.csv"
    upload(starter, key, b"v1")
    eventually(lambda: count(starter, tag) == 1)
    upload(starter, key, b"v2")
    eventually(lambda: count(starter, tag) == 2)
    assert steady(lambda: count(starter, tag)) == 2


def test_failed_execution_is_retried_once_under_the_next_attempt_name(
    starter: dict[str, Any],
) -> None:
    # GIVEN an upload whose workflow fails (the demo workflow fails keys containing 'fail')
    tag = new_tag()
    upload(starter, f"in/{tag}/fail.csv")
    event = delivered_event(starter, tag)
    [first] = executions(starter["stateMachineArn"], tag)
    eventually(
        lambda: (
            client("stepfunctions").describe_execution(executionArn=first["executionArn"])["status"]
            == "FAILED"
        )
    )
    # WHEN the event is delivered again: a deliberate retry of the failed run
    retry = invoke(starter["functionName"], event)
    # THEN a new execution starts under the next attempt name
    assert (retry["status"], retry["attempt"]) == ("STARTED", 1)
    assert retry["name"] == first["name"] + "-r1"
    # AND a duplicate of that retry, while it runs, adds nothing
    assert invoke(starter["functionName"], event)["status"] == "DUPLICATE"
    assert steady(lambda: count(starter, tag), seconds=1) == 2


def test_bad_event_goes_to_the_dlq_and_starts_nothing(starter: dict[str, Any]) -> None:
    # GIVEN an event that matches the rule but carries no object key
    tag = new_tag()
    detail = {"bucket": {"name": starter["bucket"]}, "object": {"size": 1}, "tag": tag}
    response = client("events").put_events(
        Entries=[
            {
                "Source": "aws.s3",
                "DetailType": "Object Created",
                "Detail": json.dumps(detail),
                "Resources": [],
            }
        ]
    )
    assert response["FailedEntryCount"] == 0
    # THEN it is parked in the DLQ with the reason
    [message] = eventually(
        lambda: [
            m
            for m in dead_letters(starter["dlqUrl"], tag)
            if m.get("event", {}).get("detail", {}).get("tag") == tag
        ]
    )
    assert "detail.object.key" in message["reason"]
    # AND nothing started
    assert count(starter, tag) == 0


def test_a_key_with_spaces_plus_and_unicode_reaches_the_workflow_as_written(
    starter: dict[str, Any],
) -> None:
    # GIVEN a key EventBridge must carry as it is (S3 notifications would URL-encode it)
    tag = new_tag()
    key = f"in/{tag}/a b+c données.csv"
    upload(starter, key)
    # THEN the workflow gets the real key, in the event and in its dedup key
    event = delivered_event(starter, tag)
    assert event["detail"]["object"]["key"] == key
    [execution] = executions(starter["stateMachineArn"], tag)
    assert f"/{key}#" in execution_input(execution["executionArn"])["key"]


def test_one_key_in_two_buckets_of_one_pattern_is_two_events(stack: dict[str, Any]) -> None:
    # GIVEN a starter whose rule matches two buckets, deduplicating by object key
    out = stack["nameDedupKeys"]
    first, second = out["buckets"]
    tag = new_tag()
    key = f"in/{tag}.csv"
    # WHEN the same key is written to each bucket, and once more to the first
    for bucket in (first, second):
        client("s3").put_object(Bucket=bucket, Key=key, Body=b"x")
    eventually(lambda: len(executions(out["stateMachineArn"], tag)) == 2)
    client("s3").put_object(Bucket=first, Key=key, Body=b"overwrite")
    # THEN two executions: one per bucket (the overwrite is a duplicate, by this strategy)
    started = steady(lambda: executions(out["stateMachineArn"], tag))
    keys = sorted(execution_input(e["executionArn"])["key"] for e in started)
    assert keys == sorted([f"{first}/{key}", f"{second}/{key}"])
