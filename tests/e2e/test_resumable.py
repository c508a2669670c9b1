"""Pattern 4 on LocalStack: fail at step 3, re-run from the top, skip what succeeded."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exactly_once.components.resumable_asl import reference_transitions, transitions
from exactly_once.ops.checkpoints import Checkpoints
from tests.clients import ENDPOINT, client, eventually, new_tag, states_entered


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
    counts = {}
    for step in workflow["steps"]:
        item = (
            client("dynamodb")
            .get_item(TableName=workflow["counterTable"], Key={"pk": {"S": f"{key}#{step}"}})
            .get("Item")
        )
        counts[step] = int(item["calls"]["N"]) if item else 0
    return counts


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
    # AND the checkpoint is gone
    assert ops.show(key) is None
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
    assert ops.show(key) is None


def test_a_duplicate_start_of_the_same_attempt_adds_nothing(
    workflow: dict[str, Any], ops: Checkpoints
) -> None:
    key = new_tag()
    first = ops.rerun(key, {"orderId": key})
    again = ops.rerun(key, {"orderId": key})
    assert again.status == "DUPLICATE"
    assert finished(first.execution_arn)["status"] == "SUCCEEDED"
    assert calls(workflow, key)["register"] == 1
