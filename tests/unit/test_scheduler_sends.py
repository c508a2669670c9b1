"""The scheduler against its targets (moto): every send counted on the record before it is
made, within a budget across claimants; a send whose outcome is unknown resent only as
its channel's rule allows (handlers/targets.py); no send outlives its invocation."""

from __future__ import annotations

import collections
import json
import threading
import time
from typing import Any

import pytest
from botocore.exceptions import (
    ConnectTimeoutError,
    EndpointConnectionError,
    ParamValidationError,
    ReadTimeoutError,
)

from exactly_once.handlers import runtime, scheduler_slots
from exactly_once.handlers.errors import ClientError
from exactly_once.handlers.scheduler import SchedulerSettings
from exactly_once.handlers.scheduler_slots import TargetFailed
from exactly_once.handlers.targets import Outcome, Resend, TargetKind, resend_policy
from tests.unit.conftest import WAIT_DEFINITION
from tests.unit.test_scheduler import config as config  # the table and its two channels
from tests.unit.test_scheduler_slots import due_slot, status_of

TARGET = "arn:aws:lambda:us-east-1:1:function:t"


def timed_out(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
    """A Lambda target still running when its caller stopped waiting (its effect unknown)."""
    raise ReadTimeoutError(endpoint_url="https://lambda")


class Target:
    """Sends, and what each answers (an exception to raise, or None: delivered)."""

    def __init__(self, *answers: Exception | None) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[str, float | None]] = []
        self.lock = threading.Lock()

    def __call__(self, target_arn: str, delivery: dict[str, Any], within: float | None = None):
        with self.lock:
            self.sent.append((delivery["id"], within))
            answer = self.answers.pop(0) if self.answers else None
        if answer is not None:
            raise answer


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: None)


def final(config: SchedulerSettings, message_id: str) -> tuple[str, str, list[str]]:
    item = status_of(config, message_id)
    error = json.loads(item["error"]["S"])["Error"] if "error" in item else ""
    return item["status"]["S"], error, item.get("sends", {}).get("SS", [])


def test_a_target_that_may_have_run_is_never_sent_again_unless_its_channel_drops_redeliveries(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a Lambda target that times out every send (its caller stops waiting)
    slow = Target(*[ReadTimeoutError(endpoint_url="https://lambda")] * 10)
    monkeypatch.setattr(scheduler_slots, "send", slow)
    # WHEN a message of a channel whose target drops no redelivery fires
    slot, [once] = due_slot(config, [0.0])
    assert scheduler_slots.fire(config.table, slot, "x#0#a") == {"skipped": 0, "UNKNOWN": 1}
    # THEN it was sent once and ends UNKNOWN (never FAILED: it may have taken effect)
    assert [i for i, _ in slow.sent] == [once]
    assert final(config, once)[:2] == ("UNKNOWN", "ReadTimeoutError")
    # AND a channel that drops redeliveries is sent its budget, each send counted first
    slow.sent.clear()
    slot, [again] = due_slot(config, [0.0], "again")
    assert scheduler_slots.fire(config.table, slot, "x#0#b") == {"skipped": 0, "UNKNOWN": 1}
    assert len(slow.sent) == scheduler_slots.SEND_BUDGET
    status, error, sends = final(config, again)
    assert (status, error, len(sends)) == ("UNKNOWN", "ReadTimeoutError", len(slow.sent))


def test_the_budget_holds_across_claimants_and_a_takeover_without_redelivery_sends_nothing(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = Target(
        *[
            ClientError(
                {
                    "Error": {"Code": "ServiceException"},
                    "ResponseMetadata": {"HTTPStatusCode": 500},
                },
                "Invoke",
            )
        ]
        * 10
    )
    monkeypatch.setattr(scheduler_slots, "send", target)
    real = time.time
    for channel in ("demo", "again"):
        target.sent.clear()
        monkeypatch.setattr(scheduler_slots.time, "time", real)
        slot, [message_id] = due_slot(config, [0.0], channel)
        # GIVEN a claimant that counted two sends and died (its lease ended long ago)
        dead = "execution-1#0#dead"
        assert scheduler_slots.claim(config.table, message_id, dead, real() + 60).item
        assert (
            scheduler_slots.count_send(
                config.table, message_id, dead, scheduler_slots.send_token(dead, 1)
            )
            == "COUNTED"
        )
        monkeypatch.setattr(scheduler_slots.time, "time", lambda: real() + 120)
        # WHEN the Fire's retry takes it over
        counts = scheduler_slots.fire(config.table, slot, "execution-1#1#r", retried=True)
        status, error, sends = final(config, message_id)
        if channel == "demo":
            # THEN without redelivery it sends nothing: UNKNOWN, the earlier sends named
            assert counts["UNKNOWN"] == 1 and target.sent == []
            assert (status, error) == ("UNKNOWN", "Scheduler.EarlierSend")
        else:
            # THEN with it, it sends what is left of the budget (2 earlier, then 2 of its own)
            assert counts["UNKNOWN"] == 1 and len(target.sent) == 2
            assert (status, error) == ("UNKNOWN", "ServiceException")
            assert len(sends) == scheduler_slots.SEND_BUDGET


def test_a_fifo_target_is_resent_within_its_deduplication_interval_only(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = "arn:aws:sqs:us-east-1:1:q.fifo"
    ddb = runtime.client("dynamodb")
    ddb.put_item(
        TableName=config.table,
        Item={"pk": {"S": "INVOKER#fifo"}, "target_arn": {"S": fifo}},
    )
    lost = ClientError(
        {"Error": {"Code": "InternalError"}, "ResponseMetadata": {"HTTPStatusCode": 500}},
        "SendMessage",
    )
    real = time.time
    for after, resent in ((60, True), (scheduler_slots.FIFO_WINDOW_SECONDS, False)):
        target = Target(lost)
        monkeypatch.setattr(scheduler_slots, "send", target)
        monkeypatch.setattr(scheduler_slots.time, "time", real)
        slot, [message_id] = due_slot(config, [0.0], "fifo")
        # GIVEN a claimant that claimed (its first send counted) and died
        assert scheduler_slots.claim(config.table, message_id, "dead", real() + 1).item
        # WHEN its claim is taken over `after` seconds later, and the first resend is lost
        monkeypatch.setattr(scheduler_slots.time, "time", lambda a=after: real() + a)
        scheduler_slots.fire(config.table, slot, "execution-1#1#r", retried=True)
        status, error, _ = final(config, message_id)
        if resent:  # THEN inside the interval SQS drops a repeat: sent until delivered
            assert len(target.sent) == 2 and status == "DONE"
        else:  # past it, a resend would be delivered: never sent, UNKNOWN
            assert target.sent == [] and (status, error) == ("UNKNOWN", "Scheduler.EarlierSend")


def test_a_target_that_answered_an_error_ends_failed_and_one_lambda_stopped_ends_unknown(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    timedout = TargetFailed(
        "Sandbox.Timedout",
        '{"errorMessage": "Task timed out after 3.00 seconds"}',
        Outcome.UNKNOWN,
    )
    for answer, ending in (
        (TargetFailed("ValueError", "{}"), ("FAILED", "ValueError")),
        (timedout, ("UNKNOWN", "Sandbox.Timedout")),
    ):
        target = Target(answer)
        monkeypatch.setattr(scheduler_slots, "send", target)
        slot, [message_id] = due_slot(config, [0.0])
        scheduler_slots.fire(config.table, slot, "x#0#" + ending[0])
        assert final(config, message_id)[:2] == ending and len(target.sent) == 1


def test_no_send_outlives_its_invocation_and_one_out_of_time_keeps_its_counted_sends(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = {"now": time.time()}
    monkeypatch.setattr(scheduler_slots.time, "time", lambda: clock["now"])
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: clock.update(now=clock["now"] + s))

    def slow(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        sent.append(within)
        assert within is not None
        clock["now"] += within  # the target ran as long as it was waited for
        raise ReadTimeoutError(endpoint_url="https://lambda")

    sent: list[float | None] = []
    monkeypatch.setattr(scheduler_slots, "send", slow)
    slot, [message_id] = due_slot(config, [0.0], "again")
    deadline = slot + 100
    me = "execution-1#0#r"
    counts = scheduler_slots.fire(config.table, slot, me, deadline=deadline, lease=deadline + 60)
    # THEN its one send was waited for until the deadline at most; no resend could start
    # (less than MIN_SEND_SECONDS left): released, its spent send still counted
    assert counts == {"skipped": 0, "RELEASED": 1}
    assert len(sent) == 1 and sent[0] is not None and clock["now"] <= deadline
    status, _, sends = final(config, message_id)
    assert status == "STANDBY" and sends == [scheduler_slots.send_token(me, 0)]
    # AND a read timeout is what is left, in steps (a few clients, never more time)
    assert scheduler_slots.answer_within(838.2) == 810
    assert scheduler_slots.answer_within(12.0) == 10
    assert scheduler_slots.answer_within(5000) == scheduler_slots.SLOT_SECONDS


def test_an_express_state_machine_is_never_sent_to(config: SchedulerSettings) -> None:
    # (Express: "Idempotency is not automatically managed": a name starts twice)
    sfn = runtime.client("stepfunctions")
    role = sfn.describe_state_machine(stateMachineArn=config.state_machine_arn)["roleArn"]
    express = sfn.create_state_machine(
        name="express", definition=json.dumps(WAIT_DEFINITION), roleArn=role, type="EXPRESS"
    )["stateMachineArn"]
    scheduler_slots._client.cache_clear()
    scheduler_slots._machine_type.cache_clear()
    with pytest.raises(TargetFailed, match="EXPRESS") as refused:
        scheduler_slots.deliver(express, {"id": "m"})
    assert refused.value.error == "Scheduler.ExpressTarget"
    assert sfn.list_executions(stateMachineArn=express)["executions"] == []
    # AND a STANDARD one is started, by the message id
    scheduler_slots.deliver(config.state_machine_arn, {"id": "m"})
    listed = sfn.list_executions(stateMachineArn=config.state_machine_arn)["executions"]
    assert [e["name"] for e in listed] == ["m"]


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        (
            ClientError(
                {
                    "Error": {"Code": "TooManyRequestsException"},
                    "ResponseMetadata": {"HTTPStatusCode": 429},
                },
                "Invoke",
            ),
            Outcome.REFUSED,
        ),
        (
            ClientError(
                {
                    "Error": {"Code": "ResourceNotFoundException"},
                    "ResponseMetadata": {"HTTPStatusCode": 404},
                },
                "Invoke",
            ),
            Outcome.REFUSED,
        ),
        (
            ClientError(
                {
                    "Error": {"Code": "ServiceException"},
                    "ResponseMetadata": {"HTTPStatusCode": 500},
                },
                "Invoke",
            ),
            Outcome.UNKNOWN,
        ),
        (EndpointConnectionError(endpoint_url="https://lambda"), Outcome.REFUSED),
        (ConnectTimeoutError(endpoint_url="https://lambda"), Outcome.REFUSED),
        (ReadTimeoutError(endpoint_url="https://lambda"), Outcome.UNKNOWN),
        (ConnectionResetError(), Outcome.UNKNOWN),
        (TargetFailed("ValueError", "{}"), Outcome.FAILED),
        # Lambda's 5xx for an environment it could not set up: before the function ran
        (
            ClientError(
                {
                    "Error": {"Code": "EC2ThrottledException"},
                    "ResponseMetadata": {"HTTPStatusCode": 502},
                },
                "Invoke",
            ),
            Outcome.REFUSED,
        ),
        (ParamValidationError(report="bad"), Outcome.REFUSED),
        (scheduler_slots.NotSent("no client"), Outcome.REFUSED),
    ],
)
def test_what_a_failed_send_says_of_its_effect(error: Exception, outcome: Outcome) -> None:
    assert scheduler_slots.outcome_of(error) == outcome


def test_each_kind_of_target_has_its_resend_rule() -> None:
    assert resend_policy(TargetKind.LAMBDA) == Resend.NEVER
    assert resend_policy(TargetKind.LAMBDA, redeliver=True) == Resend.ALWAYS
    assert resend_policy(TargetKind.SQS_FIFO) == resend_policy(TargetKind.SNS_FIFO) == Resend.WINDOW
    for kind in (TargetKind.SQS, TargetKind.SNS, TargetKind.STATES, TargetKind.EVENTS):
        assert resend_policy(kind) == Resend.ALWAYS


def test_docs_delivery_table_is_each_kinds_resend_rule() -> None:
    # docs/scheduler.md, "Sends": one row per kind (or kinds), its last column the rule
    from pathlib import Path

    text = (Path(__file__).parents[2] / "docs" / "scheduler.md").read_text()
    section = text.split("## Sends: counted, bounded, never resent blind", 1)[1]
    rows = [line for line in section.split("\n") if line.startswith("| ")][1:]  # (no header)
    names = {
        "Lambda function": [TargetKind.LAMBDA],
        "SQS FIFO queue, SNS FIFO topic": [TargetKind.SQS_FIFO, TargetKind.SNS_FIFO],
        "Step Functions state machine (STANDARD)": [TargetKind.STATES],
        "SQS standard queue, SNS standard topic, EventBridge bus": [
            TargetKind.SQS,
            TargetKind.SNS,
            TargetKind.EVENTS,
        ],
    }
    said: dict[TargetKind, Resend] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if cells[0] not in names:
            break
        unseen = cells[-1]
        rule = (
            Resend.NEVER
            if unseen.startswith("UNKNOWN, not resent")
            else Resend.WINDOW
            if "within 5 minutes" in unseen
            else Resend.ALWAYS
        )
        said |= {kind: rule for kind in names[cells[0]]}
    assert said == {kind: resend_policy(kind) for kind in TargetKind}
    # and a redelivering Lambda channel is resent, as the row says
    assert "`redeliver`: resent within the budget" in rows[0]
    assert resend_policy(TargetKind.LAMBDA, redeliver=True) == Resend.ALWAYS


def test_a_publish_time_is_stored_to_the_millisecond_never_before_the_one_asked_for() -> None:
    from exactly_once.handlers.scheduler import ms_up

    assert ms_up(100.0004) == "100.001"  # %.3f said 100.000: fired 0.4 ms early
    assert ms_up(100.001) == "100.001" and ms_up(100.0) == "100.000"
    assert float(ms_up(1_796_575_409.1230001)) >= 1_796_575_409.1230001


def test_a_registration_put_resent_after_its_answer_was_lost_is_still_a_creation(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from exactly_once.handlers import scheduler

    ddb = scheduler._ddb()
    real = ddb.put_item

    def resent(**kwargs: Any) -> Any:  # the first send lands, its answer is lost, the SDK resends
        real(**kwargs)
        return real(**kwargs)

    monkeypatch.setattr(ddb, "put_item", resent)
    body = {"publishTime": time.time() + 30, "channel": "demo"}
    message, created = scheduler.register(config, body, "key-1")
    assert created and message["status"] == "STANDBY"
    monkeypatch.setattr(ddb, "put_item", real)
    again, created = scheduler.register(config, body, "key-1")  # a client's retry: a replay
    assert not created and again["id"] == message["id"]


@pytest.mark.parametrize(
    ("error", "outcome"),
    [
        ("Sandbox.Timedout", Outcome.UNKNOWN),
        ("Runtime.ExitError", Outcome.UNKNOWN),
        ("Function.ResponseSizeTooLarge", Outcome.UNKNOWN),  # it ran to its end
        ("Runtime.ImportModuleError", Outcome.REFUSED),  # its handler never ran
        ("MessageInProgress", Outcome.UNKNOWN),
        ("ValueError", Outcome.FAILED),
    ],
)
def test_what_a_functions_error_says_of_its_run(error: str, outcome: Outcome) -> None:
    assert scheduler_slots.function_error_outcome(error, "{}") == outcome


def test_an_event_bus_entry_that_failed_internally_may_have_been_put(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Events:
        def put_events(self, **_: Any) -> dict[str, Any]:
            entry = {"ErrorCode": "InternalFailure", "ErrorMessage": "unknown"}
            return {"FailedEntryCount": 1, "Entries": [entry]}

    monkeypatch.setattr(scheduler_slots, "_client", lambda service: Events())
    with pytest.raises(TargetFailed) as failed:
        scheduler_slots.send("arn:aws:events:us-east-1:1:event-bus/b", {"id": "m"})
    assert failed.value.outcome == Outcome.UNKNOWN


def test_a_fifo_resend_held_back_by_throttles_past_the_interval_is_never_sent(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = "arn:aws:sqs:us-east-1:1:q.fifo"
    runtime.client("dynamodb").put_item(
        TableName=config.table, Item={"pk": {"S": "INVOKER#fifo"}, "target_arn": {"S": fifo}}
    )
    clock = {"now": time.time()}
    monkeypatch.setattr(scheduler_slots.time, "time", lambda: clock["now"])
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: clock.update(now=clock["now"] + s))
    sent: list[float] = []

    def lost_then_throttled(target_arn: str, delivery: dict[str, Any], within: Any = None) -> None:
        sent.append(clock["now"])
        if len(sent) == 1:  # the first: its answer lost (it may be in the queue)
            raise ClientError(
                {"Error": {"Code": "InternalError"}, "ResponseMetadata": {"HTTPStatusCode": 500}},
                "SendMessage",
            )
        raise ClientError({"Error": {"Code": "ThrottlingException"}}, "SendMessage")

    monkeypatch.setattr(scheduler_slots, "send", lost_then_throttled)
    # (a lease that outlasts the test's clock: no keeper thread renews it by that clock)
    monkeypatch.setattr(scheduler_slots, "LEASE_SECONDS", 900)
    slot, [message_id] = due_slot(config, [0.0], "fifo")
    clock["now"] = slot + 0.5
    scheduler_slots.fire(config.table, slot, "x#0#r", deadline=slot + 800, lease=slot + 860)
    # THEN resent (throttled) inside the interval only, then UNKNOWN, never sent after it
    first = float(status_of(config, message_id)["first_sent"]["N"])
    window = scheduler_slots.FIFO_WINDOW_SECONDS - scheduler_slots.FIFO_MARGIN_SECONDS
    assert len(sent) > 2 and max(sent) < first + window
    assert final(config, message_id)[:2] == ("UNKNOWN", "InternalError")


def test_a_message_given_back_after_a_send_it_never_saw_cannot_be_cancelled(
    config: SchedulerSettings,
) -> None:
    from exactly_once.handlers import scheduler
    from exactly_once.handlers.errors import Conflict

    _, [message_id] = due_slot(config, [0.0], "again")
    me = "execution-1#0#r"
    assert scheduler_slots.claim(config.table, message_id, me, time.time() + 60).item
    scheduler_slots.release(config.table, message_id, me)  # its send counted, kept
    assert status_of(config, message_id)["status"]["S"] == "STANDBY"
    with pytest.raises(Conflict, match="may have been delivered"):
        scheduler.cancel(config, message_id)
    # AND one given back unsent (its count dropped) still can be
    _, [unsent] = due_slot(config, [0.0], "again")
    assert scheduler_slots.claim(config.table, unsent, me, time.time() + 60).item
    scheduler_slots.release(config.table, unsent, me, scheduler_slots.send_token(me, 0))
    assert scheduler.cancel(config, unsent)["status"] == "CANCELLED"


def test_a_state_machine_is_known_by_its_own_arn_from_a_versions_or_an_aliass() -> None:
    from exactly_once.handlers.targets import machine_of

    machine = "arn:aws:states:us-east-1:1:stateMachine:orders"
    assert machine_of(machine) == machine_of(f"{machine}:live") == machine_of(f"{machine}:3")
    assert machine_of(machine) == machine


def test_a_claim_is_held_a_minute_at_a_time_and_renewed_while_its_claimant_lives(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = time.time()
    clock = {"now": start}
    monkeypatch.setattr(scheduler_slots.time, "time", lambda: clock["now"])
    _, [message_id] = due_slot(config, [0.0])
    keeper = scheduler_slots.Keeper(config.table, "a", end=start + 900)
    assert scheduler_slots.claim(config.table, message_id, "a", keeper.lease()).item
    keeper.hold(message_id, keeper.lease())
    keeper.sending(message_id)  # (its send under way: renewed until its status is written)
    turns = iter(range(3))

    def pause(seconds: float) -> None:  # three turns of the keeper's, then it is stopped
        clock["now"] += seconds
        if next(turns, None) is None:
            keeper.stop()

    # WHEN its claimant works on for 45 s (the keeper renewing every 15 s)
    keeper.run(pause)
    renewed = clock["now"] - scheduler_slots.RENEW_SECONDS + scheduler_slots.LEASE_SECONDS
    # THEN another claimant finds it held until a minute after the last renewal
    clock["now"] = renewed - 1
    held = scheduler_slots.claim(config.table, message_id, "b", clock["now"] + 60)
    assert held.item is None and held.held_until == pytest.approx(renewed, abs=0.01)
    # AND once its claimant stopped renewing (it died), it is taken over a minute later
    clock["now"] = renewed + scheduler_slots.LEASE_SKEW_SECONDS + 1
    assert scheduler_slots.claim(config.table, message_id, "b", clock["now"] + 60).item
    # AND the first claimant's renewal then finds it no longer its own (and drops it)
    assert not scheduler_slots.renew(config.table, message_id, "a", clock["now"] + 60)
    # AND a lease never runs past its invocation's end
    assert scheduler_slots.Keeper(config.table, "c", end=clock["now"] + 10).lease() == (
        clock["now"] + 10
    )


def test_a_claim_waiting_for_its_send_is_held_longer_and_renewed_seldom(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (a burst of 1,000 held while a target of concurrency 12 worked through them: 67
    # renewals a second, more than LocalStack's table served, and the leases lapsed)
    start = time.time()
    clock = {"now": start}
    monkeypatch.setattr(scheduler_slots.time, "time", lambda: clock["now"])
    _, [waiting, refused, ran, sent] = due_slot(config, [0.0, 0.1, 0.2, 0.3])
    keeper = scheduler_slots.Keeper(config.table, "a", end=start + 900)
    sendings = {}
    for message_id in (waiting, refused, ran, sent):
        assert scheduler_slots.claim(config.table, message_id, "a", keeper.lease()).item
        keeper.hold(message_id, keeper.lease())
        sendings[message_id] = scheduler_slots.Sending.of(
            config.table, status_of(config, message_id), "a", Resend.NEVER
        )
        sendings[message_id].keeper = keeper
    # GIVEN one claim not yet sent; one whose send was refused unrun (a throttle); one
    # whose send may have run (a timeout) and then was throttled; one whose send is under way
    for message_id in (refused, ran, sent):
        sendings[message_id].held()
    sendings[refused].refused()
    sendings[ran].last = scheduler_slots.OutcomeUnknown("ReadTimeout", "no answer")
    sendings[ran].refused()
    renewals: list[str] = []
    renew = scheduler_slots.renew

    def counted(table: str, message_id: str, me: str, lease: float) -> bool | None:
        renewals.append(message_id)
        return renew(table, message_id, me, lease)

    monkeypatch.setattr(scheduler_slots, "renew", counted)

    def turns(count: int) -> None:
        keeper_turns(keeper.run, clock, count)

    # WHEN a minute passes, the keeper turning every 15 s
    turns(4)
    # THEN the two waiting were renewed once, at its first turn, two to three minutes
    # ahead (drawn: a burst's claims are renewed apart after that); those whose send is
    # under way or may have run, at every turn, a minute ahead, first
    assert collections.Counter(renewals) == {waiting: 1, refused: 1, ran: 4, sent: 4}
    assert set(renewals[:2]) == {ran, sent}
    first_turn = start + scheduler_slots.RENEW_SECONDS
    for message_id in (waiting, refused):
        lease = float(status_of(config, message_id)["lease"]["N"])
        wait = scheduler_slots.WAIT_LEASE_SECONDS
        assert first_turn + wait * 2 / 3 - 0.01 <= lease <= first_turn + wait + 0.01
    # AND no other claimant takes them over meanwhile (their claimant lives)
    held = scheduler_slots.claim(config.table, waiting, "b", clock["now"] + 60)
    assert held.item is None and held.held_until is not None
    # AND one sent at last is renewed a minute ahead from then on
    sendings[waiting].held()
    renewals.clear()
    turns(1)
    assert sorted(renewals) == sorted([waiting, ran, sent])
    assert float(status_of(config, waiting)["lease"]["N"]) == pytest.approx(
        clock["now"] + scheduler_slots.LEASE_SECONDS, abs=0.01
    )
    # AND a FIFO target's claim keeps the minute's lease even while it waits (its taker
    # must send within the queue's 5-minute deduplication interval of the counted send)
    fifo = scheduler_slots.Keeper(config.table, "a", end=clock["now"] + 900)
    fifo.hold(refused, clock["now"] + 60)
    windowed = scheduler_slots.Sending.of(
        config.table, status_of(config, refused), "a", Resend.WINDOW
    )
    windowed.keeper = fifo
    windowed.keep_near()
    windowed.refused()
    assert fifo._due() == [(refused, scheduler_slots.LEASE_SECONDS)]
    # AND only while that interval lasts: past it a taker sends nothing however soon it
    # comes, so the claim waits on the longer lease, renewed once its lease ends within
    # the minute
    clock["now"] = windowed.window_closes() + 1
    fifo.hold(refused, clock["now"] + scheduler_slots.LEASE_SECONDS - 1)
    [(again, seconds)] = fifo._due()
    assert again == refused and seconds > scheduler_slots.LEASE_SECONDS
    # AND a send made then is renewed a minute ahead again, as every send is
    windowed.held()
    assert fifo._due() == [(refused, scheduler_slots.LEASE_SECONDS)]
    # AND a lease never runs past its invocation's end, nor is renewed once there
    near_end = scheduler_slots.Keeper(config.table, "a", end=clock["now"] + 30)
    near_end.hold(refused, clock["now"] + 30)
    assert near_end._due() == []


def test_a_fire_that_died_after_its_claims_leaves_them_to_its_retry_within_a_minute(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (finding 4 of the targets issue: the lease was the invocation's end, so a Fire that
    # died a second after its claims left them FIRING to its lease's end and a sweep's)
    clock = {"now": time.time()}
    monkeypatch.setattr(scheduler_slots.time, "time", lambda: clock["now"])
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: clock.update(now=clock["now"] + s))
    target = Target()
    monkeypatch.setattr(scheduler_slots, "send", target)
    # (its target drops a redelivery: a claim counts its send, and a send counted by a
    # claimant that died may have been made; to any other it would end UNKNOWN)
    slot, [message_id] = due_slot(config, [0.0], "again")
    # GIVEN attempt 0 claimed it (as a Fire's claims are held) and died at once
    dead = scheduler_slots.Keeper(config.table, "x#0#r", end=clock["now"] + 900)
    assert scheduler_slots.claim(config.table, message_id, "x#0#r", dead.lease()).item
    died = clock["now"]
    # WHEN the Fire's retry runs, with 14 minutes of its own
    end = clock["now"] + 840
    counts = scheduler_slots.fire(config.table, slot, "x#1#r", retried=True, lease=end)
    # THEN it waited for the dead claim's minute, took it over and delivered it
    assert counts == {"skipped": 0, "DONE": 1} and [i for i, _ in target.sent] == [message_id]
    assert clock["now"] - died < scheduler_slots.LEASE_SECONDS + 10
    assert final(config, message_id)[0] == "DONE"


class StopTurns(Exception):
    pass


def keeper_turns(run: Any, clock: dict[str, float], count: int) -> None:
    """A lease keeper's next `count` turns (its `run`), RENEW_SECONDS apart by `clock`."""
    left = iter(range(count))

    def pause(seconds: float) -> None:
        if next(left, None) is None:
            raise StopTurns
        clock["now"] += seconds

    with pytest.raises(StopTurns):
        run(pause)


def test_a_claim_in_hand_is_renewed_and_a_claimant_that_lost_it_sends_nothing_more(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = {"now": time.time()}
    monkeypatch.setattr(scheduler_slots.time, "time", lambda: clock["now"])
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: clock.update(now=clock["now"] + s))
    keepers: list[Any] = []
    monkeypatch.setattr(scheduler_slots, "beside", keepers.append)  # its turns taken by hand

    def turns(count: int) -> None:
        keeper_turns(keepers[-1], clock, count)

    def lease_of(message_id: str) -> float:
        return float(status_of(config, message_id)["lease"]["N"])

    # GIVEN a target that runs 45 s
    slot, [slow] = due_slot(config, [0.0])
    claimed: list[float] = []

    def runs_45_seconds(target_arn: str, delivery: dict[str, Any], within: float | None = None):
        claimed.append(lease_of(slow))
        turns(3)  # the keeper's turns while the target runs
        claimed.append(lease_of(slow))

    monkeypatch.setattr(scheduler_slots, "send", runs_45_seconds)
    assert scheduler_slots.fire(config.table, slot, "x#0#a") == {"skipped": 0, "DONE": 1}
    # THEN its lease was renewed, a minute ahead of the last turn
    assert claimed[1] == pytest.approx(claimed[0] + 45, abs=1)
    # AND a claimant that lost its claim (its renewals failing while another took it over)
    # sends nothing more: a throttled send is not tried again
    slot, [lost] = due_slot(config, [0.0])
    sent: list[str] = []

    def throttled_then_taken(
        target_arn: str, delivery: dict[str, Any], within: float | None = None
    ):
        sent.append(delivery["id"])
        clock["now"] = lease_of(lost) + scheduler_slots.LEASE_SKEW_SECONDS + 1
        assert scheduler_slots.claim(config.table, lost, "y#1#b", clock["now"] + 60).item
        turns(1)  # its keeper's renewal finds the claim another's
        raise ClientError(
            {
                "Error": {"Code": "TooManyRequestsException"},
                "ResponseMetadata": {"HTTPStatusCode": 429},
            },
            "Invoke",
        )

    monkeypatch.setattr(scheduler_slots, "send", throttled_then_taken)
    counts = scheduler_slots.fire(config.table, slot, "x#0#c")
    assert counts == {"skipped": 0, "TAKEN_OVER": 1} and sent == [lost]
    assert status_of(config, lost)["claimed_by"]["S"] == "y#1#b"


def test_a_target_type_that_could_not_be_read_is_never_counted_as_a_send(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a state machine whose type reads fail twice (a 5xx, a lost answer), then EXPRESS
    reads: list[str] = []

    def machine_type(arn: str) -> str:
        reads.append(arn)
        if len(reads) == 1:
            raise ClientError(
                {
                    "Error": {"Code": "InternalServerError"},
                    "ResponseMetadata": {"HTTPStatusCode": 500},
                },
                "DescribeStateMachine",
            )
        if len(reads) == 2:
            raise ReadTimeoutError(endpoint_url="https://states")
        return "EXPRESS"

    monkeypatch.setattr(scheduler_slots, "_machine_type", machine_type)
    machine = "arn:aws:states:us-east-1:1:stateMachine:fast"
    sending = scheduler_slots.Sending(config.table, "m", "x#0#r", Resend.ALWAYS, time.time(), 0)
    # THEN it ends refused as EXPRESS, nothing sent, no send counted past the claim's own
    with pytest.raises(TargetFailed, match="EXPRESS") as refused:
        scheduler_slots.deliver(machine, {"id": "m"}, sending=sending)
    assert refused.value.error == "Scheduler.ExpressTarget" and len(reads) == 3
    assert (sending.spent, sending.unspent) == (1, True)
