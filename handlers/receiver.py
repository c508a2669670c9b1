"""The receiving end of the scheduler (or of any caller that sends an `id` and may send it
again): a decorator for your Lambda function that applies each message once.

    from exactly_once.handlers.receiver import receiver

    @receiver(table="reminders-received")  # or RECEIVER_TABLE in the environment
    def handler(message, context):
        send_email(message["parameters"])
        return {"sent": True}

Before your function runs, the message id is recorded with a conditional write (IN_PROGRESS,
held until this invocation's end); when it returns, COMPLETE with its result. A message
sent again after that (the scheduler resends one whose answer it lost, when its channel is
in `SchedulerArgs.redeliver`) gets the first run's result, without running your function,
a `DuplicateDropped` metric, and a count on the record (`redelivered`: the scheduler's
audit reports a message delivered more than once). One that arrives while the first
still runs waits for it, for as long as its own invocation may; past that it fails
`MessageInProgress`. A run that
ended without a word (Lambda stopped it at its timeout, it ran out of memory: it "might have
run completely, partially, or not at all") is never run again: a later delivery fails
`MessageOutcomeUnknown`. The scheduler takes either for an outcome it has not seen
(handlers/targets.py): it sends again later within its budget, then ends the message UNKNOWN
for you to look at. So your function runs at most once per message, and exactly once when
it returns. A run that raises leaves no record and the next delivery runs your function
again: raise only when its effect did not happen (or is safe to redo). The record lives
`ttl_days` (the table's TTL attribute `expires_at`).

The table: a string partition key `pk` (its items `RECEIVED#<id>`) and TTL on `expires_at`;
your function's role needs dynamodb:PutItem, UpdateItem and DeleteItem on it
(`SchedulerArgs.receiver_table` creates one; docs/scheduler.md).
"""

from __future__ import annotations

import functools
import json
import os
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from exactly_once.handlers import metrics
from exactly_once.handlers.errors import ClientError, aws_code
from exactly_once.handlers.runtime import client, log, remaining_seconds

TABLE_ENV = "RECEIVER_TABLE"
TTL_ATTRIBUTE = "expires_at"
PATTERN = "receiver"
IN_PROGRESS, COMPLETE = "IN_PROGRESS", "COMPLETE"
REDELIVERED = "redelivered"  # on the record: deliveries after the first dropped (at least)
# A result larger than this is not kept (DynamoDB's item limit is 400 KB): a redelivery
# then answers {"duplicate": true} instead of the first run's result.
MAX_RESULT_BYTES = 300 * 1024
WAIT_MARGIN_SECONDS = 1.0  # left of this invocation when it stops waiting for another's
LEASE_SKEW_SECONDS = 5  # a run's lease is taken for ended this long after it (two hosts' clocks)

Handler = TypeVar("Handler", bound=Callable[[Any, Any], Any])


class MessageInProgress(Exception):
    """Another invocation is applying this message now and did not finish while this one
    could wait (the scheduler sends it again later: handlers/targets.py)."""


class MessageOutcomeUnknown(Exception):
    """A run of this message ended without recording whether it applied it (its invocation
    timed out or died): never run again (the scheduler ends the message UNKNOWN)."""


def receiver(
    table: str | None = None,
    *,
    id_of: Callable[[Any], str] = lambda event: str(event["id"]),
    ttl_days: int = 30,
) -> Callable[[Handler], Handler]:
    """Wrap a Lambda handler so each message (by `id_of(event)`: the scheduler's delivery
    id) is applied once; `table` (or RECEIVER_TABLE) keeps the ids for `ttl_days`."""

    def wrap(function: Handler) -> Handler:
        @functools.wraps(function)
        def handler(event: Any, context: Any) -> Any:
            name = table or os.environ.get(TABLE_ENV)
            if not name:
                raise ValueError(f"receiver: no table (pass table=... or set {TABLE_ENV})")
            return receive(name, id_of(event), lambda: function(event, context), context, ttl_days)

        return handler  # type: ignore[return-value]

    return wrap


def receive(
    table: str, message_id: str, run: Callable[[], Any], context: Any = None, ttl_days: int = 30
) -> Any:
    """`run()` at most once for `message_id`: its result, or the first run's."""
    # This run's own mark (not the request id: a duplicate delivery may share that); a
    # write resent by the SDK after a lost answer carries it too.
    mine = uuid.uuid4().hex
    ends = time.time() + remaining_seconds(context)
    while True:
        held = _take(table, message_id, mine, ends, ttl_days)
        if held is None or held.get("runner", {}).get("S") == mine:
            break  # ours to run (our own write, resent after a lost answer, included)
        if held.get("status", {}).get("S") == COMPLETE:
            return _duplicate(table, message_id, held, ends)
        lease = float(held.get("lease_until", {}).get("N", "0"))
        if lease + LEASE_SKEW_SECONDS < time.time():
            raise MessageOutcomeUnknown(
                f"message {message_id}: an earlier run ended without saying whether it "
                "applied it (its invocation timed out or died); not run again"
            )
        # another invocation is running it: wait for its end (its result, or its failure
        # deleting the record), within this invocation's time
        if time.time() + 1 >= ends - WAIT_MARGIN_SECONDS:
            raise MessageInProgress(f"message {message_id} is being applied by another run")
        now = time.time()
        time.sleep(max(0.1, min(1.0, lease + LEASE_SKEW_SECONDS - now, ends - now - 1)))
    try:
        result = run()
    except BaseException:
        _forget(table, message_id, mine)
        raise
    _complete(table, message_id, mine, result)
    return result


def _key(message_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"RECEIVED#{message_id}"}}


def _take(
    table: str, message_id: str, mine: str, ends: float, ttl_days: int
) -> dict[str, Any] | None:
    """None: the message is ours to run (never seen, or its last run failed); else the
    record that holds it."""
    now = time.time()
    try:
        client("dynamodb").put_item(
            TableName=table,
            Item={
                **_key(message_id),
                "status": {"S": IN_PROGRESS},
                "runner": {"S": mine},
                "lease_until": {"N": f"{ends:.3f}"},
                TTL_ATTRIBUTE: {"N": str(int(now + ttl_days * 86400))},
            },
            ConditionExpression="attribute_not_exists(pk)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except ClientError as exc:
        if aws_code(exc) != "ConditionalCheckFailedException":
            _forget(table, message_id, mine)  # (it may have landed, its answer lost)
            raise
        held: dict[str, Any] = exc.response.get("Item") or {}  # type: ignore[assignment]
        if not held:  # (ReturnValuesOnConditionCheckFailure: boto3 >= 1.35, the floor)
            raise MessageInProgress(f"message {message_id} is held by another run") from exc
        return held
    except Exception:
        _forget(table, message_id, mine)  # (it may have landed, its answer lost)
        raise
    return None


def _duplicate(table: str, message_id: str, held: dict[str, Any], ends: float) -> Any:
    metrics.emit(PATTERN, {"message_id": message_id}, DuplicateDropped=1)
    log("INFO", "duplicate dropped", message_id=message_id)
    _count_redelivery(table, message_id, ends)
    if "result" in held:
        return json.loads(held["result"]["S"])
    return {"id": message_id, "duplicate": True}


COUNT_MARGIN_SECONDS = 3.0  # left of this invocation to count a redelivery; else not counted


@functools.cache
def _counter() -> Any:
    """A client for the count alone: one send, a second to connect and to answer (the
    duplicate's answer waits for it; a count lost is a count, not an effect)."""
    import boto3
    from botocore.config import Config

    config = Config(retries={"total_max_attempts": 1}, connect_timeout=1, read_timeout=1)
    return boto3.client("dynamodb", config=config)


def _count_redelivery(table: str, message_id: str, ends: float) -> None:
    """Counted on the record, for the audit (handlers/audit.py: sent more than once), at
    least once per redelivery (the SDK may send the ADD again). Best effort: a count is
    never why a duplicate's answer comes late (only with time to spare) or not at all."""
    if time.time() + COUNT_MARGIN_SECONDS > ends:
        log("WARNING", "redelivery not counted: no time left", message_id=message_id)
        return
    try:
        _counter().update_item(
            TableName=table,
            Key=_key(message_id),
            UpdateExpression=f"ADD {REDELIVERED} :one",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
    except Exception as exc:  # (a count: never the reason a duplicate is not dropped)
        log("WARNING", "redelivery not counted", message_id=message_id, exc=exc)


def _complete(table: str, message_id: str, mine: str, result: Any) -> None:
    """COMPLETE with the result. Should the write fail after the SDK's retries, the result
    is still returned (the effect happened) and logged as an ERROR: the record stays
    IN_PROGRESS, so a later delivery answers MessageOutcomeUnknown (never a second run)."""
    values: dict[str, Any] = {":done": {"S": COMPLETE}, ":me": {"S": mine}}
    update = "SET #s = :done REMOVE lease_until"
    encoded = json.dumps(result, separators=(",", ":"), default=str)
    if len(encoded.encode()) <= MAX_RESULT_BYTES:
        update = "SET #s = :done, #r = :result REMOVE lease_until"
        values[":result"] = {"S": encoded}
    try:
        client("dynamodb").update_item(
            TableName=table,
            Key=_key(message_id),
            UpdateExpression=update,
            ConditionExpression="runner = :me",
            ExpressionAttributeNames={
                "#s": "status",
                **({"#r": "result"} if ":result" in values else {}),
            },
            ExpressionAttributeValues=values,
        )
    except Exception as exc:
        log(
            "ERROR",
            "message applied, not recorded COMPLETE",
            message_id=message_id,
            exc=exc,
        )


FORGET_ATTEMPTS = 4


def _forget(table: str, message_id: str, mine: str) -> None:
    """The run failed (or never started): no record, so the next delivery runs it. Tried
    with back-off: a record left behind answers every later delivery MessageOutcomeUnknown
    until its TTL."""
    for attempt in range(FORGET_ATTEMPTS):
        try:
            client("dynamodb").delete_item(
                TableName=table,
                Key=_key(message_id),
                ConditionExpression="runner = :me",
                ExpressionAttributeValues={":me": {"S": mine}},
            )
            return
        except ClientError as exc:
            if aws_code(exc) == "ConditionalCheckFailedException":
                return  # not ours (or gone): nothing to forget
            last: Exception = exc
        except Exception as exc:
            last = exc
        if attempt < FORGET_ATTEMPTS - 1:
            time.sleep(0.2 * 2**attempt)
    log("ERROR", "failed run's record not deleted", message_id=message_id, exc=last)
