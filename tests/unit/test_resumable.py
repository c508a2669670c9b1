"""The resumable workflow's checkpoint function against moto: the lease, a completed key's
retention, takeovers from ended runs, expired checkpoints."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator

import pytest

from exactly_once.handlers import resumable, runtime
from exactly_once.handlers.resumable import KeyInProgress, LeaseLost, ResumableSettings
from exactly_once.ops.checkpoints import Checkpoints
from tests.unit.conftest import FAIL_DEFINITION, WAIT_DEFINITION, make_state_machine

NOW = 1_800_000_000
TTL, RETENTION = 30 * 86400, 7 * 86400
DONE = {"done": True, "output": {"paid": 1}}


@pytest.fixture
def config(moto: None) -> Iterator[ResumableSettings]:
    runtime.client("dynamodb").create_table(
        TableName="checkpoints",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield ResumableSettings("checkpoints", ["register", "charge"], TTL, RETENTION)


@pytest.fixture
def ops(config: ResumableSettings) -> Checkpoints:
    return Checkpoints(config.table, "arn:aws:states:us-east-1:123456789012:stateMachine:wf")


def execution(definition: dict, status: str) -> str:
    """An execution of a state machine that is `status` (RUNNING: a long Wait)."""
    machine = make_state_machine(definition, name=f"m-{status.lower()}")
    sfn = runtime.client("stepfunctions")
    arn = sfn.start_execution(stateMachineArn=machine)["executionArn"]
    for _ in range(200):
        if sfn.describe_execution(executionArn=arn)["status"] == status:
            return str(arn)
        time.sleep(0.02)
    raise AssertionError(f"{arn} never became {status}")


def load_as_holder(config: ResumableSettings, key: str, arn: str, at: dt.datetime) -> None:
    """`arn`'s Load, at `at` by the function's clock (a holder's Load precedes its end)."""
    real = resumable.time

    class Clock:
        @staticmethod
        def time() -> float:
            return at.timestamp()

    resumable.time = Clock  # type: ignore[assignment]
    try:
        resumable.load(config, key, arn, NOW)
    finally:
        resumable.time = real


def stop_date(arn: str) -> dt.datetime:
    stopped: dt.datetime = runtime.client("stepfunctions").describe_execution(executionArn=arn)[
        "stopDate"
    ]
    return stopped


def save(config: ResumableSettings, key: str, step: str, at: dt.datetime | None = None) -> None:
    """What the state machine's Save<step> writes (`at`: its $$.State.EnteredTime)."""
    entered = (at or dt.datetime.now(dt.UTC)).isoformat(timespec="milliseconds")
    runtime.client("dynamodb").update_item(
        TableName=config.table,
        Key={"pk": {"S": key}},
        UpdateExpression=f"SET out_{step} = :entry, saved_at = :at",
        ExpressionAttributeValues={
            ":entry": {"S": json.dumps(DONE)},
            ":at": {"S": entered.replace("+00:00", "Z")},
        },
    )


def test_a_fresh_key_is_leased_with_a_ttl_and_every_step_to_do(
    config: ResumableSettings, ops: Checkpoints
) -> None:
    assert resumable.load(config, "k", "exec-1", NOW) == {"register": {}, "charge": {}}
    shown = ops.show("k")
    assert shown is not None
    assert (shown["lease"], shown["expires_at"], shown["completed_at"]) == (
        "exec-1",
        NOW + TTL,
        None,
    )
    # a retried Load of the same execution gets the same answer
    assert resumable.load(config, "k", "exec-1", NOW + 5) == {"register": {}, "charge": {}}


def test_a_concurrent_run_of_a_running_key_fails_fast_and_changes_nothing(
    config: ResumableSettings, ops: Checkpoints
) -> None:
    # GIVEN a run that holds the key and is still running
    holder = execution(WAIT_DEFINITION, "RUNNING")
    resumable.load(config, "k", holder, NOW)
    before = ops.show("k")
    # WHEN a second run of the same key loads
    with pytest.raises(KeyInProgress, match="being run by"):
        resumable.load(config, "k", "exec-2", NOW + 1)
    # THEN it got no lease and wrote nothing
    assert ops.show("k") == before


def test_an_ended_runs_lease_is_taken_over_and_its_done_steps_kept(
    config: ResumableSettings, ops: Checkpoints
) -> None:
    # GIVEN a run that did its first step, then failed (or was stopped, or timed out)
    crashed = execution(FAIL_DEFINITION, "FAILED")
    load_as_holder(config, "k", crashed, stop_date(crashed) - dt.timedelta(seconds=2))
    save(config, "k", "register", at=stop_date(crashed) - dt.timedelta(seconds=1))
    # WHEN the key runs again
    entries = resumable.load(config, "k", "exec-2", NOW + 60)
    # THEN the new run holds it and skips what was done
    assert entries == {"register": DONE, "charge": {}}
    shown = ops.show("k")
    assert shown is not None and shown["lease"] == "exec-2"
    assert shown["expires_at"] == NOW + 60 + TTL  # each run's start renews the TTL


def test_a_failed_holder_that_saved_after_it_stopped_was_redriven_and_keeps_its_lease(
    config: ResumableSettings, ops: Checkpoints
) -> None:
    # GIVEN a run that failed, then was redriven (RedriveExecution: the same ARN runs on)
    # and saved a step, while DescribeExecution still answers FAILED (eventually
    # consistent)
    redriven = execution(FAIL_DEFINITION, "FAILED")
    load_as_holder(config, "k", redriven, stop_date(redriven) - dt.timedelta(seconds=2))
    save(config, "k", "register", at=stop_date(redriven) + dt.timedelta(seconds=1))
    before = ops.show("k")
    # WHEN the key runs again
    with pytest.raises(KeyInProgress, match="being run by"):
        resumable.load(config, "k", "exec-2", NOW + 60)
    # THEN the redriven run keeps the key: taken, it would run the next step beside this run
    assert ops.show("k") == before


def test_a_holder_redriven_at_its_load_is_seen_running_again(
    config: ResumableSettings, ops: Checkpoints
) -> None:
    # GIVEN a run whose Load took the key and then failed (its function timed out), and
    # was redriven there: its Load, run again, takes its own lease again
    redriven = execution(FAIL_DEFINITION, "FAILED")
    load_as_holder(config, "k", redriven, stop_date(redriven) - dt.timedelta(seconds=5))
    load_as_holder(config, "k", redriven, stop_date(redriven) + dt.timedelta(seconds=30))
    # WHEN the key runs again, DescribeExecution still answering FAILED
    with pytest.raises(KeyInProgress, match="being run by"):
        resumable.load(config, "k", "exec-2", NOW + 60)
    # THEN the redriven run keeps the key (taken, both would run its first step)
    shown = ops.show("k")
    assert shown is not None and shown["lease"] == redriven


def test_a_lease_whose_holder_no_longer_exists_is_taken_over(config: ResumableSettings) -> None:
    gone = "arn:aws:states:us-east-1:123456789012:execution:wf:long-gone"
    resumable.load(config, "k", gone, NOW)
    assert resumable.load(config, "k", "exec-2", NOW + 1) == {"register": {}, "charge": {}}


def test_a_completed_key_answers_with_its_results_and_takes_no_lease(
    config: ResumableSettings, ops: Checkpoints
) -> None:
    # GIVEN a run that did every step and finished
    resumable.load(config, "k", "exec-1", NOW)
    save(config, "k", "register")
    save(config, "k", "charge")
    assert resumable.finish(config, "k", "exec-1", NOW + 10) == {
        "completed": True,
        "already": False,
    }
    shown = ops.show("k")
    assert shown is not None
    assert (shown["lease"], shown["completed_at"]) == (None, NOW + 10)
    assert shown["expires_at"] == NOW + 10 + RETENTION
    # WHEN the key runs again within the retention (a redelivery, a rerun)
    entries = resumable.load(config, "k", "exec-2", NOW + 20)
    # THEN every step is done (so the state machine runs none), and nothing changed
    assert entries == {"register": DONE, "charge": DONE}
    assert resumable.finish(config, "k", "exec-2", NOW + 21)["already"] is True
    assert ops.show("k") == shown


def test_a_completed_key_past_its_retention_runs_afresh(config: ResumableSettings) -> None:
    resumable.load(config, "k", "exec-1", NOW)
    save(config, "k", "register")
    resumable.finish(config, "k", "exec-1", NOW)
    # DynamoDB's TTL deletes eventually: an expired item still there counts as absent
    later = NOW + RETENTION + 1
    assert resumable.load(config, "k", "exec-2", later) == {"register": {}, "charge": {}}


def test_an_abandoned_checkpoint_expires(config: ResumableSettings) -> None:
    ended = execution(FAIL_DEFINITION, "FAILED")
    load_as_holder(config, "k", ended, stop_date(ended) - dt.timedelta(seconds=2))
    save(config, "k", "register")
    # months later the key is reused: the stale checkpoint skips nothing
    assert resumable.load(config, "k", "exec-2", NOW + TTL + 1) == {"register": {}, "charge": {}}


def test_finish_without_the_lease_is_refused(config: ResumableSettings) -> None:
    resumable.load(config, "k", "exec-1", NOW)
    with pytest.raises(LeaseLost):
        resumable.finish(config, "k", "exec-other", NOW)


def test_the_handler_dispatches_on_the_action(
    config: ResumableSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ResumableSettings, "current", classmethod(lambda cls: config))
    event = {"action": "load", "key": "k", "execution": "exec-1"}
    assert resumable.handler(event, None) == {"register": {}, "charge": {}}
    assert resumable.handler({**event, "action": "finish"}, None)["completed"] is True
    with pytest.raises(ValueError, match="unknown action"):
        resumable.handler({**event, "action": "nope"}, None)


@pytest.mark.parametrize("count", [2, 31, 120])
def test_load_stays_within_dynamodbs_expression_limits_however_many_steps(
    config: ResumableSettings, count: int
) -> None:
    # GIVEN a workflow of many steps with the longest names a step may have (48 characters)
    steps = [f"S{i:03d}" + "x" * 44 for i in range(count)]
    long = ResumableSettings(config.table, steps, TTL, RETENTION)
    sent: list[dict[str, str]] = []
    ddb = runtime.client("dynamodb")

    def record(params: dict[str, str], **kwargs: object) -> None:
        sent.append(params)

    ddb.meta.events.register("before-parameter-build.dynamodb.UpdateItem", record)
    try:
        # WHEN a run loads the key (before: one expression of ~130 bytes per step, past
        # DynamoDB's 4 KB near 30 such steps: every run failed at Load)
        entries = resumable.load(long, "order-7", "arn:run:1", now=NOW)
        again = resumable.load(long, "order-7", "arn:run:1", now=NOW)  # a retried Load
    finally:
        ddb.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", record)
    # THEN every expression is within 4 KB and 300 functions, and every step is there, to do
    for params in sent:
        expression = params["UpdateExpression"]
        assert len(expression.encode()) <= 4096, len(expression)
        assert expression.count("(") <= 300
    assert entries == again == {step: {} for step in steps}
    # (one update per Load for a short workflow: the common case costs nothing more)
    assert (len(sent) == 2) == (count == 2)


def test_a_finished_run_counts_the_steps_it_ran_and_those_an_earlier_run_did(
    config: ResumableSettings, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a key whose first step an earlier run did, and a run that does the second
    resumable.load(config, "order-9", "run-1", now=NOW)
    save(config, "order-9", "register")  # DONE has no `by`: not this run's
    runtime.client("dynamodb").update_item(
        TableName=config.table,
        Key={"pk": {"S": "order-9"}},
        UpdateExpression="SET out_charge = :entry",
        ExpressionAttributeValues={":entry": {"S": json.dumps({**DONE, "by": "run-1"})}},
    )
    capsys.readouterr()
    # WHEN it finishes, and a later run of the completed key finishes too
    resumable.finish(config, "order-9", "run-1", now=NOW)
    resumable.finish(config, "order-9", "run-1", now=NOW)  # its own retry: nothing more
    resumable.load(config, "order-9", "run-2", now=NOW + 1)
    resumable.finish(config, "order-9", "run-2", now=NOW + 1)
    # THEN one line says 1 step run and 1 skipped, one that the key was already complete
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if "_aws" in line]
    counted = [
        {
            k: v
            for k, v in line.items()
            if k in ("RunsSucceeded", "StepsRun", "StepsSkipped", "KeysCompleted")
        }
        for line in lines
    ]
    assert counted == [
        {"RunsSucceeded": 1, "StepsRun": 1, "StepsSkipped": 1},
        {"KeysCompleted": 1},
    ]
