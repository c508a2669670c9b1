"""The slot clock against moto: which messages join a slot, and a slot fires each of its
messages once, at or after its time, whoever else runs the same slot."""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly_once.components.scheduler import slot_definition
from exactly_once.handlers import (
    executions,
    runtime,
    scheduler,
    scheduler_slots,
    scheduler_sweep,
    timestamps,
)
from exactly_once.handlers.errors import ClientError
from exactly_once.handlers.scheduler import SchedulerSettings
from exactly_once.handlers.scheduler_index import Status
from exactly_once.handlers.scheduler_slots import TargetFailed
from tests.unit.conftest import WAIT_DEFINITION, make_state_machine
from tests.unit.test_scheduler import config as config  # the table and the state machine

TARGET = "arn:aws:lambda:us-east-1:1:function:t"


@pytest.fixture
def slotted(config: SchedulerSettings) -> SchedulerSettings:
    return dataclasses.replace(config, join_slots=True)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, float]]]:
    """Deliveries (message id, when), instead of invoking a target."""
    calls: list[tuple[str, float]] = []
    lock = threading.Lock()

    def send(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        assert target_arn == TARGET
        with lock:
            calls.append((delivery["id"], time.time()))

    monkeypatch.setattr(scheduler_slots, "send", send)
    yield calls


def names(machine: str, prefix: str = "") -> list[str]:
    """The machine's executions' names (starting with `prefix`: `slot-`, a slot's)."""
    listed = runtime.client("stepfunctions").list_executions(stateMachineArn=machine)
    return sorted(e["name"] for e in listed["executions"] if e["name"].startswith(prefix))


def register(
    config: SchedulerSettings, publish: float, key: str | None = None, channel: str = "demo"
) -> dict[str, Any]:
    message, _ = scheduler.register(config, {"publishTime": publish, "channel": channel}, key)
    return message


def test_messages_of_one_second_share_its_slot_execution_started_once(
    slotted: SchedulerSettings,
) -> None:
    # GIVEN three messages due in the same second, 30 s ahead, and one due in 2 s
    slot = math.floor(time.time()) + 30
    ids = [register(slotted, slot + f)["id"] for f in (0.0, 0.5, 0.999)]
    soon = register(slotted, time.time() + 2)["id"]
    # THEN one slot execution, named by the second; the near one, too late for its slot,
    # has its own execution
    assert names(slotted.state_machine_arn) == sorted([f"slot-{slot}", soon])
    # AND the stream's records start nothing more (this sandbox knows the slot started;
    # a fresh one gets ExecutionAlreadyExists)
    records = [{"dynamodb": {"NewImage": scheduler.read_item(slotted, i)}} for i in ids]
    assert (
        scheduler.start_records(slotted, {"Records": records}, None)["outcomes"]
        == ["DUPLICATE"] * 3
    )
    scheduler.forget_sandbox()
    assert scheduler.start_records(slotted, {"Records": records[:1]}, None)["outcomes"] == [
        "DUPLICATE"
    ]
    assert names(slotted.state_machine_arn) == sorted([f"slot-{slot}", soon])


def test_a_start_that_returns_past_the_slots_cutoff_also_starts_the_messages_own(
    slotted: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a slot start that returns only after the slot read its messages
    slot = math.floor(time.time()) + 30
    real = scheduler._start_slot

    def slow(machine: str, s: int, context: Any) -> Any:
        outcome = real(machine, s, context)
        monkeypatch.setattr(scheduler.time, "time", lambda: slot - 1.0)
        return outcome

    monkeypatch.setattr(scheduler, "_start_slot", slow)
    message = register(slotted, slot + 0.2)
    # THEN the message has its own execution too (whichever claims it first fires it)
    assert names(slotted.state_machine_arn) == sorted([f"slot-{slot}", message["id"]])


def test_a_stream_record_handled_past_the_cutoff_starts_a_slot_of_one_only_if_written_after_it(
    slotted: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two STANDBY messages of one slot, their stream records handled after its cutoff
    # (the stream lagging): one written well before the cutoff (in the index the slot reads
    # at its wake), one written after it
    slot = math.floor(time.time()) + 30
    monkeypatch.setattr(scheduler, "start_soon", lambda *a: None)  # (the stream starts them)
    joined, late = (register(slotted, slot + 0.2), register(slotted, slot + 0.4))
    monkeypatch.setattr(scheduler.time, "time", lambda: scheduler_slots.join_by(slot) + 0.5)
    records = [
        {
            "dynamodb": {
                "NewImage": scheduler.read_item(slotted, message["id"]),
                "ApproximateCreationDateTime": int(written),
            }
        }
        for message, written in (
            (joined, scheduler_slots.join_by(slot) - 5),
            (late, scheduler_slots.join_by(slot)),
        )
    ]
    scheduler.start_records(slotted, {"Records": records}, None)
    # THEN the first is left to its slot (started once, no slot of one: no execution and
    # its transitions for nothing); the second gets its own, as the slot may not see it
    assert names(slotted.state_machine_arn) == sorted([f"slot-{slot}", late["id"]])
    # AND once its slot's second read is over, one still STANDBY (the index missed it
    # twice) gets its own too, rather than wait for the sweep
    # (but not one its slot claimed and gave back: its slot's retry, or the sweep, fires it)
    given_back = register(slotted, slot + 0.6)
    me = f"{slotted.state_machine_arn}:slot-{slot}#0#r"
    assert scheduler_slots.claim(slotted.table, given_back["id"], me, slot + 60).item
    scheduler_slots.release(slotted.table, given_back["id"], me)
    item = scheduler.read_item(slotted, given_back["id"])
    assert item is not None and item["status"]["S"] == "STANDBY"
    record = {"dynamodb": {"NewImage": item, "ApproximateCreationDateTime": int(slot - 20)}}
    monkeypatch.setattr(scheduler.time, "time", lambda: slot + 2.0)
    scheduler.start_records(slotted, {"Records": [*records[:1], record]}, None)
    assert names(slotted.state_machine_arn) == sorted([f"slot-{slot}", late["id"], joined["id"]])


def test_the_sweep_starts_no_slot_of_one_for_a_message_claimed_and_given_back(
    slotted: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two STANDBY messages of a second just past (not yet overdue), neither started
    # on its own: one its slot claimed and gave back (a throttling target), one never
    # claimed (the index missed it)
    slot = math.floor(time.time()) + 1
    monkeypatch.setattr(scheduler, "start_soon", lambda *a: None)
    given_back, missed = (register(slotted, slot + 0.2)["id"], register(slotted, slot + 0.4)["id"])
    me = f"{slotted.state_machine_arn}:slot-{slot}#0#r"
    assert scheduler_slots.claim(slotted.table, given_back, me, time.time() + 60).item
    scheduler_slots.release(slotted.table, given_back, me)
    # WHEN the sweep runs 10 s after their second
    result = scheduler_sweep.sweep(slotted, now=slot + 10)
    # THEN only the one never claimed gets a slot of one; the other is its slot's retry's
    assert result["restarted"] == 1
    assert names(slotted.state_machine_arn) == [missed]


def test_the_slot_machine_waits_then_fires_and_never_retries_a_status_not_recorded() -> None:
    definition = slot_definition("arn:aws:lambda:us-east-1:1:function:slots")
    assert list(definition["States"]) == ["Wait", "Fire"]
    assert definition["States"]["Wait"]["TimestampPath"] == "$.wakeAt"
    retry = definition["States"]["Fire"]["Retry"]
    assert retry[0] == {"ErrorEquals": ["StatusNotRecorded"], "MaxAttempts": 0}
    payload = definition["States"]["Fire"]["Parameters"]["Payload"]
    # the whole input (a slot of one's names its message; a slot's has no such field)
    assert payload == {
        "input.$": "$",
        "execution.$": "$$.Execution.Id",
        "retry.$": "$$.State.RetryCount",
    }
    # the Wait ends LEAD_SECONDS before the second, a whole second
    assert scheduler_slots.slot_input(1_800_000_000) == {
        "slot": 1_800_000_000,
        "wakeAt": "2027-01-15T07:59:58Z",
    }


def due_slot(
    config: SchedulerSettings, offsets: list[float], channel: str = "demo"
) -> tuple[int, list[str]]:
    """Messages in the next whole second (STANDBY: within the window), each started on its
    own execution (a slot of one, as `config` starts them), which nothing runs here; on
    `channel` ("again": a target that drops a redelivery)."""
    slot = math.floor(time.time()) + 1
    return slot, [register(config, slot + offset, None, channel)["id"] for offset in offsets]


def test_a_slot_fires_each_message_once_at_or_after_its_time_and_records_it(
    config: SchedulerSettings, sent: list[tuple[str, float]]
) -> None:
    slot, ids = due_slot(config, [0.0, 0.3, 0.6])
    cancelled = register(config, slot + 0.5)["id"]
    scheduler.cancel(config, cancelled)
    other_slot = register(config, slot + 1.2)["id"]
    counts = scheduler_slots.fire(config.table, slot, "execution-1")
    assert counts == {"skipped": 0, "DONE": 3}  # the cancelled one is not even read
    assert sorted(i for i, _ in sent) == sorted(ids)
    for message_id, at in sent:
        message = scheduler.get(config, message_id)
        assert message is not None and message["status"] == "DONE"
        assert at >= message["publishTime"], "fired early"
        assert timestamps.epoch(message["fired_at"]) >= message["publishTime"]
    assert scheduler.get(config, cancelled)["status"] == "CANCELLED"  # type: ignore[index]
    assert scheduler.get(config, other_slot)["status"] == "STANDBY"  # type: ignore[index]
    # AND the clock run again (a retried Fire) finds nothing left to fire
    assert scheduler_slots.fire(config.table, slot, "execution-1") == {"skipped": 0}
    assert len(sent) == 3


def test_a_slot_of_one_fires_its_message_only_at_its_time_without_reading_the_index(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two messages of one second, and an index that has not caught up with either
    slot, [mine, other] = due_slot(config, [0.4, 0.6])
    monkeypatch.setattr(scheduler_slots, "due", lambda *args, **kwargs: iter(()))
    monkeypatch.setattr(
        scheduler_slots.SlotSettings,
        "current",
        classmethod(lambda cls: scheduler_slots.SlotSettings(config.table, "")),
    )
    # WHEN its own execution (a slot of one) invokes the slot function, as the state
    # machine does: the whole input, the execution, the retry count
    event = {"input": scheduler_slots.slot_input(slot, mine), "execution": "own", "retry": 0}
    counts = scheduler_slots.handler(event, None)
    # THEN that message is fired, once, never early, and recorded; the other is untouched
    assert counts == {"skipped": 0, "DONE": 1}
    [(fired, at)] = sent
    assert fired == mine and at >= slot + 0.4
    assert scheduler.get(config, mine)["status"] == "DONE"  # type: ignore[index]
    assert scheduler.get(config, other)["status"] == "STANDBY"  # type: ignore[index]
    # AND run again (a retried Fire, a duplicate), it fires nothing more
    assert scheduler_slots.handler({**event, "retry": 1}, None) == {"skipped": 1}
    assert len(sent) == 1


def test_slow_targets_of_one_chunk_are_all_in_flight_at_once_none_queues_behind_another(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a chunk of messages due at the same instant, to a slow target (each invoke
    # waits until every one of them has begun, or 5 s)
    slot, ids = due_slot(config, [0.5] * scheduler_slots.CHUNK)
    in_flight, most = 0, 0
    everyone = threading.Condition()

    def send(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        nonlocal in_flight, most
        with everyone:
            in_flight += 1
            most = max(most, in_flight)
            everyone.notify_all()
            everyone.wait_for(lambda: most == len(ids), timeout=5)
            in_flight -= 1

    monkeypatch.setattr(scheduler_slots, "send", send)
    # WHEN the slot fires them
    counts = scheduler_slots.fire(config.table, slot, "execution-1")
    # THEN every delivery was in flight at once (one thread a message: a slow target
    # delays only its own message), and each is DONE
    assert most == len(ids) and counts == {"skipped": 0, "DONE": len(ids)}


def test_two_clocks_of_one_slot_fire_each_message_once(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    slot, ids = due_slot(config, [i / 20 for i in range(20)])
    # Both clocks read the slot before either claims (however slow the machine), so every
    # message is claimed by one and lost by the other.
    together = threading.Barrier(2, timeout=30)
    read = scheduler_slots.members
    first = threading.local()  # (each clock's second read, once its second is over, is its own)

    def members(*args: Any, **kwargs: Any) -> list[str]:
        found = read(*args, **kwargs)
        if not getattr(first, "done", False):
            first.done = True
            together.wait()
        return found

    monkeypatch.setattr(scheduler_slots, "members", members)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(
            pool.map(lambda me: scheduler_slots.fire(config.table, slot, me), ["one", "two"])
        )
    assert sorted(i for i, _ in sent) == sorted(ids)  # each once
    assert sum(r.get("DONE", 0) for r in results) == 20
    assert sum(r.get("skipped", 0) for r in results) == 20  # each lost claim counted


def test_a_claim_is_held_by_its_lease_and_taken_over_by_a_retry_once_it_ended(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a message the slot's first attempt claimed, holding it until `lease` (its
    # invocation's end); then its Lambda died before delivering it. Its target drops a
    # redelivery: a claimant that died after its claim may be sent to again
    slot, [message_id] = due_slot(config, [0.0], "again")
    first = scheduler_slots.claimant("execution-1", 0)
    lease = time.time() + 600
    assert scheduler_slots.claim(config.table, message_id, first, lease).item is not None
    # THEN while the lease holds, nobody takes it: not another clock, not the Fire's retry
    # (the first attempt, or its workers, may still be delivering it)
    retry = scheduler_slots.claimant("execution-1", 1)
    for other in ("execution-2#0", retry):
        held = scheduler_slots.claim(config.table, message_id, other, time.time() + 900)
        assert held.item is None and held.held_until == pytest.approx(lease, abs=0.001)
    # AND a retry with too little time left to outwait the lease leaves it (and says so)
    short = time.time() + 30
    assert scheduler_slots.fire(
        config.table, slot, retry, retried=True, deadline=short, lease=short
    ) == {"skipped": 1}
    # AND the first attempt's own claim, sent again (a lost answer), is still its own
    assert scheduler_slots.claim(config.table, message_id, first, lease).item is not None
    # WHEN the lease has ended (the claimant is dead: Lambda stopped it at its timeout), a
    # second ago (the clock from the lease, not from the test's start: a loaded machine's
    # seconds since then would carry it past the skew)
    real = time.time
    ended = real()
    monkeypatch.setattr(scheduler_slots.time, "time", lambda: lease + 1 + real() - ended)
    # THEN a fresh clock (listing it in its STANDBY lane: scheduler_index) takes nothing
    # still within the lease's skew; a retry takes it over and delivers it, once
    assert scheduler_slots.fire(config.table, slot, "execution-3#0") == {"skipped": 1}
    assert scheduler_slots.fire(config.table, slot, retry, retried=True) == {
        "skipped": 0,
        "DONE": 1,
    }
    assert [i for i, _ in sent] == [message_id]


def test_a_retry_outwaits_an_earlier_attempts_live_lease_then_takes_up_what_it_left(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a message held by the first attempt's lease for 100 s more (it died meanwhile);
    # its target drops a redelivery
    slot, [message_id] = due_slot(config, [0.0], "again")
    clock = {"now": time.time()}
    monkeypatch.setattr(scheduler_slots.time, "time", lambda: clock["now"])
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: clock.update(now=clock["now"] + s))
    first, retry = (scheduler_slots.claimant("execution-1", n) for n in (0, 1))
    scheduler_slots.claim(config.table, message_id, first, clock["now"] + 100)
    # WHEN the Fire's retry runs with time to spare
    counts = scheduler_slots.fire(config.table, slot, retry, retried=True, lease=clock["now"] + 900)
    # THEN it waited for the lease to end, took the message up and delivered it once
    assert counts == {"skipped": 0, "DONE": 1}
    assert [i for i, _ in sent] == [message_id]


def test_a_claim_that_keeps_failing_leaves_its_message_and_the_rest_are_delivered(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN three messages of a slot, the second's claim refused every time (the table
    # throttling it past the SDK's retries and the claim's own)
    slot, ids = due_slot(config, [0.0, 0.3, 0.6])
    real = scheduler_slots.claim
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: None)

    def claim(table: str, message_id: str, me: str, lease: float) -> Any:
        if message_id == ids[1]:
            raise ClientError(
                {"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "x"}},
                "UpdateItem",
            )
        return real(table, message_id, me, lease)

    monkeypatch.setattr(scheduler_slots, "claim", claim)
    monkeypatch.setattr(
        scheduler_slots.SlotSettings,
        "current",
        classmethod(lambda cls: scheduler_slots.SlotSettings(config.table, "")),
    )
    # WHEN the slot fires
    with pytest.raises(scheduler_slots.ClaimsFailed):
        scheduler_slots.handler({"slot": slot, "execution": "x", "retry": 0}, None)
    # THEN the others were delivered and recorded; the second stays STANDBY, for the
    # slot's retry (its state machine retries ClaimsFailed), never half-claimed
    assert sorted(i for i, _ in sent) == sorted([ids[0], ids[2]])
    statuses = [scheduler.get(config, i)["status"] for i in ids]  # type: ignore[index]
    assert statuses == ["DONE", "STANDBY", "DONE"]


def test_a_message_listed_in_two_lanes_by_a_stale_index_is_fired_once(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an index read that lists a message twice (moving STANDBY -> FIRING, the
    # eventually consistent index shows it under both)
    slot, [message_id] = due_slot(config, [0.0])
    real = scheduler_slots.due

    def due(*args: Any, **kwargs: Any) -> Any:
        found = list(real(*args, **kwargs))
        return found + found

    monkeypatch.setattr(scheduler_slots, "due", due)
    # THEN it is claimed and delivered once
    assert scheduler_slots.fire(config.table, slot, "e#0")["DONE"] == 1
    assert [i for i, _ in sent] == [message_id]


def test_a_message_the_lagging_index_hid_from_the_first_read_fires_once_the_second_is_over(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a slot whose first index read misses its only message (the index lags behind
    # the table), which then shows it
    slot, [message_id] = due_slot(config, [0.0])
    real = scheduler_slots.due
    reads: list[float] = []  # when each lane was read

    def due(*args: Any, **kwargs: Any) -> Any:
        reads.append(time.time())
        return real(*args, **kwargs) if time.time() >= slot else iter(())

    monkeypatch.setattr(scheduler_slots, "due", due)
    # WHEN the slot fires, before its second
    assert time.time() < slot
    counts = scheduler_slots.fire(config.table, slot, "e#0")
    # THEN its second read, once the second was over (not at once), found and fired it,
    # once: it did not wait for the sweep
    assert counts["DONE"] == 1 and [i for i, _ in sent] == [message_id]
    first, second = reads[: len(reads) // 2], reads[len(reads) // 2 :]
    assert max(first) < slot and min(second) >= slot + 1
    assert scheduler.get(config, message_id)["status"] == "DONE"  # type: ignore[index]


def test_the_second_read_fires_what_the_first_missed_beside_the_first_reads_slow_target(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a slot of two messages: the first read sees only the first, whose target takes
    # 4 s; the lagging index hid the second from it
    slot, [slow, hidden] = due_slot(config, [0.0, 0.1])
    real = scheduler_slots.due

    def due(*args: Any, **kwargs: Any) -> Any:
        listed = real(*args, **kwargs)
        return listed if time.time() >= slot else ((i, t) for i, t in listed if i != hidden)

    sent: dict[str, float] = {}

    def send(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        sent[delivery["id"]] = time.time()
        if delivery["id"] == slow:
            time.sleep(4)

    monkeypatch.setattr(scheduler_slots, "due", due)
    monkeypatch.setattr(scheduler_slots, "send", send)
    counts = scheduler_slots.fire(config.table, slot, "e#0")
    # THEN both fired once; the hidden one once its second was over, while the slow
    # target still ran (not after it)
    assert counts["DONE"] == 2 and set(sent) == {slow, hidden}
    assert slot + 1 <= sent[hidden] < sent[slow] + 4


def test_a_delivery_and_a_workers_invoke_are_sent_once_by_the_sdk() -> None:
    # botocore's max_attempts counts retries (1 would be two sends); total_max_attempts sends
    scheduler_slots._client.cache_clear()
    try:
        for service in ("lambda", "sqs", "sns", "stepfunctions", "events"):
            retries = scheduler_slots._client(service).meta.config.retries
            assert retries == {"total_max_attempts": 1, "mode": "standard"}, service
        assert scheduler_slots._client("dynamodb").meta.config.retries["total_max_attempts"] > 1
    finally:
        scheduler_slots._client.cache_clear()


def test_a_target_failing_every_retry_ends_failed_with_its_error(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[str] = []

    def send(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        attempts.append(delivery["id"])
        raise TargetFailed("Exception", '{"errorMessage": "injected failure"}')

    monkeypatch.setattr(scheduler_slots, "send", send)
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: None)
    # a target that drops a redelivery is sent its budget; any other, once
    for channel, sends in (("again", scheduler_slots.SEND_BUDGET), ("demo", 1)):
        attempts.clear()
        slot, [message_id] = due_slot(config, [0.0], channel)
        assert scheduler_slots.fire(config.table, slot, "x") == {"skipped": 0, "FAILED": 1}
        assert len(attempts) == sends
        message = scheduler.get(config, message_id)
        assert message is not None and message["status"] == "FAILED"
        assert json.loads(message["error"])["Error"] == "Exception"
        assert "injected failure" in message["error"]
        counted = status_of(config, message_id)["sends"]["SS"]
        assert len(counted) == sends  # each send counted on the record


def test_a_throttled_delivery_is_retried_past_the_failure_budget() -> None:
    calls: list[int] = []

    def throttled(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        calls.append(1)
        if len(calls) <= 10:
            raise ClientError({"Error": {"Code": "TooManyRequestsException"}}, "Invoke")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scheduler_slots, "send", throttled)
        scheduler_slots.deliver(TARGET, {"id": "m"}, sleep=lambda s: None)
    assert len(calls) == 11


def test_a_throttle_past_its_attempts_is_retried_until_the_invocations_deadline() -> None:
    # a throttled invoke never ran: giving up would mark the message FAILED undelivered
    calls: list[int] = []

    def throttled_for(times: int) -> Any:
        def send(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
            calls.append(1)
            if len(calls) <= times:
                raise ClientError({"Error": {"Code": "TooManyRequestsException"}}, "Invoke")

        return send

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scheduler_slots, "send", throttled_for(60))
        scheduler_slots.deliver(
            TARGET, {"id": "m"}, sleep=lambda s: None, deadline=time.time() + 600
        )
        assert len(calls) == 61  # past the 30 attempts, within the deadline
        calls.clear()
        with pytest.raises(TargetFailed, match="TooManyRequests"):  # no deadline: 30, then 3
            scheduler_slots.deliver(TARGET, {"id": "m"}, sleep=lambda s: None)
        assert (
            len(calls) == 1 + scheduler_slots.THROTTLED_ATTEMPTS + scheduler_slots.FAILED_ATTEMPTS
        )


@pytest.mark.parametrize(("share", "most", "shares"), [(4, 64, 3), (100, 64, 1), (2, 4, 4)])
def test_a_large_slot_hands_each_worker_its_share_of_the_ids_and_fires_each_once(
    config: SchedulerSettings,
    sent: list[tuple[str, float]],
    monkeypatch: pytest.MonkeyPatch,
    share: int,
    most: int,
    shares: int,
) -> None:
    # GIVEN a slot past what it fires alone (CHUNK), workers of WORKER_SHARE messages each,
    # at most MAX_WORKERS
    monkeypatch.setattr(scheduler_slots, "CHUNK", 4)
    monkeypatch.setattr(scheduler_slots, "WORKER_SHARE", share)
    monkeypatch.setattr(scheduler_slots, "MAX_WORKERS", most)
    slot, ids = due_slot(config, [i / 12 for i in range(12)])
    workers: dict[int, list[str]] = {}

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        assert event["of"] == shares
        workers[event["shard"]] = event["ids"]
        return scheduler_slots.fire(
            config.table, slot, event["claimant"], event["shard"], event["of"], only=event["ids"]
        )

    counts = scheduler_slots.fire(config.table, slot, "big", invoke=invoke)
    # THEN a worker per share, each handed every `shares`-th id by publish time (spread over
    # the second); each message fired once
    assert sorted(workers) == list(range(shares))
    assert [workers[k] for k in range(shares)] == [ids[k::shares] for k in range(shares)]
    assert counts["DONE"] == 12
    assert sorted(i for i, _ in sent) == sorted(ids)


def test_workers_are_invoked_their_lead_before_the_second_not_at_the_slots_wake(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = {"now": 1_000.0}
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock["now"] += seconds

    monkeypatch.setattr(scheduler_slots.time, "time", lambda: clock["now"])
    monkeypatch.setattr(scheduler_slots.time, "sleep", sleep)
    invoked_at: list[float] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        invoked_at.append(clock["now"])
        return {"DONE": len(event["ids"])}

    # GIVEN a slot woken LEAD_SECONDS ahead, its 150 ids read
    slot = 1_000 + scheduler_slots.LEAD_SECONDS
    ids = [f"m{i}" for i in range(150)]
    counts, _, failures = scheduler_slots._fan_out(slot, "x#0#r", ids, invoke, False, 1e9)
    # THEN its two workers are invoked WORKER_LEAD_SECONDS before the second
    assert invoked_at == [slot - scheduler_slots.WORKER_LEAD_SECONDS] * 2
    assert counts["DONE"] == 150 and failures == []
    # AND a slot already past that (a cold one, or a retry) invokes them at once
    invoked_at.clear()
    scheduler_slots._fan_out(slot, "x#1#r", ids, invoke, True, 1e9)
    assert invoked_at == [clock["now"]] * 2 and slept[-1] == 0
    # AND a slot whose claims a new table writes in longer than the lead (4,000 a second)
    # invokes them at its wake
    invoked_at.clear()
    clock["now"] = 2_000.0
    slot = 2_000 + scheduler_slots.LEAD_SECONDS
    scheduler_slots._fan_out(slot, "y#0#r", [f"m{i}" for i in range(6_000)], invoke, False, 1e9)
    assert invoked_at == [slot - 6_000 / 4_000] * 60
    invoked_at.clear()
    clock["now"] = 3_000.0
    slot = 3_000 + scheduler_slots.LEAD_SECONDS
    scheduler_slots._fan_out(slot, "z#0#r", [f"m{i}" for i in range(10_000)], invoke, False, 1e9)
    assert invoked_at == [3_000.0] * scheduler_slots.MAX_WORKERS


def test_a_fanned_out_slot_reads_again_and_fires_what_the_index_missed_itself(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a slot fanned out to workers, and a message the first read missed (the index
    # lagging behind the table)
    monkeypatch.setattr(scheduler_slots, "CHUNK", 2)
    monkeypatch.setattr(scheduler_slots, "WORKER_SHARE", 2)
    slot, ids = due_slot(config, [0.1, 0.2, 0.3, 0.4])
    reads = {"n": 0}
    members = scheduler_slots.members

    def lagging(*args: Any) -> list[str]:
        reads["n"] += 1
        found = members(*args)
        return [i for i in found if i != ids[3]] if reads["n"] == 1 else found

    monkeypatch.setattr(scheduler_slots, "members", lagging)
    handed: list[str] = []

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        handed.extend(event["ids"])
        return scheduler_slots.fire(config.table, slot, event["claimant"], only=event["ids"])

    counts = scheduler_slots.fire(config.table, slot, "big", invoke=invoke)
    # THEN the workers fire what it read, the slot what its second read found: each once,
    # and the second read leaves the workers' own alone (claimed by them, not skipped here)
    assert sorted(handed) == sorted(ids[:3])
    assert sorted(i for i, _ in sent) == sorted(ids)
    assert counts["DONE"] == 4 and counts["skipped"] == 0


def test_a_status_that_cannot_be_written_fails_the_slot_after_every_delivery(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scheduler_slots, "record", lambda *a: "UNRECORDED")
    slot, _ = due_slot(config, [0.0, 0.1])

    monkeypatch.setenv("TABLE", config.table)
    monkeypatch.setenv("WORKERS_FUNCTION", "arn:aws:lambda:us-east-1:1:function:workers")
    from exactly_once.handlers import settings  # read once per cold start: start cold

    settings._CURRENT.pop(scheduler_slots.SlotSettings, None)
    with pytest.raises(scheduler_slots.StatusNotRecorded, match="2 delivered"):
        scheduler_slots.handler({"slot": slot, "execution": "x"}, None)
    settings._CURRENT.pop(scheduler_slots.SlotSettings, None)
    assert len(sent) == 2  # both delivered before the slot failed


@pytest.mark.parametrize(
    ("kind", "arn"),
    [
        ("sqs", "arn:aws:sqs:us-east-1:123456789012:plain"),
        ("sqs-fifo", "arn:aws:sqs:us-east-1:123456789012:ordered.fifo"),
        ("sns", "arn:aws:sns:us-east-1:123456789012:topic"),
        ("states", "STATE_MACHINE"),
        ("events", "arn:aws:events:us-east-1:123456789012:event-bus/default"),
    ],
)
def test_each_kind_of_target_is_sent_as_the_waiting_machine_sends_it(
    moto: None, kind: str, arn: str
) -> None:
    delivery = {"id": "0f5c8a3e-0000-4000-8000-000000000001", "channel": "c", "parameters": {}}
    if kind.startswith("sqs"):
        name = arn.rsplit(":", 1)[1]
        attributes = {"FifoQueue": "true"} if name.endswith(".fifo") else {}
        url = runtime.client("sqs").create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    elif kind == "sns":
        runtime.client("sns").create_topic(Name="topic")
    elif kind == "states":
        arn = make_state_machine(WAIT_DEFINITION, "delivered")
    scheduler_slots.send(arn, delivery)
    scheduler_slots.send(
        arn, delivery
    )  # a retry after a lost answer: dropped where the service can
    if kind.startswith("sqs"):
        got = runtime.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10)
        bodies = [json.loads(m["Body"]) for m in got.get("Messages", [])]
        assert bodies[0] == delivery
        assert len(bodies) == (1 if kind == "sqs-fifo" else 2)
    elif kind == "states":
        assert names(arn) == [delivery["id"]]


def test_a_lambda_target_that_fails_is_a_target_failure_with_its_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Payload:
        def read(self) -> bytes:
            return b'{"errorType": "ValueError", "errorMessage": "injected failure"}'

    class Lambda:
        def invoke(self, **kwargs: Any) -> dict[str, Any]:
            assert kwargs["FunctionName"] == TARGET
            assert json.loads(kwargs["Payload"])["id"] == "m"
            return {"FunctionError": "Unhandled", "Payload": Payload()}

    monkeypatch.setattr(scheduler_slots, "_client", lambda service: Lambda())
    with pytest.raises(TargetFailed) as failed:
        scheduler_slots.send(TARGET, {"id": "m"})
    assert failed.value.error == "ValueError" and "injected failure" in failed.value.cause


def test_the_status_index_spreads_messages_over_lanes_and_forgets_ended_ones(
    config: SchedulerSettings,
) -> None:
    from exactly_once.handlers import scheduler_index

    # GIVEN 200 messages registered for the same instant, one of them cancelled
    publish = time.time() + 30
    # (by their Idempotency-Keys: the same ids every run, not uuids' luck)
    ids = [register(config, publish, f"spread-{i}")["id"] for i in range(200)]
    scheduler.cancel(config, ids[0])
    items = [scheduler.read_item(config, i) for i in ids]
    # THEN they spread over every lane of STANDBY (no partition holds more than ~2x its share)
    standby = [i for i in items[1:] if i is not None]
    per_lane = {lane: 0 for lane in scheduler_index.lanes("STANDBY")}
    for item in standby:
        per_lane[item["lane"]["S"]] += 1
    assert min(per_lane.values()) >= 1 and max(per_lane.values()) <= 2 * 200 / scheduler_index.LANES
    # AND the cancelled one left the index (nothing reads ended messages by status)
    assert items[0] is not None and "lane" not in items[0]
    # AND the sweep and a slot read every lane
    slot = math.floor(publish)
    assert sorted(scheduler_slots.members(config.table, slot, ("STANDBY",))) == sorted(ids[1:])


def test_the_cost_model_counts_what_a_slot_does(
    config: SchedulerSettings, sent: list[tuple[str, float]], capsys: pytest.CaptureFixture[str]
) -> None:
    """benchmarks/scheduler_model.py prices these counts: here they are counted."""
    from benchmarks import scheduler_model
    from exactly_once.handlers import scheduler_index

    slot, ids = due_slot(config, [0.1, 0.4, 0.7])
    calls: list[str] = []
    ddb = scheduler_slots._client("dynamodb")
    ddb.meta.events.register("before-call.*.*", lambda model, **_: calls.append(model.name))
    capsys.readouterr()
    scheduler_slots.fire(config.table, slot, "execution-1")
    # the log lines it writes (CloudWatch Logs bills ingestion by the byte): its share of
    # what the model prices per message for every function's lines
    logged = len(capsys.readouterr().out.encode())
    # (measured under a Lambda context, whose fields every line carries: more than here)
    slot_lines = scheduler_model.MEASURED["log_bytes"]["slot"]
    assert 0 < logged <= slot_lines["per_invocation"] + len(ids) * slot_lines["per_message"]
    # two writes per message (the claim, the final status), one Query per lane, twice
    assert calls.count("UpdateItem") == 2 * len(ids)
    assert calls.count("Query") * 0.5 == scheduler_model.SLOT.read_units_per_execution
    assert calls.count("Query") == 2 * scheduler_index.LANES
    assert len(calls) == calls.count("UpdateItem") + calls.count("Query")
    # the claim leaves a message in its lane (the index unwritten: the table's unit alone),
    # the final write removes it from the index (the table's unit and the index's delete)
    done = scheduler.read_item(config, ids[0])
    assert done is not None and done["status"]["S"] == "DONE" and "lane" not in done
    _, [waiting] = due_slot(config, [0.0])
    lane = scheduler.read_item(config, waiting)["lane"]  # type: ignore[index]
    claimed = scheduler_slots.claim(config.table, waiting, "execution-2", time.time() + 60)
    assert claimed.item is not None and claimed.item["status"]["S"] == "FIRING"
    assert claimed.item["lane"] == lane
    assert scheduler_model.SLOT.write_units_per_message == 1 + 2
    # two transitions a slot: its machine's states, one after the other
    states = slot_definition("arn:aws:lambda:us-east-1:1:function:slots")["States"]
    assert len(states) == scheduler_model.SLOT.transitions_per_execution
    assert len(sent) == len(ids)


def test_scheduler_lanes_gives_pending_messages_of_an_older_deployment_their_lane(
    config: SchedulerSettings, capsys: pytest.CaptureFixture[str]
) -> None:
    from exactly_once.ops.__main__ import main

    # GIVEN messages written before the index had lanes: pending ones and an ended one
    publish = time.time() + 30
    ids = [register(config, publish)["id"] for _ in range(3)]
    ended = register(config, publish)["id"]
    scheduler.cancel(config, ended)
    ddb = runtime.client("dynamodb")
    for message_id in ids:
        ddb.update_item(
            TableName=config.table,
            Key=scheduler.message_key(message_id),
            UpdateExpression="REMOVE lane",
        )
    assert scheduler_slots.members(config.table, math.floor(publish), ("STANDBY",)) == []
    # WHEN the operator runs the command (twice: it is safe to run again)
    capsys.readouterr()  # (the registrations' log lines)
    assert main(["scheduler-lanes", "--table", config.table, "--yes"]) == 0
    assert json.loads(capsys.readouterr().out) == {"laned": 3, "ended": 1, "moved_on": 0}
    assert main(["scheduler-lanes", "--table", config.table]) == 0
    assert json.loads(capsys.readouterr().out) == {"laned": 0, "ended": 1, "moved_on": 0}
    # THEN the slot (and the sweep) find them; the ended one stays out of the index
    found = scheduler_slots.members(config.table, math.floor(publish), ("STANDBY",))
    assert sorted(found) == sorted(ids)
    assert "lane" not in (scheduler.read_item(config, ended) or {})


def test_the_sweep_restarts_the_slot_of_a_claim_whose_claimant_died(
    config: SchedulerSettings,
) -> None:
    # GIVEN a slot clock, and a message its Fire claimed (lease until `lease`) and never
    # recorded: every attempt of the slot failed, and the claimant is dead
    slots = dataclasses.replace(config, join_slots=True)
    slot, [message_id] = due_slot(slots, [0.0])
    lease = time.time() + 5
    assert scheduler_slots.claim(slots.table, message_id, "slot-x#2", lease).item is not None
    sfn = runtime.client("stepfunctions")
    # WHEN the sweep runs while the lease holds, then after it ended
    assert scheduler_sweep.sweep(slots, now=lease - 1)["restarted"] == 0
    swept = lease + scheduler_sweep.OVERDUE_SECONDS + 1
    result = scheduler_sweep.sweep(slots, now=swept)
    # THEN it restarted the slot once, as a restart (which takes up ended claims), and
    # counted the message overdue; the same sweep run again starts nothing more
    assert result["restarted"] == 1 and result["overdue"] == 1
    listed = sfn.list_executions(stateMachineArn=slots.state_machine_arn)["executions"]
    [execution] = [e for e in listed if e["name"].startswith(scheduler_slots.SLOT_PREFIX)]
    assert execution["name"] == scheduler_slots.restart_name(slot, swept)
    assert scheduler_slots.is_restart(execution["executionArn"])
    described = sfn.describe_execution(executionArn=execution["executionArn"])
    assert scheduler_slots.slot_input(slot).items() <= json.loads(described["input"]).items()
    assert scheduler_sweep.sweep(slots, now=swept)["restarted"] == 0
    # AND the next period's sweep, finding it still FIRING (a restart that missed it),
    # starts another
    assert scheduler_sweep.sweep(slots, now=swept + 3600)["restarted"] == 1


def status_of(config: SchedulerSettings, message_id: str) -> dict[str, Any]:
    return scheduler.read_item(config, message_id) or {}


def test_a_lease_is_taken_over_only_once_it_ended_by_more_than_the_clocks_skew(
    config: SchedulerSettings,
) -> None:
    # GIVEN a claim whose lease ended a moment ago (by this host's clock: the claimant's
    # may run a little behind, its write still in flight)
    _, [message_id] = due_slot(config, [0.0])
    first, retry = (scheduler_slots.claimant("execution-1", n, "r") for n in (0, 1))
    just_ended = time.time() - 1
    assert scheduler_slots.claim(config.table, message_id, first, just_ended).item is not None
    # THEN it is not taken over yet; once it ended past the skew, it is
    assert scheduler_slots.claim(config.table, message_id, retry, time.time() + 900).item is None
    long_ended = time.time() - scheduler_slots.LEASE_SKEW_SECONDS - 1
    scheduler_slots.claim(config.table, message_id, first, long_ended)
    taken = scheduler_slots.claim(config.table, message_id, retry, time.time() + 900)
    assert taken.item is not None and taken.item["claimed_by"]["S"] == retry


def test_a_claim_resent_after_its_answer_was_lost_finds_its_own_and_another_claimant_is_held(
    config: SchedulerSettings,
) -> None:
    # GIVEN a claim that landed, its answer lost (the SDK resends it, or the claimant
    # calls again)
    _, [message_id] = due_slot(config, [0.0])
    me, other = (scheduler_slots.claimant("execution-1", n, "r") for n in (0, 1))
    lease = time.time() + 900
    assert scheduler_slots.claim(config.table, message_id, me, lease).item is not None
    # THEN the resend finds its own claim and goes on (never strands the message FIRING)
    again = scheduler_slots.claim(config.table, message_id, me, lease)
    assert again.item is not None and again.item["claimed_by"]["S"] == me
    # AND another claimant's claim fails, held until the lease ends
    held = scheduler_slots.claim(config.table, message_id, other, lease)
    assert held.item is None and held.held_until == pytest.approx(lease, abs=0.001)


def test_a_claimant_that_outlived_its_lease_never_writes_over_the_claim_that_took_it(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a message claimed by a first attempt, then taken over by the retry once the
    # first's lease had ended (the first still running: its invocation overran)
    _, [message_id] = due_slot(config, [0.0])
    first, retry = (scheduler_slots.claimant("execution-1", n, "r") for n in (0, 1))
    scheduler_slots.claim(config.table, message_id, first, time.time() - 60)
    assert scheduler_slots.claim(config.table, message_id, retry, time.time() + 900).item
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: None)
    done, at = Status.DONE, "2026-01-01T00:00:00.000Z"
    # WHEN the first writes its final status: it is refused, the retry's claim stands
    outcome = scheduler_slots.record(config.table, message_id, first, done, at)
    assert outcome == "TAKEN_OVER"
    assert status_of(config, message_id)["status"]["S"] == "FIRING"
    # AND the retry's write lands; sent again (its answer lost), it is still recorded
    for _ in range(2):
        assert scheduler_slots.record(config.table, message_id, retry, done, at) == "DONE"
    item = status_of(config, message_id)
    assert item["status"]["S"] == "DONE" and item["claimed_by"]["S"] == retry
    # AND the first's outcome is counted as such by its clock (not DONE, not UNRECORDED)
    assert scheduler_slots.record(config.table, message_id, first, done, at) == "TAKEN_OVER"


def test_a_throttled_delivery_past_the_deadline_gives_its_message_back_unsent(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a slot's two messages; the target throttles every send (SNS's code) and the
    # invocation's deadline comes a few seconds after their time
    slot, ids = due_slot(config, [0.0, 0.1])
    attempts: list[str] = []

    def throttled(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        attempts.append(delivery["id"])
        raise ClientError({"Error": {"Code": "Throttled"}}, "Publish")

    real_sleep, deliveries = time.sleep, scheduler_slots.send
    monkeypatch.setattr(scheduler_slots, "send", throttled)
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: real_sleep(min(s, 0.05)))
    me = scheduler_slots.claimant("execution-1", 0, "r")
    counts = scheduler_slots.fire(config.table, slot, me, deadline=slot + 6, lease=slot + 600)
    # THEN neither was sent, nor marked FAILED: both went back to STANDBY, in their lane,
    # for the Fire's retry (or the sweep) to deliver
    assert counts == {"skipped": 0, "RELEASED": 2} and set(attempts) == set(ids)
    for message_id in ids:
        item = status_of(config, message_id)
        assert item["status"]["S"] == "STANDBY" and "claimed_by" not in item
    monkeypatch.setattr(scheduler_slots, "send", deliveries)
    monkeypatch.setattr(scheduler_slots.time, "sleep", real_sleep)
    retry = scheduler_slots.claimant("execution-1", 1, "s")
    assert scheduler_slots.fire(config.table, slot, retry, retried=True)["DONE"] == 2
    assert sorted(i for i, _ in sent) == sorted(ids)


def test_past_the_deadline_a_slot_claims_nothing_and_its_handler_fails_for_a_retry(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    slot, [message_id] = due_slot(config, [0.0])
    late = time.time() - 1
    counts = scheduler_slots.fire(config.table, slot, "x#0#r", deadline=late, lease=late + 60)
    assert counts == {"skipped": 0, "NOT_CLAIMED": 1} and sent == []
    assert status_of(config, message_id)["status"]["S"] == "STANDBY"
    # AND a handler whose messages were released or not claimed fails, for the retry
    monkeypatch.setenv("TABLE", config.table)
    monkeypatch.setenv("WORKERS_FUNCTION", "arn:aws:lambda:us-east-1:1:function:workers")
    from exactly_once.handlers import settings

    settings._CURRENT.pop(scheduler_slots.SlotSettings, None)
    monkeypatch.setattr(scheduler_slots, "fire", lambda *a: {"skipped": 0, "RELEASED": 1})
    with pytest.raises(scheduler_slots.ClaimsFailed, match="1 messages"):
        scheduler_slots.handler({"slot": slot, "execution": "x"}, None)
    settings._CURRENT.pop(scheduler_slots.SlotSettings, None)


def test_an_invocation_that_fails_between_claims_and_sends_gives_back_what_it_never_sent(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    slot, ids = due_slot(config, [0.0, 0.1, 0.2])
    real = scheduler_slots.fire_one

    def crashes_on_the_second(table: str, item: dict[str, Any], *args: Any) -> Any:
        if item["id"]["S"] == ids[1]:
            raise MemoryError("the invocation fails here")
        return real(table, item, *args)

    monkeypatch.setattr(scheduler_slots, "fire_one", crashes_on_the_second)
    with pytest.raises(MemoryError):
        scheduler_slots.fire(config.table, slot, "x#0#r")
    # THEN what it sent is DONE; what it claimed and never sent is STANDBY again
    assert status_of(config, ids[1])["status"]["S"] == "STANDBY"
    assert {status_of(config, i)["status"]["S"] for i in (ids[0], ids[2])} == {"DONE"}


def end_execution(
    arn: str, status: str, error: str | None = None, cause: str | None = None
) -> None:
    """Moto's execution ended as Step Functions ends one."""
    from moto.stepfunctions.parser.api import ExecutionStatus
    from moto.stepfunctions.parser.models import stepfunctions_parser_backends

    _, _, _, region, account, *_ = arn.split(":")
    execution = stepfunctions_parser_backends[account][region].describe_execution(arn)
    execution.exec_status, execution.error, execution.cause = ExecutionStatus(status), error, cause
    execution.stop_date = execution.start_date


def fail_execution(arn: str, error: str, cause: str) -> None:
    end_execution(arn, "FAILED", error, cause)


def test_the_sweep_never_restarts_what_a_claimant_delivered_and_could_not_record(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a slot execution whose Fire delivered a message and could not write its status
    # (it failed StatusNotRecorded, naming its claimant), and a message an earlier attempt
    # of it claimed and died with, undelivered
    slots = dataclasses.replace(config, join_slots=True)
    slot, [delivered, undelivered] = due_slot(slots, [0.0, 0.5])
    sfn = runtime.client("stepfunctions")
    arn = sfn.start_execution(
        stateMachineArn=slots.state_machine_arn,
        name=scheduler_slots.slot_name(slot),
        input=json.dumps(scheduler_slots.slot_input(slot)),
    )["executionArn"]
    dead, last = (scheduler_slots.claimant(arn, n, f"request-{n}") for n in (0, 1))
    lease = time.time() + 5
    scheduler_slots.claim(slots.table, delivered, last, lease)
    error = {
        "errorType": "StatusNotRecorded",
        "errorMessage": f"1 delivered messages are still FIRING, claimed by {last}",
    }
    swept = lease + scheduler_sweep.OVERDUE_SECONDS + 10
    # (while the execution still runs, its Fire's retry is the one to take claims up)
    assert scheduler_sweep.sweep(slots, now=swept)["restarted"] == 0
    swept += 60
    fail_execution(arn, "StatusNotRecorded", json.dumps(error))
    # WHEN the sweep finds the delivered one FIRING past its lease
    # THEN it is overdue (for the alarm), marked, and its slot is not restarted for it:
    # the one execution started is the next attempt for the other, still STANDBY
    # (`retry_key`), which may not take the delivered one over
    result = scheduler_sweep.sweep(slots, now=swept)
    assert result["restarted"] == 1 and result["overdue"] >= 1
    retry = scheduler_slots.retry_key(slot)
    assert names(slots.state_machine_arn, "slot-") == [scheduler_slots.slot_name(slot), retry]
    assert status_of(slots, delivered)["unrecorded"] == {"BOOL": True}
    # AND a message an earlier attempt of that execution claimed, and died with, is
    # taken up by a restart
    scheduler_slots.claim(slots.table, undelivered, dead, lease)
    result = scheduler_sweep.sweep(slots, now=swept + 60)
    assert result["restarted"] == 1
    restart = scheduler_slots.restart_name(slot, swept + 60)
    slot_executions = names(slots.state_machine_arn, "slot-")
    assert slot_executions == sorted([scheduler_slots.slot_name(slot), retry, restart])
    # AND the delivered one is marked: no claim takes it over, that restart's included
    assert status_of(slots, delivered)["unrecorded"] == {"BOOL": True}
    real = time.time
    monkeypatch.setattr(scheduler_slots.time, "time", lambda: real() + 60)
    again = scheduler_slots.claim(slots.table, delivered, f"{arn}#0#restart", real() + 900)
    assert again.item is None
    taken = scheduler_slots.claim(slots.table, undelivered, f"{arn}#0#restart", real() + 900)
    assert taken.item is not None


def test_a_failed_worker_never_hides_another_workers_unrecorded_deliveries(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a slot fanned out to three workers: one fails, one delivered and could not
    # write the status (UNRECORDED)
    monkeypatch.setattr(scheduler_slots, "CHUNK", 2)
    monkeypatch.setattr(scheduler_slots, "WORKER_SHARE", 1)
    slot, _ = due_slot(config, [0.1, 0.2, 0.3])

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        if event["shard"] == 0:
            raise RuntimeError("slot worker 0/3 failed")
        if event["shard"] == 1:
            return {"UNRECORDED": 1, "unrecorded_by": ["x#0#r#worker-1"]}
        return {"DONE": 1}

    # THEN the slot fails StatusNotRecorded (never retried), not the worker's error, and
    # names the worker whose deliveries happened (the sweep leaves its claims be)
    with pytest.raises(scheduler_slots.StatusNotRecorded, match=r"1 delivered.* x#0#r#worker-1$"):
        scheduler_slots.fire(config.table, slot, "x#0#r", invoke=invoke)

    # AND with nothing unrecorded, the worker's own error (retried by the Fire)
    def fails(event: dict[str, Any]) -> dict[str, Any]:
        if event["shard"] == 0:
            raise RuntimeError("slot worker 0/3 failed")
        return {"DONE": 1}

    with pytest.raises(RuntimeError, match="worker 0/3"):
        scheduler_slots.fire(config.table, slot, "x#0#s", invoke=fails)


def test_a_final_write_still_failing_near_the_invocations_end_is_unrecorded_in_time(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a table refusing every write (not a condition: an outage)
    def refuses(**kwargs: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalServerError"}}, "UpdateItem")

    ddb = runtime.client("dynamodb")
    monkeypatch.setattr(scheduler_slots, "_client", lambda service: ddb)
    monkeypatch.setattr(ddb, "update_item", refuses)
    clock = {"now": time.time()}
    stop_by = clock["now"] + 3
    monkeypatch.setattr(scheduler_slots.time, "time", lambda: clock["now"])
    monkeypatch.setattr(scheduler_slots.time, "sleep", lambda s: clock.update(now=clock["now"] + s))
    # WHEN the write must stop within 3 s (the invocation ends soon after)
    outcome = scheduler_slots.record(
        config.table, "m", "x#0#r", Status.DONE, "2026-01-01T00:00:00.000Z", stop_by=stop_by
    )
    # THEN it says UNRECORDED (StatusNotRecorded), having waited no later than that
    assert outcome == "UNRECORDED" and clock["now"] < stop_by


def test_a_throttled_event_bus_entry_is_retried_as_a_throttle_not_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # PutEvents answers 200 with the entry refused (FailedEntryCount): a throttled entry
    # never ran, so it is retried, never written FAILED after three tries
    answers = [
        {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "ThrottlingException"}]},
    ] * 5 + [{"FailedEntryCount": 0, "Entries": [{"EventId": "e"}]}]

    class Events:
        def put_events(self, **kwargs: Any) -> dict[str, Any]:
            return answers.pop(0)

    monkeypatch.setattr(scheduler_slots, "_client", lambda service: Events())
    bus = "arn:aws:events:us-east-1:123456789012:event-bus/default"
    scheduler_slots.deliver(bus, {"id": "m"}, sleep=lambda s: None)
    assert answers == []
    answers.append({"FailedEntryCount": 1, "Entries": [{"ErrorCode": "AccessDenied"}]})
    answers.extend(answers * 3)
    with pytest.raises(TargetFailed, match="AccessDenied"):
        scheduler_slots.deliver(bus, {"id": "m"}, sleep=lambda s: None)


def test_overdue_standby_messages_get_one_next_attempt_of_their_slot_then_a_restart(
    config: SchedulerSettings,
) -> None:
    # GIVEN messages of one second whose own executions ended SUCCEEDED without firing
    # them (their Claims lost to the slot), and that the slot then gave back unsent
    # (STANDBY again: a target that throttled them past its deadline), the slot's retries
    # spent
    slots = dataclasses.replace(config, join_slots=True)
    slot, ids = due_slot(slots, [0.0, 0.1, 0.2])  # (too late for its slot: their own)
    for message_id in ids:
        end_execution(executions.execution_arn(slots.state_machine_arn, message_id), "SUCCEEDED")
    # WHEN the sweep finds two of them overdue, then all three, twice
    early = scheduler_sweep.sweep(slots, now=slot + scheduler_sweep.OVERDUE_SECONDS + 0.15)
    swept = slot + scheduler_sweep.OVERDUE_SECONDS + 10
    result = scheduler_sweep.sweep(slots, now=swept)
    again = scheduler_sweep.sweep(slots, now=swept + 1)
    # THEN their slot gets one next attempt, a restart (which takes up its second's every
    # message), not an execution each; the later sweeps find it running
    assert (early["restarted"], early["overdue"]) == (1, 2)
    assert (result["restarted"], result["overdue"], again["restarted"]) == (0, 3, 0)
    retry = scheduler_slots.retry_key(slot)
    assert names(slots.state_machine_arn, "slot-") == [retry]
    assert scheduler_slots.is_restart(retry)
    # AND once that attempt ended without firing them, a restart of the slot fires them
    end_execution(executions.execution_arn(slots.state_machine_arn, retry), "SUCCEEDED")
    assert scheduler_sweep.sweep(slots, now=swept + 60)["restarted"] == 1
    restart = scheduler_slots.restart_name(slot, swept + 60)
    assert names(slots.state_machine_arn, "slot-") == sorted([retry, restart])
    # AND while the slot's own execution runs, its Fire's retry is left to take them up
    for name in (retry, restart):
        end_execution(executions.execution_arn(slots.state_machine_arn, name), "FAILED")
    runtime.client("stepfunctions").start_execution(
        stateMachineArn=slots.state_machine_arn,
        name=scheduler_slots.slot_name(slot),
        input=json.dumps(scheduler_slots.slot_input(slot)),
    )
    assert scheduler_sweep.sweep(slots, now=swept + 120)["restarted"] == 0


def test_docs_cost_scheduler_tables_are_the_models() -> None:
    """docs/cost.md's "The scheduler by density", "The scheduler all in" and "The
    scheduler in a burst" rows are what benchmarks/scheduler_model.py computes from the
    measured inputs, and the goals hold: at most $12 per million all in at 10 a second, $5
    at 100; a burst of 10,000 due in one second, warmed ahead, p99 under a second on a
    table warm for it (one that served it, or a new one pre-warmed: table_warm_writes)."""
    from pathlib import Path

    from benchmarks import scheduler_model as model

    text = (Path(__file__).resolve().parents[2] / "docs" / "cost.md").read_text()
    rows = model.density_rows() + model.all_in_rows() + model.burst_rows()
    for row in rows + model.memory_rows():
        assert row in text, row
    assert model.all_in(10.0)["total"] <= 12
    assert model.all_in(100.0)["total"] <= 5
    burst = model.burst_table()
    warm_table = next(iter(model.TABLES))  # (served the rate before, or table_warm_writes)
    assert burst["slot clock", model.WARMED, warm_table]["p99"] < 1
    said = f"It costs ${model.warm_up_dollars(1000):.4f} a dense second of\n1,000 messages"
    assert said in text


def test_the_cost_model_counts_the_alarms_the_scheduler_declares() -> None:
    from benchmarks import scheduler_model
    from tests.unit.pulumi_harness import component, run

    mocks = run(lambda: component("scheduler"))
    alarms = mocks.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
    assert len(alarms) == scheduler_model.SCHEDULER_ALARMS, sorted(a.name for a in alarms)


def test_docs_cost_sweep_rows_are_the_models() -> None:
    """docs/cost.md's "The scheduler's sweep" rows are benchmarks/scheduler_model.py's."""
    from pathlib import Path

    from benchmarks import scheduler_model

    text = (Path(__file__).resolve().parents[2] / "docs" / "cost.md").read_text()
    for period in scheduler_model.SWEEP_PERIODS:
        month = scheduler_model.sweep_month(period)
        assert f"| {period} | {month['runs']:,.0f} | {month['dollars']:.3f} |" in text
    for period, window in scheduler_model.SWEEP_SETTINGS:
        found = scheduler_model.sweep_per_message(period, window)
        assert f"| {period} | {window} | {found:.2f} |" in text
    moves = scheduler_model.sweep_moves_a_run()
    assert f"about {round(moves, -5):,.0f} a run" in text


def test_the_sweeps_firing_pass_counts_a_stranded_claim_and_one_failing_read_stops_no_other(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN two claimed messages: one held by a lease an hour long (its claimant died early:
    # nothing takes it over while the lease holds), one whose claimant's lease has ended
    slots = dataclasses.replace(config, join_slots=True)
    slot, [held, dead] = due_slot(slots, [0.0, 0.1])
    now = time.time()
    assert scheduler_slots.claim(slots.table, held, "slot-a#0", now + 3600).item
    assert scheduler_slots.claim(slots.table, dead, "slot-b#0", now + 1).item
    swept = now + scheduler_sweep.STUCK_FIRING_SECONDS + 5
    # WHEN a sweep's read of the first fails (throttled past the SDK's retries)
    real = scheduler_sweep.read_item

    def throttled(config: SchedulerSettings, message_id: str) -> Any:
        if message_id == held:
            raise ClientError({"Error": {"Code": "ThrottlingException"}}, "GetItem")
        return real(config, message_id)

    monkeypatch.setattr(scheduler_sweep, "read_item", throttled)
    capsys.readouterr()
    with pytest.raises(scheduler_sweep.Unfinished):
        scheduler_sweep.sweep(slots, now=swept)
    # THEN the other is still counted (the Overdue datum is written) and nothing restarts
    # while a message is unread (it may be one delivered and not yet marked)
    assert '"Overdue":1' in capsys.readouterr().out
    assert names(slots.state_machine_arn, scheduler_slots.SLOT_PREFIX) == []
    # AND the next run counts both overdue (the live lease too: 20 minutes past its time)
    # and restarts the dead claim's slot
    monkeypatch.setattr(scheduler_sweep, "read_item", real)
    result = scheduler_sweep.sweep(slots, now=swept)
    assert (result["overdue"], result["restarted"]) == (2, 1)
    assert slot == scheduler_slots.slot_of(float(status_of(slots, dead)["publish_at"]["N"]))


def test_a_failure_beside_a_delivered_unrecorded_message_still_fails_status_not_recorded(
    config: SchedulerSettings, sent: list[tuple[str, float]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a slot of two: the first delivered, its final status never written; the
    # second's handling failing (a bug, a memory error)
    slot, ids = due_slot(config, [0.0, 0.1])
    real = scheduler_slots.fire_one
    monkeypatch.setattr(scheduler_slots, "record", lambda *a, **k: "UNRECORDED")

    def second_fails(table: str, item: dict[str, Any], *args: Any) -> Any:
        if item["id"]["S"] == ids[1]:
            raise MemoryError("the second's handling fails")
        return real(table, item, *args)

    monkeypatch.setattr(scheduler_slots, "fire_one", second_fails)
    # THEN the slot fails StatusNotRecorded naming its claimant (never retried, and the
    # sweep leaves the delivered one be), not the plain failure a retry would follow
    with pytest.raises(scheduler_slots.StatusNotRecorded, match="claimed by e#0"):
        scheduler_slots.fire(config.table, slot, "e#0")
    assert [i for i, _ in sent] == [ids[0]]


def test_the_store_is_the_only_module_that_writes_the_messages_table() -> None:
    # (one place for the record's transitions and the rule that the lane follows the status)
    writes = re.compile(
        r"\.(put_item|update_item|delete_item|transact_write_items|batch_write_item)\("
    )
    root = Path(__file__).resolve().parents[2]
    writers = [
        path.relative_to(root).as_posix()
        for path in [*root.glob("handlers/scheduler*.py"), *root.glob("ops/scheduler*.py")]
        if writes.search(path.read_text())
    ]
    assert writers == ["handlers/scheduler_store.py"]


def test_an_ended_message_expires_its_retention_past_its_end_and_0_keeps_it(
    config: SchedulerSettings, sent: list[tuple[str, float]]
) -> None:
    from exactly_once.handlers import scheduler_store

    day = 86400
    # GIVEN messages registered under a week's retention (the default), and one under 0
    slot, [fired] = due_slot(config, [0.0])
    waiting, _ = scheduler.register(config, {"publishTime": time.time() + 3600, "channel": "demo"})
    kept = dataclasses.replace(config, retention_days=0)
    forever, _ = scheduler.register(kept, {"publishTime": time.time() + 3600, "channel": "demo"})
    # WHEN one fires and the others are cancelled
    assert scheduler_slots.fire(config.table, slot, "execution-1") == {"skipped": 0, "DONE": 1}
    scheduler.cancel(config, waiting["id"])
    scheduler.cancel(kept, forever["id"])
    # THEN each ended record carries its expiry (the table's TTL attribute), a week past
    # its end or its time, whichever is later (a replay of its registration after that
    # finds the time long past: refused); the one registered and cancelled under 0 none
    for message_id, base in ((fired, time.time()), (waiting["id"], waiting["publishTime"])):
        item = scheduler.read_item(config, message_id)
        assert item is not None and item["status"]["S"] in ("DONE", "CANCELLED")
        expires = float(item[scheduler_store.TTL_ATTRIBUTE]["N"])
        assert base + 7 * day - 60 < expires <= base + 7 * day + 1
    item = scheduler.read_item(config, forever["id"])
    assert item is not None and scheduler_store.TTL_ATTRIBUTE not in item
    assert scheduler_store.KEEP_FOR not in item


def test_a_slot_emits_its_messages_metrics_in_one_line_not_one_per_message(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a second's messages: two the target takes (one registered late, within the
    # tolerance) and one it refuses for good
    slot, ids = due_slot(config, [0.1, 0.4, 0.7])
    table = runtime.client("dynamodb")
    table.update_item(
        TableName=config.table,
        Key=scheduler.message_key(ids[1]),
        UpdateExpression="SET late_on_arrival = :late",
        ExpressionAttributeValues={":late": {"N": "3"}},
    )
    delivered: list[float] = []

    def send(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        if delivery["id"] == ids[2]:
            raise TargetFailed("Refused", "no such address")
        delivered.append(time.time())

    monkeypatch.setattr(scheduler_slots, "send", send)
    monkeypatch.delenv("METRICS_DISABLED", raising=False)
    capsys.readouterr()
    # WHEN its slot fires
    assert scheduler_slots.fire(config.table, slot, "execution-1") == {
        "skipped": 0,
        "DONE": 2,
        "FAILED": 1,
    }
    # THEN one EMF line says so: Fired, Late, Failed, and a lateness per message fired
    # (when it was delivered, minus its time: never negative)
    lines = [json.loads(out) for out in capsys.readouterr().out.splitlines() if "_aws" in out]
    [line] = lines
    assert (line["Fired"], line["Late"], line["Failed"], line["slot"]) == (2, 1, 1, slot)
    assert len(line["LatenessMs"]) == 2 and all(0 <= ms < 5000 for ms in line["LatenessMs"])
    names = {m["Name"] for m in line["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert names == {"Fired", "Late", "Failed", "LatenessMs"}


def test_a_large_slots_latenesses_take_a_line_per_hundred(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:

    monkeypatch.delenv("METRICS_DISABLED", raising=False)
    capsys.readouterr()
    counts = collections.Counter({"DONE": 250})
    scheduler_slots.emit_metrics(7, counts, [float(i) for i in range(250)], 0)
    lines = [json.loads(out) for out in capsys.readouterr().out.splitlines()]
    # EMF takes at most 100 values of a metric a line: 100, 100, 50, every one kept
    assert [len(line["LatenessMs"]) for line in lines] == [100, 100, 50]
    assert [ms for line in lines for ms in line["LatenessMs"]] == list(range(250))
    assert [line.get("Fired") for line in lines] == [250, None, None]


def test_a_slot_that_fails_after_its_deliveries_still_emits_what_it_ended(
    config: SchedulerSettings,
    sent: list[tuple[str, float]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # GIVEN a slot of two messages, the second's firing failing unexpectedly
    slot, ids = due_slot(config, [0.1, 0.5])
    fire_one = scheduler_slots.fire_one

    def second_fails(table: str, item: dict[str, Any], *args: Any) -> Any:
        if item["id"]["S"] == ids[1]:
            raise RuntimeError("boom")
        return fire_one(table, item, *args)

    monkeypatch.setattr(scheduler_slots, "fire_one", second_fails)
    monkeypatch.delenv("METRICS_DISABLED", raising=False)
    capsys.readouterr()
    # WHEN it fires, and fails
    with pytest.raises(RuntimeError, match="boom"):
        scheduler_slots.fire(config.table, slot, "execution-1")
    # THEN the one it ended is counted all the same (a retry never ends it again)
    [line] = [json.loads(out) for out in capsys.readouterr().out.splitlines() if "_aws" in out]
    assert line["Fired"] == 1 and len(line["LatenessMs"]) == 1


def test_a_dense_second_is_warmed_ahead_once_and_a_sparse_one_never(
    slotted: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = dataclasses.replace(slotted, warm_ahead_from=100)
    # GIVEN 120 messages due in one second, 30 in the next (by their Idempotency-Keys: the
    # same lanes every run)
    dense = math.floor(time.time()) + 30
    sparse = dense + 1
    ids = [register(config, dense + i / 200, f"dense-{i}")["id"] for i in range(120)]
    ids += [register(config, sparse + i / 100, f"sparse-{i}")["id"] for i in range(30)]
    # WHEN the stream starter starts them, 25 a batch
    records = [{"dynamodb": {"NewImage": scheduler.read_item(config, i)}} for i in ids]
    for at in range(0, len(records), 25):
        scheduler.start_records(config, {"Records": records[at : at + 25]}, None)
    # THEN the dense second's warm-up execution is started, once, woken WARM_LEAD_SECONDS
    # ahead; the sparse second has none
    assert names(config.state_machine_arn, "slot-") == sorted(
        [f"slot-{dense}", f"slot-{dense}-warm", f"slot-{sparse}"]
    )
    sfn = runtime.client("stepfunctions")
    warm = sfn.describe_execution(
        executionArn=f"{config.state_machine_arn.replace(':stateMachine:', ':execution:')}"
        f":slot-{dense}-warm"
    )
    given = json.loads(warm["input"])
    assert given["warm"] is True and given["slot"] == dense
    assert timestamps.epoch(given["wakeAt"]) == dense - scheduler_slots.WARM_LEAD_SECONDS
    # AND with warm_ahead_from 0, nothing is ever warmed
    scheduler.forget_sandbox()
    never = dataclasses.replace(config, warm_ahead_from=0)
    later = dense + 5
    more = [register(never, later + i / 200, f"later-{i}")["id"] for i in range(120)]
    records = [{"dynamodb": {"NewImage": scheduler.read_item(never, i)}} for i in more]
    scheduler.start_records(never, {"Records": records}, None)
    assert f"slot-{later}-warm" not in names(config.state_machine_arn, "slot-")


def test_a_warm_up_pings_the_workers_its_slot_will_fan_out_to_and_claims_nothing(
    config: SchedulerSettings, sent: list[tuple[str, float]]
) -> None:
    # GIVEN a second of 120 messages (past CHUNK: two workers of WORKER_SHARE)
    slot = math.floor(time.time()) + 30
    ids = [register(config, slot + i / 200, f"warm-{i}")["id"] for i in range(120)]
    pings: list[dict[str, Any]] = []
    lock = threading.Lock()

    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        with lock:
            pings.append(event)
        return {"pinged": 1}

    # WHEN its warm-up runs
    assert scheduler_slots.warm_up(config.table, slot, invoke) == {"warmed": 2}
    # THEN each worker the slot will fan out to is pinged, side by side; nothing is claimed
    # or sent
    assert pings == [{"ping": True}] * 2
    assert sent == []
    assert {scheduler.get(config, i)["status"] for i in ids} == {"STANDBY"}  # type: ignore[index]

    # AND a warm-up that fails is logged, never raised: the slot fires all the same
    def fails(event: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("throttled")

    assert scheduler_slots.warm_up(config.table, slot, fails) == {"warmed": 0}


def test_a_ping_holds_its_environment_and_claims_nothing(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TABLE", config.table)
    monkeypatch.setenv("WORKERS_FUNCTION", "")
    monkeypatch.setattr(scheduler_slots, "PING_HOLD_SECONDS", 0.01)
    from exactly_once.handlers import settings

    settings._CURRENT.pop(scheduler_slots.SlotSettings, None)
    try:
        assert scheduler_slots.handler({"ping": True}, None) == {"pinged": 1}
    finally:
        settings._CURRENT.pop(scheduler_slots.SlotSettings, None)


def test_the_messages_table_and_its_index_are_pre_warmed_only_when_asked() -> None:
    from tests.unit.pulumi_harness import component, run

    # GIVEN the default, and table_warm_writes
    plain = run(lambda: component("scheduler")).named("c-messages", "Table").inputs
    warmed = run(lambda: component("scheduler", table_warm_writes=12_000))
    table = warmed.named("c-messages", "Table").inputs
    # THEN only the asked-for one sets a warm throughput, on the table and its status index
    assert "warmThroughput" not in plain
    assert table["warmThroughput"] == {"writeUnitsPerSecond": 12_000}
    [status_index] = table["globalSecondaryIndexes"]
    assert status_index["warmThroughput"] == {"writeUnitsPerSecond": 12_000}
