"""The reliability suite (marker `faults`): duplicate storms, throttles injected into
LocalStack (`tooling.clients.fault`) and a bad-input table per entry point.
STORM_SIZE sets the storm (CI: 60; full size: STORM_SIZE=1000)."""

from __future__ import annotations

import json
import math
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from exactly_once.handlers import scheduler as scheduler_handlers
from tests.e2e.retries import retry_warning, started_once_by_the_retry
from tooling import events as s3
from tooling.clients import (
    api_executions,
    client,
    dead_lettered,
    dead_letters,
    eventually,
    execution_input,
    executions,
    fault,
    fire_record,
    http,
    invoke,
    invoke_raw,
    keys,
    new_tag,
    states_entered,
    steady,
)

pytestmark = pytest.mark.faults
STORM = int(os.environ.get("STORM_SIZE", "60"))


def test_storm_through_the_name_dedup_starter(stack: dict[str, Any]) -> None:
    out = stack["nameDedup"]
    tag = new_tag()
    # GIVEN STORM distinct real S3 events
    template = None
    client("s3").put_object(Bucket=out["bucket"], Key=f"storm/{tag}/template", Body=b"x")
    [first] = eventually(lambda: executions(out["stateMachineArn"], tag))
    template = execution_input(first["executionArn"])["event"]
    events = []
    for i in range(STORM):
        event = json.loads(json.dumps(template))
        event["detail"]["object"]["key"] = f"storm/{tag}/{i}"
        event["detail"]["object"]["version-id"] = f"v{i}"
        events.append(event)
    # WHEN they arrive with 30% redeliveries, shuffled, in concurrent bursts
    rng = random.Random(7)
    deliveries = events + rng.sample(events, int(STORM * 0.3))
    rng.shuffle(deliveries)
    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda e: invoke_raw(out["functionName"], e), deliveries))
    # THEN every delivery was handled, and executions == distinct events (+ the template)
    assert all(ok for ok, _ in results), [p for ok, p in results if not ok][:3]
    assert steady(lambda: len(executions(out["stateMachineArn"], tag)), seconds=3) == STORM + 1


def test_storm_through_the_etl(stack: dict[str, Any]) -> None:
    out = stack["etl"]["etl-control"]
    tag = new_tag()
    events = []
    for i in range(STORM // 3):
        key = f"in/{tag}/{i}.csv"
        put = client("s3").put_object(
            Bucket=out["inputBucket"], Key=key, Body=b"id,name,amount\n1,a,2\n"
        )
        events.append(s3.notification(out["inputBucket"], key, put["VersionId"], put["ETag"]))
    rng = random.Random(11)
    deliveries = events + rng.sample(events, int(len(events) * 0.3))
    rng.shuffle(deliveries)
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda e: invoke_raw(out["functionName"], e), deliveries))
    for ok, payload in results:  # failures are retryable backoffs, never lost work
        assert ok or payload["errorType"] in ("InProgress", "Sandbox.Timedout"), payload
    # the ones told to back off get their redelivery, as Lambda would
    for event in events:
        invoke_raw(out["functionName"], event)
    assert steady(lambda: len(keys(out["outputBucket"], f"out/in/{tag}/")), seconds=3) == len(
        events
    )


# botocore (standard mode, max_attempts=3) sends a call up to 4 times before it raises.
SDK_ATTEMPTS = 4


@pytest.mark.waits  # Lambda's asynchronous retry delays
def test_a_throttled_start_is_retried_by_lambda_and_starts_once(stack: dict[str, Any]) -> None:
    out = stack["nameDedup"]
    tag = new_tag()
    # GIVEN StartExecution throttles every SDK attempt the upload's first delivery makes
    throttle = [tag, out["stateMachineArn"]]
    with fault("stepfunctions.StartExecution", "ThrottlingException", SDK_ATTEMPTS, throttle) as n:
        # WHEN the object is uploaded (S3 -> EventBridge -> the starter, asynchronously)
        client("s3").put_object(Bucket=out["bucket"], Key=f"throttle/{tag}.csv", Body=b"x")
        eventually(lambda: n() == SDK_ATTEMPTS, timeout=60)
        # THEN the starter raised instead of calling it a duplicate or dead-lettering it
        assert executions(out["stateMachineArn"], tag) == []
        warned = retry_warning(out, tag)
        assert "ThrottlingException" in warned and "will be retried" in warned
        # AND Lambda's asynchronous retry (about a minute later) starts it, once
        started_once_by_the_retry(out, tag)


def test_a_throttled_api_start_is_429_retryable_and_the_retry_starts_once(
    stack: dict[str, Any],
) -> None:
    out = stack["apiStarter"]
    tag = new_tag()
    key = f"in/{tag}.csv"
    body = {"detail": {"object": {"key": key}}}
    headers = {"x-api-key": out["apiKey"]}
    with fault("stepfunctions.StartExecution", "ThrottlingException", 1, [tag]) as n:
        status, answer = http("POST", out["url"], body, headers)
        assert n() == 1
    assert (status, answer["retryable"], answer["duplicate"]) == (429, True, False), answer
    assert api_executions(out["stateMachineArn"], key) == []
    status, answer = http("POST", out["url"], body, headers)  # the client's retry
    assert (status, answer["duplicate"]) == (200, False)
    assert steady(lambda: len(api_executions(out["stateMachineArn"], key)), seconds=2) == 1


def test_a_throttled_scheduler_start_is_retried_by_the_stream_and_fires_once(
    scheduler: dict[str, Any],
) -> None:
    out = scheduler
    tag = new_tag()
    publish = time.time() + 15
    body = {"publishTime": publish, "channel": "demo", "parameters": {"tag": tag}}
    # (its slot clock's start: the only StartExecution naming that second's slot)
    throttle = [f'"slot-{math.floor(publish)}"', out["stateMachineArn"]]
    # GIVEN StartExecution throttled through all the SDK attempts of the registration's
    # own start and then of the stream starter's
    both = 2 * SDK_ATTEMPTS
    with fault("stepfunctions.StartExecution", "ThrottlingException", both, throttle) as n:
        status, created = http("POST", out["url"], body, {"x-api-key": out["apiKey"]})
        # the registration stands: its start is left to the stream (whose own attempts
        # may already have begun: it can read the record before the API answers)
        assert (status, created["status"]) == (201, "STANDBY")
        assert n() >= SDK_ATTEMPTS
        eventually(lambda: n() == both, timeout=60)

    # THEN the stream redelivers the record (bounded retries; else the sweep starts it)
    # and it fires once
    def fires() -> float:
        record = fire_record(out["firesTables"]["demo"], created["id"])
        return record["fires"] if record else 0

    eventually(fires, timeout=150, interval=1)
    assert steady(fires, seconds=3) == 1
    assert dead_letters(out["dlqUrl"], created["id"], wait=0) == []


def test_a_throttled_scheduler_target_is_retried_and_fires_once(scheduler: dict[str, Any]) -> None:
    out = scheduler
    headers = {"x-api-key": out["apiKey"]}
    key = new_tag()
    message_id = scheduler_handlers.message_id_for(key)  # known before it is registered
    body = {"publishTime": time.time() + 5, "channel": "demo"}

    def record() -> dict[str, float] | None:
        return fire_record(out["firesTables"]["demo"], message_id)

    # GIVEN the channel's Lambda throttled three times when the message is due (the Fire
    # step's payload is the only Invoke body with both; the stream's images say publish_at),
    # armed before the registration: a slow one may be accepted late and fire at once
    fire = [message_id, '"publishTime"']
    with fault("lambda.Invoke", "TooManyRequestsException", 3, fire) as n:
        status, created = http("POST", out["url"], body, {**headers, "Idempotency-Key": key})
        assert (status, created["id"]) == (201, message_id)
        # THEN the Fire step retries the throttles (which never ran) and it fires once
        # (a stream record LocalStack drops is started by the next sweep, within a minute)
        eventually(record, timeout=150, interval=1)
        assert n() == 3
    assert steady(lambda: record()["fires"], seconds=2) == 1
    assert record()["repeats"] == 0
    get = f"{out['url']}/{message_id}"
    assert eventually(lambda: http("GET", get, None, headers)[1]["status"] == "DONE")


def test_a_throttled_slot_of_one_is_retried_by_its_state_machine_and_fires_once_never_early(
    scheduler: dict[str, Any],
) -> None:
    out = scheduler
    headers = {"x-api-key": out["apiKey"]}
    key = new_tag()
    message_id = scheduler_handlers.message_id_for(key)  # known before it is registered
    # too near to join its second's slot (it wakes before the registration could start
    # it): its own execution, a slot of one
    publish = time.time() + 3

    def record() -> dict[str, float] | None:
        return fire_record(out["firesTables"]["demo"], message_id)

    # GIVEN Lambda throttling the slot function's invoke of that execution (its Fire's
    # payload is the only Invoke body naming the message as "message"), armed before the
    # registration: a slow one may be accepted late and reach its Fire at once
    fire = ['"message"', message_id]
    with fault("lambda.Invoke", "TooManyRequestsException", 1, fire) as n:
        body = {"publishTime": publish, "channel": "demo"}
        status, created = http("POST", out["url"], body, {**headers, "Idempotency-Key": key})
        assert (status, created["id"]) == (201, message_id)
        fired = eventually(record, timeout=90, interval=0.5)
        assert n() == 1
    # THEN its Fire's retry (the throttled invoke never ran) fires it once, never early
    assert fired["fired_at"] >= publish
    assert steady(lambda: record()["fires"], seconds=2) == 1
    [execution] = executions(out["stateMachineArn"], message_id)
    assert states_entered(execution["executionArn"])[:2] == ["Wait", "Fire"]
    get = f"{out['url']}/{message_id}"
    assert eventually(lambda: http("GET", get, None, headers)[1]["status"] == "DONE")


BAD_EVENTS = [
    {},
    {"detail": None},
    {"detail": "text"},
    {"detail": {"bucket": {"name": "B"}}},
    {"detail": {"bucket": {"name": "B"}, "object": {}}},
    {"detail": {"bucket": {"name": "B"}, "object": {"key": ""}}},
    {"detail": {"bucket": {"name": "B"}, "object": {"key": 42}}},
    {"detail": {"bucket": {"name": "B"}, "object": {"key": ["a"]}}},
    {"detail": {"bucket": {"name": "B"}, "object": {"key": "k"}}},  # no version id
    {"detail": {"bucket": {}, "object": {"key": "k", "version-id": "v"}}},
    {"detail": {"bucket": {"name": "B"}, "object": {"key": "k" * 2000}}},
]


@pytest.mark.exclusive  # counts every execution of the machine
def test_bad_eventbridge_events_go_to_the_dlq_with_a_reason(stack: dict[str, Any]) -> None:
    out = stack["nameDedup"]
    before = len(executions(out["stateMachineArn"]))
    ids = [new_tag() for _ in BAD_EVENTS]
    for event, event_id in zip(BAD_EVENTS, ids, strict=True):
        result = invoke(out["functionName"], {**event, "id": event_id})
        assert result["status"] == "REJECTED" and result["reason"]
    parked = dead_lettered(out["dlqUrl"], *ids, count=len(ids))
    assert all(m["reason"] for m in parked)
    assert len(executions(out["stateMachineArn"])) == before


def bad_bodies() -> list[bytes]:
    """Built when the test runs: a time 60 s ahead must still be ahead then."""
    soon = time.time() + 60
    return [
        b"",
        b"not json",
        b"[1, 2, 3]",
        b"null",
        json.dumps({"channel": "demo"}).encode(),
        json.dumps({"publishTime": "later", "channel": "demo"}).encode(),
        json.dumps({"publishTime": 1, "channel": "demo"}).encode(),
        json.dumps({"publishTime": soon, "channel": 5}).encode(),
        json.dumps({"publishTime": soon, "channel": "nope"}).encode(),
        json.dumps({"publishTime": soon, "channel": "demo", "parameters": "x" * 50000}).encode(),
        json.dumps({"publishTime": [1], "channel": "demo"}).encode(),
        b'{"publishTime": NaN, "channel": "demo"}',  # Python's json reads these
        b'{"publishTime": Infinity, "channel": "demo"}',
    ]


@pytest.mark.exclusive  # counts every message of the table
def test_bad_scheduler_bodies_are_400_and_store_nothing(stack: dict[str, Any]) -> None:
    out = stack["scheduler"]
    count = lambda: client("dynamodb").scan(TableName=out["table"], Select="COUNT")["Count"]  # noqa: E731
    before = count()
    for body in bad_bodies():
        status, answer = http("POST", out["url"], body, {"x-api-key": out["apiKey"]})
        assert status == 400, (body[:60], answer)
        assert answer["message"]
    assert count() == before


@pytest.mark.exclusive  # counts every execution of the machine
def test_bad_api_starter_bodies_are_400_and_start_nothing(stack: dict[str, Any]) -> None:
    out = stack["apiStarter"]
    before = len(executions(out["stateMachineArn"]))
    bodies = [
        b"",
        b"nope",
        b"[]",
        b"{}",
        b'{"detail": 1}',
        b'{"detail": {"object": {}}}',
        b'{"detail": {"object": {"key": ""}}}',
        b'{"detail": {"object": {"key": 7}}}',
        b'{"detail": {"object": {"key": null}}}',
        b'{"detail": {"object": {"key": ["k"]}}}',
    ]
    for body in bodies:
        status, _ = http("POST", out["url"], body, {"x-api-key": out["apiKey"]})
        assert status == 400, body
    assert len(executions(out["stateMachineArn"])) == before


BAD_CSVS = [
    b"",
    b"\xff\xfe\x00garbage",
    b"id,name\n1,a\n",
    b"id,name,amount\n",
    b"id,name,amount\n1,a\n",
    b"id,name,amount\nx,a,1\n",
    b"id,name,amount\n1,a,lots\n",
    b"id,name,amount\n1,a,1,extra\n",
    b'id,name,amount\n1,"unterminated,1\n',
    b"amount\n1\n",
]


def test_bad_s3_objects_get_an_error_record_a_dlq_entry_and_no_output(
    stack: dict[str, Any],
) -> None:
    out = stack["etl"]["etl-deterministic"]
    tag = new_tag()
    for i, body in enumerate(BAD_CSVS):
        client("s3").put_object(Bucket=out["inputBucket"], Key=f"in/{tag}/{i}.csv", Body=body)
    parked = dead_lettered(out["dlqUrl"], tag, count=len(BAD_CSVS), timeout=60)
    assert all(m["reason"] for m in parked)
    assert keys(out["outputBucket"], f"out/in/{tag}/") == []
