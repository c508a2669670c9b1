"""Pattern 4 on LocalStack: fail at step 3, re-run from the top, skip what succeeded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exactly_once.components.resumable_asl import reference_transitions, transitions
from exactly_once.ops.checkpoints import Checkpoints
from tooling.clients import ENDPOINT, client, eventually, new_tag, states_entered, step_calls


@pytest.fixture
def workflow(stack: dict[str, Any]) -> dict[str, Any]:
    return stack["resumable"]


@pytest.fixture
def ops(workflow: dict[str, Any]) -> Checkpoints:
    return Checkpoints(workflow["table"], workflow["stateMachineArn"], ENDPOINT)


def finished(execution_arn: str) -> dict[str, Any]:
    sfn = client("stepfunctions")
    return eventually(
        lambda: (
            (d := sfn.describe_execution(executionArn=execution_arn))["status"] != "RUNNING" and d
        ),
        timeout=60,
    )


def calls(workflow: dict[str, Any], key: str) -> dict[str, int]:
    return step_calls(workflow["counterTable"], key, workflow["steps"])


def test_rerun_skips_the_steps_that_succeeded(workflow: dict[str, Any], ops: Checkpoints) -> None:
    # GIVEN a run whose third step fails
    key = new_tag()
    first = ops.rerun(key, {"orderId": key, "failAt": "reserve"})
    assert finished(first.execution_arn)["status"] == "FAILED"
    progress = ops.show(key)
    assert progress is not None
    assert {s for s, entry in progress["steps"].items() if entry.get("done")} == {
        "register",
        "charge",
    }
    # WHEN it is re-run from the top (the next attempt name), without the failure
    second = ops.rerun(key, {"orderId": key})
    assert (second.status, second.attempt) == ("STARTED", 1)
    done = finished(second.execution_arn)
    # THEN it succeeds, running only steps 3 and 4; step 1 (non-idempotent) ran once overall
    assert done["status"] == "SUCCEEDED"
    assert calls(workflow, key) == {"register": 1, "charge": 1, "reserve": 2, "notify": 1}
    results = json.loads(done["output"])["results"]
    assert results["register"]["output"]["calls"] == 1  # reloaded from the checkpoint
    assert results["notify"]["output"]["saw"] == ["charge", "register", "reserve"]
    # AND the key is completed (kept for the retention), its lease released
    shown = ops.show(key)
    assert shown is not None and shown["completed_at"] and shown["lease"] is None
    # AND the re-run cost 2 transitions per step run, against 3 in the reference layout
    entered = states_entered(second.execution_arn)
    assert entered == ["Load", "Resume", "reserve", "Savereserve", "notify", "Savenotify", "Finish"]
    assert len(entered) == transitions(4, skipped=2) == 7
    assert reference_transitions(4, skipped=2, first_run=False) == 11
    first_entered = states_entered(first.execution_arn)
    assert first_entered[:6] == [
        "Load",
        "Resume",
        "register",
        "Saveregister",
        "charge",
        "Savecharge",
    ]


def test_a_step_marked_done_by_hand_is_skipped(workflow: dict[str, Any], ops: Checkpoints) -> None:
    key = new_tag()
    ops.mark_done(key, "charge", output={"charged": "by hand"})
    outcome = ops.rerun(key, {"orderId": key})
    done = finished(outcome.execution_arn)
    assert done["status"] == "SUCCEEDED"
    assert calls(workflow, key) == {"register": 1, "charge": 0, "reserve": 1, "notify": 1}
    entered = states_entered(outcome.execution_arn)
    assert "charge" not in entered
    assert "Resyncregister" in entered  # the conditional save saw the hand-made mark


def test_a_duplicate_start_of_the_same_attempt_adds_nothing(
    workflow: dict[str, Any], ops: Checkpoints
) -> None:
    key = new_tag()
    first = ops.rerun(key, {"orderId": key})
    again = ops.rerun(key, {"orderId": key})
    assert again.status == "DUPLICATE"
    assert finished(first.execution_arn)["status"] == "SUCCEEDED"
    assert calls(workflow, key)["register"] == 1


def start(workflow: dict[str, Any], name: str, document: dict[str, Any]) -> str:
    """A start under a name of the caller's (another trigger of the same business key)."""
    sfn = client("stepfunctions")
    return str(
        sfn.start_execution(
            stateMachineArn=workflow["stateMachineArn"], name=name, input=json.dumps(document)
        )["executionArn"]
    )


def test_a_second_run_after_success_runs_no_step_and_answers_with_the_stored_results(
    workflow: dict[str, Any], ops: Checkpoints
) -> None:
    # GIVEN a key whose run succeeded
    key = new_tag()
    first = finished(ops.rerun(key, {"orderId": key}).execution_arn)
    assert first["status"] == "SUCCEEDED"
    # WHEN the same business key runs again (a redelivered trigger under another name)
    again = finished(start(workflow, f"{key}-again", {"orderId": key}))
    # THEN it succeeds without running a step, answering with the first run's results
    assert again["status"] == "SUCCEEDED"
    assert states_entered(again["executionArn"]) == ["Load", "Resume", "Finish"]
    assert calls(workflow, key) == {step: 1 for step in workflow["steps"]}
    stored = json.loads(again["output"])["results"]
    assert stored == json.loads(first["output"])["results"]


def test_two_concurrent_runs_of_one_key_run_each_step_once(
    workflow: dict[str, Any], ops: Checkpoints
) -> None:
    # GIVEN a run still in its first step
    key = new_tag()
    slow = {"orderId": key, "pauseAt": {"register": 4}}
    holder = start(workflow, f"{key}-a", slow)
    eventually(lambda: calls(workflow, key)["register"] == 1)
    # WHEN a second run of the same key starts meanwhile
    second = finished(start(workflow, f"{key}-b", {"orderId": key}))
    # THEN it fails fast with KeyInProgress, having run no step
    assert (second["status"], second.get("error")) == ("FAILED", "KeyInProgress"), second
    assert states_entered(second["executionArn"]) == ["Load"]
    # AND the first finishes; every step ran once
    assert finished(holder)["status"] == "SUCCEEDED"
    assert calls(workflow, key) == {step: 1 for step in workflow["steps"]}


def test_a_completed_key_past_its_retention_runs_afresh(
    workflow: dict[str, Any], ops: Checkpoints
) -> None:
    # GIVEN a completed key whose retention has run out (DynamoDB's TTL deletes eventually,
    # so the item may still be there)
    key = new_tag()
    assert finished(ops.rerun(key, {"orderId": key}).execution_arn)["status"] == "SUCCEEDED"
    client("dynamodb").update_item(
        TableName=workflow["table"],
        Key={"pk": {"S": key}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": "1"}},
    )
    # WHEN the key runs again
    again = finished(start(workflow, f"{key}-later", {"orderId": key}))
    # THEN it runs as new: the expired record skips nothing (documented, by design)
    assert again["status"] == "SUCCEEDED"
    assert calls(workflow, key) == {step: 2 for step in workflow["steps"]}


def test_a_stopped_runs_lease_is_taken_over_by_the_next_run(
    workflow: dict[str, Any], ops: Checkpoints
) -> None:
    # GIVEN a run stopped in its first step (a crash Step Functions saw: no Catch ran)
    key = new_tag()
    holder = start(workflow, f"{key}-a", {"orderId": key, "pauseAt": {"register": 4}})
    eventually(lambda: calls(workflow, key)["register"] == 1)
    client("stepfunctions").stop_execution(executionArn=holder, cause="test: a crash")
    # (LocalStack ends it once the step's invoke returns; AWS at once, the invoke running on)
    assert finished(holder)["status"] == "ABORTED"
    assert ops.show(key)["lease"] == holder
    # WHEN the key runs again
    again = finished(start(workflow, f"{key}-b", {"orderId": key}))
    # THEN the ended run's lease is taken over and the run completes; the stopped step
    # (never checkpointed) ran again, every other once
    assert again["status"] == "SUCCEEDED"
    assert calls(workflow, key) == {"register": 2, "charge": 1, "reserve": 1, "notify": 1}
