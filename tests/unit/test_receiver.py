"""The receiver (moto): a message applied once however often it is sent, the first run's
result returned to a redelivery, a failed run leaving nothing, a concurrent one waited for."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from exactly_once.handlers import receiver as receiving
from exactly_once.handlers import runtime, scheduler_slots
from exactly_once.handlers.errors import ClientError
from exactly_once.handlers.receiver import MessageInProgress, MessageOutcomeUnknown, receiver
from exactly_once.handlers.targets import UNKNOWN_ERRORS, Outcome

TABLE = "received"


@pytest.fixture
def table(moto: None) -> Iterator[str]:
    runtime.client("dynamodb").create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    yield TABLE


def context(request_id: str, seconds: float = 30) -> Any:
    ends = time.time() + seconds
    return SimpleNamespace(
        aws_request_id=request_id,
        get_remaining_time_in_millis=lambda: int((ends - time.time()) * 1000),
    )


def test_a_message_sent_again_is_not_applied_again_and_gets_the_first_result(
    table: str, capsys: pytest.CaptureFixture[str]
) -> None:
    applied: list[str] = []

    @receiver(table=table)
    def handler(message: dict[str, Any], _: Any) -> dict[str, Any]:
        applied.append(message["id"])
        return {"sent": message["parameters"]["to"]}

    message = {"id": "m-1", "parameters": {"to": "ann"}}
    assert handler(message, context("r1")) == {"sent": "ann"}
    assert handler(message, context("r2")) == {"sent": "ann"}  # the first run's result
    assert handler({"id": "m-2", "parameters": {"to": "bob"}}, context("r3")) == {"sent": "bob"}
    assert applied == ["m-1", "m-2"]
    assert '"DuplicateDropped":1' in capsys.readouterr().out
    # AND each dropped delivery is counted on the record (what the audit reads)
    assert handler(message, context("r4")) == {"sent": "ann"}
    ddb = runtime.client("dynamodb")
    record = ddb.get_item(TableName=table, Key={"pk": {"S": "RECEIVED#m-1"}})["Item"]
    assert record["redelivered"] == {"N": "2"}
    assert (
        "redelivered"
        not in ddb.get_item(TableName=table, Key={"pk": {"S": "RECEIVED#m-2"}})["Item"]
    )


def test_a_failed_run_leaves_nothing_and_the_next_delivery_runs_it(table: str) -> None:
    runs: list[int] = []

    @receiver(table=table)
    def handler(message: dict[str, Any], _: Any) -> str:
        runs.append(1)
        if len(runs) == 1:
            raise RuntimeError("the mail server said no")
        return "ok"

    with pytest.raises(RuntimeError):
        handler({"id": "m"}, context("r1"))
    assert handler({"id": "m"}, context("r2")) == "ok"
    assert len(runs) == 2


def test_a_delivery_while_another_runs_waits_for_its_result(table: str) -> None:
    started, release = threading.Event(), threading.Event()
    runs: list[str] = []

    @receiver(table=table)
    def handler(message: dict[str, Any], ctx: Any) -> str:
        runs.append(ctx.aws_request_id)
        started.set()
        release.wait(5)
        return f"by {ctx.aws_request_id}"

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(handler, {"id": "m"}, context("r1"))
        started.wait(5)
        second = pool.submit(handler, {"id": "m"}, context("r2"))
        time.sleep(0.3)
        release.set()
        assert first.result() == second.result() == "by r1"
    assert runs == ["r1"]


def test_one_that_cannot_wait_long_enough_fails_in_progress_for_the_sender_to_retry(
    table: str,
) -> None:
    @receiver(table=table)
    def handler(message: dict[str, Any], ctx: Any) -> str:
        return "ran"

    # GIVEN a run holding the message until its invocation's end, a minute away
    receiving._take(table, "m", "r1", time.time() + 60, 1)
    with pytest.raises(MessageInProgress):
        handler({"id": "m"}, context("r2", seconds=1.5))
    # AND once that invocation's time is over with no word (it timed out or died: it may
    # have applied the message), no delivery runs it again: its outcome is unknown
    held = {"pk": {"S": "RECEIVED#m"}}
    runtime.client("dynamodb").update_item(
        TableName=table,
        Key=held,
        UpdateExpression="SET lease_until = :past",
        ExpressionAttributeValues={":past": {"N": str(time.time() - 10)}},
    )
    with pytest.raises(MessageOutcomeUnknown):
        handler({"id": "m"}, context("r3"))
    # AND the scheduler reads both errors as an outcome not yet known (resent later,
    # then UNKNOWN)
    assert {MessageInProgress.__name__, MessageOutcomeUnknown.__name__} == UNKNOWN_ERRORS
    assert {scheduler_slots.function_error_outcome(name, "{}") for name in UNKNOWN_ERRORS} == {
        Outcome.UNKNOWN
    }


def test_two_deliveries_with_one_request_id_are_still_two_runs_to_tell_apart(table: str) -> None:
    # (Lambda's own duplicate of an event may carry its request id)
    started, release = threading.Event(), threading.Event()
    runs: list[int] = []

    @receiver(table=table)
    def handler(message: dict[str, Any], ctx: Any) -> int:
        runs.append(1)
        started.set()
        release.wait(5)
        return len(runs)

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        first = pool.submit(handler, {"id": "m"}, context("same"))
        started.wait(5)
        second = pool.submit(handler, {"id": "m"}, context("same"))
        time.sleep(0.3)
        release.set()
        assert first.result() == second.result() == 1
    assert runs == [1]


def test_without_a_table_it_says_how_to_name_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(receiving.TABLE_ENV, raising=False)
    with pytest.raises(ValueError, match="RECEIVER_TABLE"):
        receiver()(lambda e, c: None)({"id": "m"}, None)


def test_a_take_whose_answer_was_lost_leaves_no_record_behind(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the record's write landing, its answer lost past the SDK's retries
    ddb = runtime.client("dynamodb")
    real = ddb.put_item

    def lost(**kwargs: Any) -> Any:
        real(**kwargs)
        raise ClientError({"Error": {"Code": "InternalServerError"}}, "PutItem")

    monkeypatch.setattr(ddb, "put_item", lost)

    @receiver(table=table)
    def handler(message: dict[str, Any], ctx: Any) -> str:
        return "ran"

    with pytest.raises(ClientError):
        handler({"id": "m"}, context("r1"))
    monkeypatch.setattr(ddb, "put_item", real)
    # THEN the next delivery runs it (the record was taken back, not left to answer
    # MessageOutcomeUnknown for ever)
    assert handler({"id": "m"}, context("r2")) == "ran"
