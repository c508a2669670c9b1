"""Pattern 1 with the durable-function backend on LocalStack (durable executions served by
AWS's local runner, routed by localstack/host_executor/durable.py): S3 PutObject ->
EventBridge -> the starter -> Invoke with DurableExecutionName -> a demo durable function
that counts its key's executions (demo/durable.py). STORM_SIZE sets the storm (CI: 60;
full size: STORM_SIZE=1000)."""

from __future__ import annotations

import os
import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from exactly_once.handlers.names import durable_execution_name
from tests.e2e.retries import retry_warning
from tooling import events
from tooling.clients import (
    client,
    dead_letters,
    durable_runs,
    eventually,
    fault,
    invoke,
    invoke_raw,
    new_tag,
    steady,
)

STORM = int(os.environ.get("STORM_SIZE", "60"))


@pytest.fixture
def durable(stack: dict[str, Any]) -> dict[str, Any]:
    return stack["nameDedupDurable"]


def runs(durable: dict[str, Any], prefix: str) -> dict[str, int]:
    """Executions that ran, per key under `prefix` (the demo function counts its own)."""
    return durable_runs(durable["runsTable"], prefix)


def durable_executions(durable: dict[str, Any]) -> list[dict[str, Any]]:
    """Every execution of the demo durable function's version, page by page."""
    lam = client("lambda")
    function, version = durable["durableFunctionArn"].rsplit(":", 1)
    found: list[dict[str, Any]] = []
    marker: dict[str, str] = {}
    while True:
        page = lam.list_durable_executions_by_function(
            FunctionName=function, Qualifier=version, **marker
        )
        found += page["DurableExecutions"]
        if not page.get("NextMarker"):
            return found
        marker = {"Marker": page["NextMarker"]}


def test_an_upload_starts_one_durable_execution_and_a_redelivery_adds_none(
    durable: dict[str, Any],
) -> None:
    # GIVEN an object uploaded (S3 -> EventBridge -> the starter, asynchronously)
    tag = new_tag()
    key = f"in/{tag}/a.csv"
    put = client("s3").put_object(Bucket=durable["bucket"], Key=key, Body=b"x")
    full = f"{durable['bucket']}/{key}"
    # THEN the durable function ran once for it, under a name derived from the key
    assert eventually(lambda: runs(durable, full), timeout=60) == {full: 1}
    # WHEN the same event is delivered again (a redelivery: another request id)
    event = events.eventbridge(durable["bucket"], key, put["VersionId"])
    result = invoke(durable["functionName"], event)
    # THEN it is a counted duplicate, and nothing runs again
    assert result["status"] == "DUPLICATE", result
    assert steady(lambda: runs(durable, full), seconds=3) == {full: 1}
    names = [e["DurableExecutionName"] for e in durable_executions(durable)]
    assert result["name"] in names and len(result["name"]) <= 64
    assert dead_letters(durable["dlqUrl"], tag, wait=0) == []


def test_storm_through_the_durable_backend(durable: dict[str, Any]) -> None:
    # GIVEN STORM distinct objects' events
    tag = new_tag()
    bucket = durable["bucket"]
    prefix = f"{bucket}/storm/{tag}/"
    deliveries = [events.eventbridge(bucket, f"storm/{tag}/{i}", f"v{i}") for i in range(STORM)]
    # WHEN they arrive with 30% redeliveries, shuffled, in concurrent bursts
    rng = random.Random(7)
    deliveries += rng.sample(deliveries, int(STORM * 0.3))
    rng.shuffle(deliveries)
    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda e: invoke_raw(durable["functionName"], e), deliveries))
    # THEN every delivery was handled: STORM started, the rest duplicates
    assert all(ok for ok, _ in results), [p for ok, p in results if not ok][:3]
    statuses = [payload["status"] for _, payload in results]
    assert statuses.count("STARTED") == STORM, statuses
    assert statuses.count("DUPLICATE") == len(deliveries) - STORM
    # AND every object's durable execution ran exactly once: none lost, none twice
    eventually(lambda: len(runs(durable, prefix)) == STORM or None, timeout=120)
    counted = steady(lambda: runs(durable, prefix), seconds=3)
    assert sorted(counted.values()) == [1] * STORM


def status_of(durable: dict[str, Any], key: str) -> str | None:
    """The status of the durable execution named by `key` (bucket/key), None if none."""
    name = durable_execution_name(durable["durableFunctionArn"], key)
    found = [e["Status"] for e in durable_executions(durable) if e["DurableExecutionName"] == name]
    assert len(found) <= 1, found  # a name is one execution
    return found[0] if found else None


def test_a_sandbox_killed_after_a_step_is_replayed_from_its_checkpoint(
    durable: dict[str, Any],
) -> None:
    # GIVEN an upload whose execution's sandbox dies right after its step, on the first
    # invocation only (demo/durable_functions/durable_demo.py: 'crash-once')
    tag = new_tag()
    key = f"in/{tag}/crash-once.csv"
    client("s3").put_object(Bucket=durable["bucket"], Key=key, Body=b"x")
    full = f"{durable['bucket']}/{key}"
    # THEN the runtime invokes it again and it ends SUCCEEDED: one execution, its step
    # replayed from the checkpoint instead of run again
    assert eventually(lambda: status_of(durable, full) == "SUCCEEDED" or None, timeout=120)
    crashed = client("dynamodb").get_item(
        TableName=durable["runsTable"], Key={"pk": {"S": f"crashed#{full}"}}
    )
    assert "Item" in crashed  # the fault did kill the first invocation
    assert steady(lambda: runs(durable, full), seconds=2) == {full: 1}


# botocore (standard mode, max_attempts=3) sends a call up to 4 times before it raises.
SDK_ATTEMPTS = 4


@pytest.mark.waits  # Lambda's asynchronous retry delays
def test_a_throttled_start_is_retried_by_lambda_and_starts_once(durable: dict[str, Any]) -> None:
    tag = new_tag()
    # GIVEN Lambda throttles every SDK attempt of the starter's first Invoke for this key
    # (its payload, unlike EventBridge's Invoke of the starter, carries a requestId)
    starts = [tag, '"requestId"']
    with fault("lambda.Invoke", "TooManyRequestsException", SDK_ATTEMPTS, starts) as injected:
        # WHEN the object is uploaded
        key = f"throttle/{tag}.csv"
        client("s3").put_object(Bucket=durable["bucket"], Key=key, Body=b"x")
        eventually(lambda: injected() == SDK_ATTEMPTS, timeout=60)
        # THEN the starter raised (never a duplicate, never dead-lettered)...
        warned = retry_warning(durable, tag)
        assert "TooManyRequestsException" in warned and "will be retried" in warned
    # ...AND Lambda's asynchronous retry started it, once
    full = f"{durable['bucket']}/{key}"
    assert eventually(lambda: runs(durable, full), timeout=150, interval=2) == {full: 1}
    assert steady(lambda: runs(durable, full), seconds=3) == {full: 1}
    assert dead_letters(durable["dlqUrl"], tag, wait=0) == []
