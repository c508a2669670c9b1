"""Pattern 4 as a Lambda durable function on LocalStack (durable executions served by AWS's
local runner, localstack/host_executor/durable.py): the same demo steps and checkpoints
as test_resumable.py, run by handlers/resumable_durable.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exactly_once.handlers.checkpoints import attribute
from tooling.clients import client, eventually, new_tag, step_calls


@pytest.fixture
def workflow(stack: dict[str, Any]) -> dict[str, Any]:
    return stack["resumableDurable"]


def start(workflow: dict[str, Any], name: str, document: dict[str, Any]) -> str:
    """Start a run (an asynchronous Invoke, named): its durable execution's ARN."""
    answer = client("lambda").invoke(
        FunctionName=workflow["durableFunctionArn"],
        InvocationType="Event",
        DurableExecutionName=name,
        Payload=json.dumps(document),
    )
    return str(answer["DurableExecutionArn"])


def finished(execution_arn: str, timeout: float = 90) -> dict[str, Any]:
    lam = client("lambda")
    return eventually(
        lambda: (
            (d := lam.get_durable_execution(DurableExecutionArn=execution_arn))["Status"]
            != "RUNNING"
            and d
        ),
        timeout=timeout,
        interval=1,
    )


def calls(workflow: dict[str, Any], key: str) -> dict[str, int]:
    return step_calls(workflow["counterTable"], key, workflow["steps"])


def checkpoint(workflow: dict[str, Any], key: str) -> dict[str, Any]:
    found = client("dynamodb").get_item(
        TableName=workflow["table"], Key={"pk": {"S": key}}, ConsistentRead=True
    )
    return dict(found.get("Item", {}))


def test_a_rerun_skips_the_steps_that_succeeded(workflow: dict[str, Any]) -> None:
    # GIVEN a run whose third step fails (on every retry)
    key = new_tag()
    first = finished(start(workflow, f"{key}-1", {"orderId": key, "failAt": "reserve"}))
    assert first["Status"] == "FAILED"
    item = checkpoint(workflow, key)
    done = {s for s in workflow["steps"] if json.loads(item[attribute(s)]["S"]).get("done")}
    assert done == {"register", "charge"}
    # WHEN it is run again from the top, without the failure
    second = finished(start(workflow, f"{key}-2", {"orderId": key}))
    # THEN it succeeds, running only steps 3 and 4; step 1 ran once overall
    assert second["Status"] == "SUCCEEDED", second
    assert calls(workflow, key) == {"register": 1, "charge": 1, "reserve": 4, "notify": 1}
    results = json.loads(second["Result"])["results"]
    assert results["register"]["output"]["calls"] == 1  # reloaded from the checkpoint
    assert results["notify"]["output"]["saw"] == ["charge", "register", "reserve"]
    # AND the key is completed, its lease released
    item = checkpoint(workflow, key)
    assert "completed_at" in item and "lease" not in item


def test_a_second_run_after_success_runs_no_step(workflow: dict[str, Any]) -> None:
    key = new_tag()
    first = finished(start(workflow, f"{key}-1", {"orderId": key}))
    assert first["Status"] == "SUCCEEDED"
    again = finished(start(workflow, f"{key}-again", {"orderId": key}))
    assert again["Status"] == "SUCCEEDED"
    assert calls(workflow, key) == {step: 1 for step in workflow["steps"]}
    assert json.loads(again["Result"])["results"] == json.loads(first["Result"])["results"]


def test_two_concurrent_runs_of_one_key_run_each_step_once(workflow: dict[str, Any]) -> None:
    # GIVEN a run still in its first step
    key = new_tag()
    holder = start(workflow, f"{key}-a", {"orderId": key, "pauseAt": {"register": 4}})
    eventually(lambda: calls(workflow, key)["register"] == 1)
    # WHEN a second run of the same key starts meanwhile
    second = finished(start(workflow, f"{key}-b", {"orderId": key}))
    # THEN it fails fast with KeyInProgress, having run no step
    assert second["Status"] == "FAILED"
    assert "KeyInProgress" in json.dumps(second.get("Error", {})), second
    # AND the first finishes; every step ran once
    assert finished(holder)["Status"] == "SUCCEEDED"
    assert calls(workflow, key) == {step: 1 for step in workflow["steps"]}


def test_the_same_run_name_twice_is_one_execution(workflow: dict[str, Any]) -> None:
    # a trigger redelivered under the same name: Lambda's idempotent start, one run
    key = new_tag()
    arn = start(workflow, key, {"orderId": key})
    assert finished(arn)["Status"] == "SUCCEEDED"
    with pytest.raises(client("lambda").exceptions.DurableExecutionAlreadyStartedException):
        start(workflow, key, {"orderId": key})
    assert calls(workflow, key) == {step: 1 for step in workflow["steps"]}


@pytest.mark.waits  # a step that outlasts the SDK's read timeout
def test_a_step_slower_than_the_sdks_read_timeout_is_invoked_once(
    workflow: dict[str, Any],
) -> None:
    # GIVEN a run whose first step takes 70 s: past botocore's default 60 s read timeout,
    # after which the SDK sends the invoke again while the first still runs (the step ran
    # up to 4 times per attempt before its invokes had a client of their own)
    key = new_tag()
    first = workflow["steps"][0]
    document = {"orderId": key, "pauseAt": {first: 70}}
    done = finished(start(workflow, key, document), timeout=300)
    # THEN the run succeeds and the slow step ran once
    assert done["Status"] == "SUCCEEDED", done
    assert calls(workflow, key)[first] == 1
