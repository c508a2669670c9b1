"""Scheduler handlers against moto: validation, status transitions, sweep pagination."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from benchmarks import scheduler_model
from exactly_once.handlers import (
    executions,
    runtime,
    scheduler,
    scheduler_api,
    scheduler_index,
    scheduler_slots,
    scheduler_sweep,
)
from exactly_once.handlers.errors import BadEvent, ClientError, Conflict
from exactly_once.handlers.scheduler import SchedulerSettings
from tests.unit.conftest import WAIT_DEFINITION, make_state_machine

NOW = 1_800_000_000.0


@pytest.fixture
def config(moto: None) -> Iterator[SchedulerSettings]:
    ddb = runtime.client("dynamodb")
    ddb.create_table(
        TableName="messages",
        **scheduler_index.table_schema(),
    )
    ddb.put_item(
        TableName="messages",
        Item={
            "pk": {"S": "INVOKER#demo"},
            "target_arn": {"S": "arn:aws:lambda:us-east-1:1:function:t"},
        },
    )
    ddb.put_item(  # a channel whose target drops a redelivery (exactly_once.receiver)
        TableName="messages",
        Item={
            "pk": {"S": "INVOKER#again"},
            "target_arn": {"S": "arn:aws:lambda:us-east-1:1:function:t"},
            "redeliver": {"BOOL": True},
        },
    )
    yield SchedulerSettings(
        table="messages",
        state_machine_arn=make_state_machine(WAIT_DEFINITION),
        window_seconds=60,
        late_tolerance_seconds=30,
        # every message on its own execution (a slot of one), named by its id: the slot
        # clock's shared executions are test_scheduler_slots.py's
        join_slots=False,
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"channel": "demo"}, "publishTime is required"),
        ({"publishTime": "tomorrow", "channel": "demo"}, "neither epoch"),
        ({"publishTime": "2027-01-01T00:00:00", "channel": "demo"}, "no time zone"),
        ({"publishTime": True, "channel": "demo"}, "publishTime is required"),
        ({"publishTime": float("nan"), "channel": "demo"}, "finite"),
        ({"publishTime": float("inf"), "channel": "demo"}, "finite"),
        ({"publishTime": NOW - 60, "channel": "demo"}, "in the past"),
        ({"publishTime": NOW + 400 * 86400, "channel": "demo"}, "364 days"),
        ({"publishTime": NOW + 10}, "channel is required"),
        ({"publishTime": NOW + 10, "channel": "demo", "parameters": "x" * 40000}, "bytes"),
        ([], "JSON object"),
        # (a batch's spelling in a single POST: ignored, it would register a new message
        # at every retry)
        (
            {"publishTime": NOW + 10, "channel": "demo", "idempotencyKey": "k"},
            "unknown fields idempotencyKey .*Idempotency-Key header",
        ),
        ({"publishTime": NOW + 10, "channel": "demo", "params": {}}, "unknown fields params"),
    ],
)
def test_validation_explains_every_refusal(body: object, reason: str) -> None:
    with pytest.raises(BadEvent, match=reason):
        scheduler.validate(body, NOW)


def test_iso_times_and_epoch_seconds_agree() -> None:
    # 1_800_000_000 is 2027-01-15T08:00:00Z
    iso = scheduler.validate({"publishTime": "2027-01-15T08:00:10Z", "channel": "c"}, NOW)
    offset = scheduler.validate({"publishTime": "2027-01-15T09:00:10+01:00", "channel": "c"}, NOW)
    epoch = scheduler.validate({"publishTime": NOW + 10, "channel": "c"}, NOW)
    assert iso["publish_at"] == offset["publish_at"] == epoch["publish_at"] == NOW + 10


def test_due_messages_go_straight_to_standby(config: SchedulerSettings) -> None:
    soon, _ = scheduler.register(config, {"publishTime": time.time() + 5, "channel": "demo"})
    later, _ = scheduler.register(config, {"publishTime": time.time() + 3600, "channel": "demo"})
    assert (soon["status"], later["status"]) == ("STANDBY", "RESERVED")


def test_unknown_channels_are_refused(config: SchedulerSettings) -> None:
    with pytest.raises(BadEvent, match="unknown channel"):
        scheduler.register(config, {"publishTime": time.time() + 5, "channel": "nope"})


def test_an_idempotency_key_registers_once(config: SchedulerSettings) -> None:
    body = {"publishTime": time.time() + 5, "channel": "demo"}
    first, created = scheduler.register(config, body, "key-1")
    again, created_again = scheduler.register(config, body, "key-1")
    assert (created, created_again, first["id"]) == (True, False, again["id"])
    with pytest.raises(Conflict):
        scheduler.register(config, {**body, "parameters": {"other": 1}}, "key-1")


def test_a_keyed_retry_after_the_publish_time_returns_the_stored_message(
    config: SchedulerSettings,
) -> None:
    publish = time.time() + 5
    body = {"publishTime": publish, "channel": "demo"}
    first, _ = scheduler.register(config, body, "key-late")
    # WHEN the client's retry arrives a minute after the publish time
    again, created = scheduler.register(config, body, "key-late", now=publish + 60)
    # THEN it gets the message it registered, not "in the past"
    assert (created, again["id"]) == (False, first["id"])
    # AND without the key, or with another body, the time is still checked
    with pytest.raises(BadEvent, match="in the past"):
        scheduler.register(config, body, now=publish + 60)
    with pytest.raises(BadEvent, match="in the past"):
        scheduler.register(config, {**body, "parameters": {"x": 1}}, "key-late", now=publish + 60)


def test_a_message_late_on_arrival_within_the_tolerance_is_accepted_and_marked_late(
    config: SchedulerSettings,
) -> None:
    publish = time.time() - 10  # config.late_tolerance_seconds is 30
    message, created = scheduler.register(config, {"publishTime": publish, "channel": "demo"})
    # THEN it is STANDBY (its execution's Wait has passed: it fires at once), marked late by
    # how long after its time the request arrived, for GET and for the target
    assert (created, message["status"]) == (True, "STANDBY")
    assert 10 <= message["lateOnArrival"] < 11
    assert scheduler.get(config, message["id"])["lateOnArrival"] == message["lateOnArrival"]
    item = scheduler.read_item(config, message["id"])
    assert scheduler_slots.delivery_of(item)["lateOnArrival"] == message["lateOnArrival"]
    # AND its own execution (too late for a slot) wakes at once: its Wait has passed
    sfn = runtime.client("stepfunctions")
    [execution] = sfn.list_executions(stateMachineArn=config.state_machine_arn)["executions"]
    document = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])["input"])
    assert document["message"] == message["id"]
    assert document["wakeAt"] < time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    # AND one on time carries no mark
    on_time, _ = scheduler.register(config, {"publishTime": time.time() + 5, "channel": "demo"})
    assert "lateOnArrival" not in on_time
    stored = scheduler.read_item(config, on_time["id"])
    assert "lateOnArrival" not in scheduler_slots.delivery_of(stored)


def test_a_message_is_judged_by_when_its_request_arrived_not_by_the_handlers_clock(
    config: SchedulerSettings,
) -> None:
    publish = time.time() + 5
    body = {"publishTime": publish, "channel": "demo"}
    # WHEN the handler runs 50 s after the due time (a cold start, a queue of requests) but
    # the request arrived 1 s before it
    message, created = scheduler.register(
        config, body, "arrived-in-time", now=publish + 50, received=publish - 1
    )
    # THEN it is accepted, on time (not late)
    assert created and "lateOnArrival" not in message
    # AND one that arrived 20 s late is accepted late by 20 s, not by 50
    late, _ = scheduler.register(
        config, body, "arrived-late", now=publish + 50, received=publish + 20
    )
    assert late["lateOnArrival"] == pytest.approx(20, abs=0.01)
    # AND a request time ahead of the handler's clock is never trusted past it
    ahead, _ = scheduler.register(
        config, body, "clock-ahead", now=publish + 25, received=publish + 90
    )
    assert ahead["lateOnArrival"] == pytest.approx(25, abs=0.01)


def test_a_message_past_the_tolerance_is_refused_with_the_tolerance_named_and_stores_nothing(
    config: SchedulerSettings,
) -> None:
    body = {"publishTime": time.time() - 31, "channel": "demo"}
    with pytest.raises(BadEvent, match=r"in the past .* up to 30s late"):
        scheduler.register(config, body, "too-late")
    assert scheduler.get(config, scheduler.message_id_for("too-late")) is None


def test_the_api_judges_by_api_gateways_request_time(config: SchedulerSettings) -> None:
    publish = time.time() - 40  # past the 30 s tolerance by the handler's clock
    request = {
        "httpMethod": "POST",
        "body": json.dumps({"publishTime": publish, "channel": "demo"}),
        "requestContext": {"requestTimeEpoch": int((publish - 0.5) * 1000)},
    }
    answer = scheduler_api.serve(request, config)
    assert answer["statusCode"] == 201, answer
    assert "lateOnArrival" not in json.loads(answer["body"])
    # without the request time (outside API Gateway) the handler's clock judges: refused
    refused = scheduler_api.serve({**request, "requestContext": {}}, config)
    assert refused["statusCode"] == 400
    assert "late_tolerance_seconds" in json.loads(refused["body"])["message"]


def batch(entries: Any) -> dict[str, Any]:
    return {
        "httpMethod": "POST",
        "resource": "/messages/batch",
        "body": json.dumps({"entries": entries}),
    }


def large_entries(parameter_bytes: int, count: int = 100) -> list[dict[str, Any]]:
    """`count` valid entries, each with parameters of about `parameter_bytes`."""
    return [
        {
            "id": str(n),
            "idempotencyKey": str(n),
            "publishTime": time.time() + 3600,
            "channel": "demo",
            "parameters": {"blob": "x" * parameter_bytes},
        }
        for n in range(count)
    ]


def test_a_batch_registers_each_entry_by_its_own_key_and_answers_each(
    config: SchedulerSettings,
) -> None:
    due = time.time() + 3600
    entries = [
        {"id": "a", "idempotencyKey": "k-a", "publishTime": due, "channel": "demo"},
        # the same key again in the batch: the first's message, not a second one
        {"id": "a-again", "idempotencyKey": "k-a", "publishTime": due, "channel": "demo"},
        {"id": "bad", "idempotencyKey": "k-bad", "publishTime": due, "channel": "nope"},
        {"id": "b", "idempotencyKey": "k-b", "publishTime": due + 1, "channel": "demo"},
        {"id": "clash", "idempotencyKey": "k-b", "publishTime": due + 9, "channel": "demo"},
    ]
    answer = scheduler_api.serve(batch(entries), config)
    assert answer["statusCode"] == 200, answer
    body = json.loads(answer["body"])
    ok = {s["id"]: s for s in body["successful"]}
    failed = {f["id"]: f for f in body["failed"]}
    assert set(ok) == {"a", "a-again", "b"} and set(failed) == {"bad", "clash"}
    assert ok["a"]["message"]["id"] == ok["a-again"]["message"]["id"]
    assert (ok["a"]["created"], ok["a-again"]["created"]) == (True, False)  # batch order
    # each answered with its id and status, not its parameters back
    assert ok["b"]["message"]["status"] in ("RESERVED", "STANDBY")
    assert "parameters" not in ok["b"]["message"]
    assert failed["bad"]["code"] == "InvalidMessage" and failed["bad"]["senderFault"]
    assert "unknown channel" in failed["bad"]["message"]
    assert failed["clash"]["code"] == "IdempotencyKeyConflict"
    # WHEN the whole batch is retried (a lost answer): the same messages, nothing new
    again = json.loads(scheduler_api.serve(batch(entries), config)["body"])
    assert {s["id"]: (s["message"]["id"], s["created"]) for s in again["successful"]} == {
        i: (s["message"]["id"], False) for i, s in ok.items()
    }
    stored = runtime.client("dynamodb").scan(TableName=config.table)["Items"]
    assert len([i for i in stored if i["pk"]["S"].startswith("MESSAGE#")]) == 2


@pytest.mark.parametrize(
    ("entries", "reason"),
    [
        ([], "1 to 100 entries"),
        ([{"id": str(n), "idempotencyKey": str(n)} for n in range(101)], "1 to 100 entries"),
        ([{"id": "a b", "idempotencyKey": "k"}], "an id of 1 to 80"),
        ([{"id": "a", "idempotencyKey": "k"}, {"id": "a", "idempotencyKey": "j"}], "distinct"),
        ([{"id": "a"}], "its own idempotencyKey"),
        # 100 entries of parameters within the per-message 32 KB, 3.2 MB in all: escaped
        # inside the proxy event, past what Lambda takes beside the request's headers
        (large_entries(32_000), "send it as smaller batches"),
    ],
)
def test_a_malformed_batch_is_a_400_and_stores_nothing(
    config: SchedulerSettings, entries: Any, reason: str
) -> None:
    answer = scheduler_api.serve(batch(entries), config)
    assert answer["statusCode"] == 400 and reason in json.loads(answer["body"])["message"]
    stored = runtime.client("dynamodb").scan(TableName=config.table)["Items"]
    assert not [i for i in stored if i["pk"]["S"].startswith("MESSAGE#")]


def test_a_batch_with_a_field_beside_its_entries_is_a_400_naming_it(
    config: SchedulerSettings,
) -> None:
    event = batch([{"id": "a", "idempotencyKey": "k", "publishTime": NOW + 60, "channel": "demo"}])
    event["body"] = json.dumps({**json.loads(event["body"]), "idempotencyKey": "batch-1"})
    answer = scheduler_api.serve(event, config)
    assert answer["statusCode"] == 400
    assert "unknown fields idempotencyKey" in json.loads(answer["body"])["message"]


def test_a_batch_just_under_the_byte_bound_is_registered_whole(config: SchedulerSettings) -> None:
    # 100 entries of ~31 KB: a body just under scheduler_api.MAX_BATCH_BYTES
    event = batch(large_entries(30_900))
    assert (
        scheduler_api.MAX_BATCH_BYTES - 20_000 < len(event["body"]) <= scheduler_api.MAX_BATCH_BYTES
    )
    answer = json.loads(scheduler_api.serve(event, config)["body"])
    assert len(answer["successful"]) == 100 and answer["failed"] == []


def test_status_changes_are_conditional(config: SchedulerSettings) -> None:
    message, _ = scheduler.register(config, {"publishTime": time.time() + 3600, "channel": "demo"})
    assert scheduler.transition(config, message["id"], ("RESERVED",), "STANDBY") is True
    assert (
        scheduler.transition(config, message["id"], ("RESERVED",), "STANDBY") is False
    )  # already moved


def test_cancel_then_cancelling_a_fired_message_conflicts(config: SchedulerSettings) -> None:
    message, _ = scheduler.register(config, {"publishTime": time.time() + 3600, "channel": "demo"})
    assert scheduler.cancel(config, message["id"])["status"] == "CANCELLED"
    assert scheduler.cancel(config, message["id"])["status"] == "CANCELLED"  # idempotent
    fired, _ = scheduler.register(config, {"publishTime": time.time() + 3600, "channel": "demo"})
    scheduler.transition(config, fired["id"], ("RESERVED",), "DONE")
    with pytest.raises(Conflict, match="DONE"):
        scheduler.cancel(config, fired["id"])


def test_sweep_pages_through_every_due_message_and_reads_nothing_else(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    ddb = runtime.client("dynamodb")
    now = time.time()
    # the sweep's clock stands at `now`: writing 2,500 items and paging through them may
    # take longer than the due ones' 30 s on a busy machine, and none is overdue by then
    # (it was: {'overdue': 524} under a load of 12 on 2 cores)
    monkeypatch.setattr(scheduler_sweep, "time", SimpleNamespace(time=lambda: now))
    for i in range(2500):  # more than one 1 MB page of the index
        due = i < 1200
        ddb.put_item(
            TableName=config.table,
            Item={
                "pk": {"S": f"MESSAGE#m{i}"},
                "id": {"S": f"m{i}"},
                "status": {"S": "RESERVED"},
                "lane": {"S": scheduler_index.lane("RESERVED", f"m{i}")},
                "publish_at": {"N": str(now + (30 if due else 86400 + i))},
                "pad": {"S": "x" * 800},
            },
        )
    result = scheduler_sweep.sweep(config, now)
    assert result == {
        "read": 1200,
        "moved": 1200,
        "standby": 0,
        "restarted": 0,
        "overdue": 0,
        "unfinished": 0,
        "failed": 0,
    }
    # (the stream starts the moved ones; the pad-only items here are not startable)


@contextlib.contextmanager
def calls_of(service: str) -> Iterator[list[str]]:
    """The operations the handlers' `service` client calls meanwhile."""
    aws = runtime.client(service)
    calls: list[str] = []

    def record(model: Any, **kwargs: Any) -> None:
        calls.append(model.name)

    event = f"before-call.{aws.meta.service_model.endpoint_prefix}"
    aws.meta.events.register(event, record)
    try:
        yield calls
    finally:
        aws.meta.events.unregister(event, record)


def reserved(config: SchedulerSettings, message_id: str, publish_at: float) -> None:
    runtime.client("dynamodb").put_item(
        TableName=config.table,
        Item={
            "pk": {"S": f"MESSAGE#{message_id}"},
            "id": {"S": message_id},
            "status": {"S": "RESERVED"},
            "lane": {"S": scheduler_index.lane("RESERVED", message_id)},
            "publish_at": {"N": str(publish_at)},
        },
    )


def sweep_context(remaining_ms: float) -> SimpleNamespace:
    ends = time.time() * 1000 + remaining_ms
    return SimpleNamespace(
        aws_request_id="sweep-1",
        get_remaining_time_in_millis=lambda: int(ends - time.time() * 1000),
    )


def test_a_reserved_message_past_its_time_is_overdue_and_moved(config: SchedulerSettings) -> None:
    # GIVEN a RESERVED message past its time (a sweep fell behind) and one due in the window
    now = time.time()
    reserved(config, "behind", now - scheduler_sweep.OVERDUE_SECONDS - 5)
    reserved(config, "due", now + 30)
    # WHEN the sweep runs, THEN both are moved (the stream starts them) and one is overdue
    result = scheduler_sweep.sweep(config, now)
    assert (result["moved"], result["overdue"], result["standby"]) == (2, 1, 0)


def test_a_sweep_out_of_time_says_so_and_its_retry_goes_on_from_there(
    config: SchedulerSettings,
) -> None:
    # GIVEN messages to move, and an invocation with no time left beyond the margin
    now = time.time()
    for n in range(40):
        reserved(config, f"m{n}", now + 30)
    out_of_time = sweep_context(scheduler_sweep.MARGIN_SECONDS * 1000 - 1)
    # WHEN the sweep runs, THEN it stops before taking any up and raises (Lambda retries it)
    with pytest.raises(scheduler_sweep.Unfinished, match="'unfinished': 1"):
        scheduler_sweep.sweep(config, now, out_of_time)
    # AND the retry, given its time, moves them all
    result = scheduler_sweep.sweep(config, now, sweep_context(60_000))
    assert (result["moved"], result["unfinished"]) == (40, 0)


def test_a_message_the_sweep_cannot_move_is_left_for_the_next_run_not_the_others(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN messages to move, one of whose moves keeps failing (throttled past the SDK)
    now = time.time()
    for n in range(20):
        reserved(config, f"m{n}", now + 30)
    move = scheduler_sweep.transition

    def throttled(config: SchedulerSettings, message_id: str, *args: Any) -> bool:
        if message_id == "m7":
            error = {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}
            raise ClientError(error, "UpdateItem")
        return move(config, message_id, *args)

    monkeypatch.setattr(scheduler_sweep, "transition", throttled)
    # WHEN the sweep runs, THEN the others move, and it fails (Lambda retries it) saying so
    with pytest.raises(scheduler_sweep.Unfinished, match=r"'moved': 19, .*'failed': 1"):
        scheduler_sweep.sweep(config, now)
    assert scheduler.read_item(config, "m7")["status"]["S"] == "RESERVED"  # (the next run's)


def test_the_sweep_takes_up_its_lanes_side_by_side(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN STANDBY messages in every lane (two each)
    now = time.time()
    ids = [f"m{n}" for n in range(200)]
    for lane in range(scheduler_index.LANES):
        for message_id in [i for i in ids if scheduler_index.lane_of(i) == lane][:2]:
            reserved(config, message_id, now + 30)
            scheduler.transition(config, message_id, ("RESERVED",), "STANDBY")
    # (each lane's first start waits for every lane's: only side by side do all arrive)
    together = threading.Barrier(scheduler_index.LANES, timeout=30)
    arrived: set[int] = set()
    start = scheduler_sweep.start

    def first_together(*args: Any) -> Any:
        if threading.get_ident() not in arrived:
            arrived.add(threading.get_ident())
            together.wait()
        return start(*args)

    monkeypatch.setattr(scheduler_sweep, "start", first_together)
    # WHEN the sweep runs, THEN every lane's thread starts its messages
    result = scheduler_sweep.sweep(config, now)
    assert (result["standby"], result["restarted"], result["failed"]) == (32, 32, 0)
    assert len(arrived) == scheduler_index.LANES


def test_the_sweep_starts_each_second_s_slot_once_for_its_messages(
    config: SchedulerSettings,
) -> None:
    # GIVEN messages of two seconds ahead, STANDBY, nobody started (their stream records
    # lost), with slots joined
    slots_config = dataclasses.replace(config, join_slots=True)
    second = int(time.time()) + 30
    for n in range(8):
        reserved(config, f"m{n}", second + (n % 2) + n / 10)
        scheduler.transition(config, f"m{n}", ("RESERVED",), "STANDBY")
    # WHEN the sweep runs
    with calls_of("stepfunctions") as calls:
        result = scheduler_sweep.sweep(slots_config, time.time())
    # THEN each second's slot is started once, for all its messages
    assert executions_of(config) == [f"slot-{second}", f"slot-{second + 1}"]
    assert (result["restarted"], calls) == (2, ["StartExecution"] * 2)


def test_the_sweep_starts_a_message_from_the_index_unread_unless_overdue(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a STANDBY message nobody started (its stream record lost) and one overdue
    now = time.time()
    for message_id, publish_at in (("soon", now + 30), ("overdue", now - 120)):
        reserved(config, message_id, publish_at)
        scheduler.transition(config, message_id, ("RESERVED",), "STANDBY")
    reads: list[str] = []
    read = scheduler_sweep.read_item

    def counted(config: SchedulerSettings, message_id: str) -> Any:
        reads.append(message_id)
        return read(config, message_id)

    monkeypatch.setattr(scheduler_sweep, "read_item", counted)
    # WHEN the sweep runs, THEN both start, and only the overdue one's item is read: the
    # soon one its own execution, the overdue one its slot's next attempt
    result = scheduler_sweep.sweep(config, now)
    assert (result["restarted"], result["overdue"]) == (2, 1)
    assert reads == ["overdue"]
    assert executions_of(config) == [retry_of(config, "overdue"), "soon"]


def test_an_idle_sweep_reads_each_lane_of_three_statuses_once_as_the_cost_model_counts(
    config: SchedulerSettings,
) -> None:
    # GIVEN an empty table, WHEN the sweep runs
    with calls_of("dynamodb") as calls:
        result = scheduler_sweep.sweep(config, time.time())
    # THEN it made the model's Queries (docs/cost.md's sweep row), nothing else
    assert result["read"] == result["standby"] == 0
    assert calls == ["Query"] * scheduler_model.SWEEP_QUERIES


def retry_of(config: SchedulerSettings, message_id: str) -> str:
    """The name of the first retry of the message's slot (`scheduler_slots.retry_key`)."""
    item = scheduler.read_item(config, message_id)
    assert item is not None
    return scheduler_slots.retry_key(scheduler_slots.slot_of(float(item["publish_at"]["N"])))


def executions_of(config: SchedulerSettings) -> list[str]:
    sfn = runtime.client("stepfunctions")
    listed = sfn.list_executions(stateMachineArn=config.state_machine_arn)["executions"]
    return sorted(e["name"] for e in listed)


def throttled_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """StartExecution throttled through every SDK attempt, as a busy account would answer."""
    error = {"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}

    def throttled(*args: object, **kwargs: object) -> None:
        raise ClientError(error, "StartExecution")

    monkeypatch.setattr(scheduler, "start_once", throttled)


def test_the_api_starts_a_message_due_within_the_window_and_the_stream_is_a_duplicate(
    config: SchedulerSettings,
) -> None:
    # GIVEN a message due soon and one beyond the window
    soon, _ = scheduler.register(config, {"publishTime": time.time() + 5, "channel": "demo"})
    later, _ = scheduler.register(config, {"publishTime": time.time() + 3600, "channel": "demo"})
    # THEN the soon one's execution was started by the registration, the later one's not
    assert executions_of(config) == [soon["id"]]
    # AND the stream's record of it starts nothing new
    item = scheduler.read_item(config, soon["id"])
    record = {"eventName": "INSERT", "dynamodb": {"NewImage": item}}
    assert scheduler.start_records(config, {"Records": [record]}, None) == {
        "outcomes": ["DUPLICATE"]
    }
    assert later["status"] == "RESERVED"


def test_a_failed_start_at_registration_still_registers_and_the_replay_starts_it(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {"publishTime": time.time() + 30, "channel": "demo"}
    with monkeypatch.context() as patch:
        throttled_starts(patch)
        # WHEN the start is throttled, the registration stands (201), nothing started yet
        message, created = scheduler.register(config, body, "key-throttled")
    assert (created, message["status"]) == (True, "STANDBY")
    assert executions_of(config) == []
    # THEN a replay of the registration starts it (as the stream or the sweep would)
    again, created = scheduler.register(config, body, "key-throttled")
    assert (created, again["id"]) == (False, message["id"])
    assert executions_of(config) == [message["id"]]


def test_the_sweep_starts_standby_messages_nobody_started(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two STANDBY messages due soon: one started, one whose every start was lost
    started, _ = scheduler.register(config, {"publishTime": time.time() + 30, "channel": "demo"})
    with monkeypatch.context() as patch:
        throttled_starts(patch)
        lost, _ = scheduler.register(config, {"publishTime": time.time() + 30, "channel": "demo"})
    # WHEN the sweep runs, twice (overlapping sweeps)
    first, again = scheduler_sweep.sweep(config), scheduler_sweep.sweep(config)
    # THEN only the lost one was started, once; nothing was moved
    assert (first["standby"], first["restarted"], first["moved"]) == (2, 1, 0)
    assert (again["standby"], again["restarted"]) == (2, 0)
    assert executions_of(config) == sorted([started["id"], lost["id"]])


def stopped(sfn: Any, arn: str) -> None:
    """Stop an execution and see it ABORTED: moto's interpreter thread, should it start
    after the stop, marks it RUNNING again, so stop until it stays stopped."""
    deadline = time.monotonic() + 10
    seen = 0
    while time.monotonic() < deadline:
        sfn.stop_execution(executionArn=arn)
        time.sleep(0.1)
        seen = seen + 1 if sfn.describe_execution(executionArn=arn)["status"] == "ABORTED" else 0
        if seen == 2:  # twice in a row, 0.1 s apart: the thread, if any, is done
            return
    raise AssertionError(f"{arn} never stayed ABORTED")


def test_the_sweep_starts_the_next_attempt_of_an_overdue_message_its_execution_never_claimed(
    config: SchedulerSettings,
) -> None:
    # GIVEN two STANDBY messages whose executions ended without claiming them (a Claim that
    # failed for good: AccessDenied past its retries), one overdue, one not yet
    sfn = runtime.client("stepfunctions")
    now = time.time()
    overdue, _ = scheduler.register(config, {"publishTime": now - 5, "channel": "demo"})
    pending, _ = scheduler.register(config, {"publishTime": now + 50, "channel": "demo"})
    for message in (overdue, pending):
        arn = executions.execution_arn(config.state_machine_arn, message["id"])
        stopped(sfn, arn)  # ABORTED: ended, as a failed one
    # WHEN the sweep runs past the overdue one's time plus the margin, twice
    at = now - 5 + scheduler_sweep.OVERDUE_SECONDS + 2  # (its whole second overdue)
    first, again = scheduler_sweep.sweep(config, now=at), scheduler_sweep.sweep(config, now=at)
    # THEN the overdue one's slot gets its next attempt, once (it was never claimed, so
    # never fired): a restart, which takes up the second's every message left; the other
    # is left to its own time (before, both were counted duplicates and the overdue one
    # was stranded STANDBY forever)
    assert (first["restarted"], again["restarted"]) == (1, 0)
    retry = retry_of(config, overdue["id"])
    assert scheduler_slots.is_restart(retry)
    assert executions_of(config) == sorted([overdue["id"], retry, pending["id"]])


def test_a_start_that_raced_a_cancel_stops_its_execution(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a STANDBY message whose start was lost, then cancelled (no execution to stop)
    with monkeypatch.context() as patch:
        throttled_starts(patch)
        message, _ = scheduler.register(
            config, {"publishTime": time.time() + 30, "channel": "demo"}
        )
    stale = scheduler.read_item(config, message["id"])  # the STANDBY image a stream record holds
    assert scheduler.cancel(config, message["id"])["status"] == "CANCELLED"
    # WHEN the stream delivers the old STANDBY image
    sfn = runtime.client("stepfunctions")
    stopped: list[str] = []
    monkeypatch.setattr(sfn, "stop_execution", lambda **kw: stopped.append(kw["executionArn"]))
    outcome = scheduler.start(config, stale, None)
    # THEN the execution it started is stopped at once (moto's interpreter keeps it
    # RUNNING: the call is what is checked)
    assert outcome.status == "STARTED"
    assert stopped == [outcome.execution_arn]
    # AND a start of a message still STANDBY stops nothing
    with monkeypatch.context() as patch:
        throttled_starts(patch)
        other, _ = scheduler.register(config, {"publishTime": time.time() + 30, "channel": "demo"})
    assert (
        scheduler.start(config, scheduler.read_item(config, other["id"]), None).status == "STARTED"
    )
    assert stopped == [outcome.execution_arn]


def test_the_stream_starter_names_executions_by_message_id(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        throttled_starts(patch)  # so the stream's record is the first start
        message, _ = scheduler.register(config, {"publishTime": time.time() + 5, "channel": "demo"})
    item = scheduler.read_item(config, message["id"])
    record = {"eventName": "INSERT", "dynamodb": {"NewImage": item}}
    assert scheduler.start_records(config, {"Records": [record]}, None) == {"outcomes": ["STARTED"]}
    assert scheduler.start_records(config, {"Records": [record]}, None) == {
        "outcomes": ["DUPLICATE"]
    }
    assert executions_of(config) == [message["id"]]


def test_the_stream_filter_passes_standby_images_only_and_the_starter_starts_nothing_else(
    config: SchedulerSettings,
) -> None:
    from exactly_once.components.scheduler import STREAM_FILTERS

    # the claim's, the end's and the expiry's records are discarded before any invocation
    assert STREAM_FILTERS == ({"dynamodb": {"NewImage": {"status": {"S": ["STANDBY"]}}}},)
    # (and a record past the filter that is no STANDBY image starts nothing)
    done = {"id": {"S": "m"}, "status": {"S": "DONE"}, "publish_at": {"N": "1"}}
    record = {"dynamodb": {"NewImage": done, "OldImage": {"status": {"S": "FIRING"}}}}
    assert scheduler.start_records(config, {"Records": [record]}, None) == {"outcomes": []}


def test_the_api_maps_errors_to_status_codes(config: SchedulerSettings) -> None:
    def call(method: str, body: object = None, message_id: str | None = None) -> dict:
        event = {
            "httpMethod": method,
            "body": body if isinstance(body, str) else json.dumps(body),
            "pathParameters": {"id": message_id} if message_id else None,
            "headers": {},
        }
        return scheduler_api.serve(event, config)

    assert call("POST", "{nope")["statusCode"] == 400
    created = call("POST", {"publishTime": time.time() + 5, "channel": "demo"})
    assert created["statusCode"] == 201
    message_id = json.loads(created["body"])["id"]
    assert call("GET", message_id=message_id)["statusCode"] == 200
    assert call("GET", message_id="missing")["statusCode"] == 404
    assert call("DELETE", message_id=message_id)["statusCode"] == 200
    assert call("DELETE", message_id="missing")["statusCode"] == 404


def test_a_bug_in_the_api_is_a_500_never_a_404(
    config: SchedulerSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise KeyError("a bug, not a missing message")

    monkeypatch.setattr(scheduler, "register", broken)
    event = {"httpMethod": "POST", "body": "{}", "pathParameters": None, "headers": {}}
    with pytest.raises(KeyError):  # API Gateway answers 500; the client retries
        scheduler_api.serve(event, config)


IMAGE = {
    "id": {"S": "m"},
    "channel": {"S": "c"},
    "target_arn": {"S": "arn:aws:lambda:us-east-1:123456789012:function:t"},
    "parameters": {"S": "{}"},
    "publish_at": {"N": "1800000000.250"},
}


@pytest.mark.parametrize("publish_at", ["1800000000.250", "1800000000.000", "1800000000.999"])
def test_a_slot_of_one_wakes_a_lead_ahead_in_whole_seconds_and_names_its_message(
    publish_at: str,
) -> None:
    from exactly_once.handlers import scheduler_slots

    given = scheduler_slots.slot_input(scheduler_slots.slot_of(float(publish_at)), "m")
    # whole seconds (AWS truncates a timestamp's fraction), LEAD_SECONDS before the second
    assert given == {"slot": 1800000000, "wakeAt": "2027-01-15T07:59:58Z", "message": "m"}


def test_the_messages_table_expires_ended_records_after_the_components_retention() -> None:
    from exactly_once.handlers.scheduler_store import TTL_ATTRIBUTE
    from tests.unit.pulumi_harness import component, run

    mocks = run(lambda: component("scheduler", retention_days=3))
    table = mocks.named("c-messages", "aws:dynamodb/table:Table").inputs
    assert table["ttl"] == {"attributeName": TTL_ATTRIBUTE, "enabled": True}
    api = mocks.named("c-api", "aws:lambda/function:Function").inputs
    assert api["environment"]["variables"]["RETENTION_DAYS"] == "3"
