"""Pattern 3, the precise scheduler: messages, their status machine, and their start.

Registration (the API's, handlers/scheduler_api.py), cancel and the stream starter live
here; the sweep in handlers/scheduler_sweep.py; the claim, delivery and final write in
handlers/scheduler_slots.py; the record's key and status in handlers/scheduler_index.py.

One table: `MESSAGE#<id>` items (status, publish_at, channel, parameters) and
`INVOKER#<channel>` items (the channel's target Lambda ARN). Every status change is
a conditional write on the expected current status:

    RESERVED --sweep--> STANDBY --API or stream starter--> its second's slot execution
                        (`slot-<epoch>`), or its own (`<id>`), Waits
                        (or the next sweep, should the stream never start it)
    STANDBY --the slot function's claim, LEAD_SECONDS before publishTime--> FIRING
            --> DONE | FAILED | UNKNOWN   (handlers/scheduler_slots.py: sent, its
                outcome unseen, and not sent again: handlers/targets.py)
    RESERVED | STANDBY --DELETE--> CANCELLED   (its own execution, if started, is stopped)

Executions are named by the second or the message id, so a redelivered stream record or
an overlapping sweep never starts a second one, and the claim (STANDBY -> FIRING) means
a cancel that wins the race is never fired.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import hashlib
import json
import math
import time
import uuid
from typing import Any

from exactly_once.handlers import scheduler_index, scheduler_store
from exactly_once.handlers import scheduler_slots as slots
from exactly_once.handlers.errors import BadEvent, ClientError, Conflict, NotFound, aws_code
from exactly_once.handlers.executions import DUPLICATE, Outcome, execution_arn, start_once
from exactly_once.handlers.names import execution_name
from exactly_once.handlers.runtime import client, lambda_handler, log, request_id
from exactly_once.handlers.scheduler_index import (
    ENDED,
    PATTERN,
    STATUS_INDEX,
    Status,
    message_key,
)
from exactly_once.handlers.settings import Settings

# re-exported: components and tests name the record's pieces from here
__all__ = ["PATTERN", "STATUS_INDEX", "Status", "message_key"]
MAX_PARAMETERS_BYTES = 32 * 1024
MAX_HORIZON_SECONDS = 364 * 24 * 3600  # a STANDARD execution lives at most a year


@dataclasses.dataclass(frozen=True)
class SchedulerSettings(Settings):
    """Of the API, the sweep and the stream starter alike."""

    table: str
    state_machine_arn: str
    """The slot clock's state machine (handlers/scheduler_slots.py)."""
    window_seconds: int
    late_tolerance_seconds: int
    """How far in the past a publish time may be when the request arrives: such a message
    is accepted and fired at once, recorded as late (its lateness on arrival)."""
    join_slots: bool = True
    """False: every message on its own execution, a slot of one (the benchmarks'
    alternative: a StartExecution and its transitions per message)."""
    retention_days: int = 7
    """How long an ended message's record is kept (GET answers it, a replayed registration
    finds it): written on each message, DynamoDB's TTL removes it that long after its end
    or its time, whichever is later (scheduler_store.expiry); 0 keeps it for ever."""
    warm_ahead_from: int = 1000
    """A second of at least this many messages is warmed ahead (the API or the stream
    starter starts its warm-up execution: `warm_dense`); 0: never."""


# -- validation ------------------------------------------------------------------------
def publish_time(value: Any, received: float | None, tolerance: float = 0) -> float:
    """Epoch seconds from a number or an ISO 8601 string with a time zone; at most
    `tolerance` seconds before `received`, when the request arrived (None: any time, for a
    replay of a stored registration), and at most a STANDARD execution's life ahead."""
    if isinstance(value, bool) or value is None:
        raise BadEvent("publishTime is required: epoch seconds or ISO 8601 with a time zone")
    if isinstance(value, int | float):
        seconds = float(value)
        if not math.isfinite(seconds):  # Python's json reads NaN and Infinity
            raise BadEvent(f"publishTime must be a finite number, not {value}")
    elif isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise BadEvent(f"publishTime {value!r} is neither epoch seconds nor ISO 8601") from None
        if parsed.tzinfo is None:
            raise BadEvent(f"publishTime {value!r} has no time zone (add Z or +00:00)")
        seconds = parsed.timestamp()
    else:
        raise BadEvent(f"publishTime must be a number or a string, not {type(value).__name__}")
    if received is None:
        return seconds
    if seconds < received - tolerance:
        raise BadEvent(
            f"publishTime is {received - seconds:.0f}s in the past when the request arrived; "
            f"a late message is accepted (and fired at once) up to {tolerance:g}s late "
            "(the scheduler's late_tolerance_seconds)"
        )
    if seconds > received + MAX_HORIZON_SECONDS:
        raise BadEvent("publishTime is more than 364 days ahead")
    return seconds


FIELDS = frozenset({"publishTime", "channel", "parameters"})  # a message's, in a request


def validate(body: Any, received: float | None, tolerance: float = 0) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadEvent("the body must be a JSON object")
    unknown = sorted(set(body) - FIELDS)
    if unknown:  # never dropped silently: a misplaced key would register a message each time
        hint = (
            " (a single POST takes its key in the Idempotency-Key header)"
            if "idempotencyKey" in unknown
            else ""
        )
        raise BadEvent(
            f"unknown fields {', '.join(unknown)}{hint}: a message has only "
            f"{', '.join(sorted(FIELDS))}"
        )
    channel = body.get("channel")
    if not isinstance(channel, str) or not channel:
        raise BadEvent("channel is required (a string)")
    parameters = body.get("parameters", {})
    encoded = json.dumps(parameters, separators=(",", ":"), sort_keys=True)
    if len(encoded.encode()) > MAX_PARAMETERS_BYTES:
        raise BadEvent(f"parameters are over {MAX_PARAMETERS_BYTES} bytes")
    return {
        "publish_at": publish_time(body.get("publishTime"), received, tolerance),
        "channel": channel,
        "parameters": encoded,
    }


# -- the store ---------------------------------------------------------------------------
def _ddb() -> Any:
    return client("dynamodb")


def channel_of(config: SchedulerSettings, channel: str) -> dict[str, Any] | None:
    """The channel's item: its target's ARN, and `redeliver` when its target drops a
    redelivery (handlers/targets.py: resend_policy)."""
    key = {"pk": {"S": f"INVOKER#{channel}"}}
    item: dict[str, Any] | None = _ddb().get_item(TableName=config.table, Key=key).get("Item")
    return item


def message_id_for(idempotency_key: str | None) -> str:
    """A client key maps to one id forever; without one, a fresh id."""
    if idempotency_key:
        return str(uuid.UUID(hashlib.sha256(idempotency_key.encode()).hexdigest()[:32]))
    return str(uuid.uuid4())


def register(
    config: SchedulerSettings,
    body: Any,
    idempotency_key: str | None = None,
    now: float | None = None,
    context: Any = None,
    received: float | None = None,
) -> tuple[dict, bool]:
    """(message, created): a retried registration with the same key returns the first.

    A message is judged by when its request arrived (`received`: API Gateway's request
    time), not by this handler's clock after a cold start or a queue of requests: one
    whose publish time had passed on arrival, by up to the configured tolerance, is
    accepted, fired at once (its Wait's timestamp has passed) and recorded as late. A
    message due within the window is started here (`start_soon`), so a near-term
    message never waits for the stream; the stream's start is then a harmless duplicate."""
    now = time.time() if now is None else now
    # Never judged later than this handler's clock (API Gateway's may run ahead of it).
    received = now if received is None else min(received, now)
    try:
        fields = validate(body, received, config.late_tolerance_seconds)
    except BadEvent:
        # A client's retry may come after the publish time (a timeout, a slow network):
        # under its Idempotency-Key it still gets the message it registered.
        replayed = _replay(config, body, idempotency_key) if idempotency_key else None
        if replayed is None:
            raise
        start_soon(config, replayed, context)
        return to_message(replayed), False
    found = channel_of(config, fields["channel"])
    if found is None:
        raise BadEvent(f"unknown channel {fields['channel']!r}")
    message_id = message_id_for(idempotency_key)
    status = (
        Status.STANDBY if fields["publish_at"] <= now + config.window_seconds else Status.RESERVED
    )
    fingerprint = _fingerprint(fields)
    item: dict[str, Any] = {
        **message_key(message_id),
        "id": {"S": message_id},
        **scheduler_store.placed(status, message_id),
        "publish_at": {"N": ms_up(fields["publish_at"])},
        "channel": {"S": fields["channel"]},
        "target_arn": found["target_arn"],
        "parameters": {"S": fields["parameters"]},
        "fingerprint": {"S": fingerprint},
        "created_at": {"N": f"{now:.3f}"},
    }
    if config.retention_days:  # (kept with the message, as its channel's rule is)
        item[scheduler_store.KEEP_FOR] = {"N": str(config.retention_days * 86400)}
    if found.get("redeliver", {}).get("BOOL"):  # the channel's rule, kept with the message
        item["redeliver"] = {"BOOL": True}
    if fields["publish_at"] < received:
        item["late_on_arrival"] = {"N": f"{received - fields['publish_at']:.3f}"}
    if not scheduler_store.create(_ddb(), config.table, item):
        stored = _stored(config, message_id, fingerprint)
        if stored is None:
            raise Conflict("this Idempotency-Key was used for a different message") from None
        # A replay may follow a registration whose start never happened (a crash, a throttle).
        start_soon(config, stored, context)
        # this very put, resent by the SDK after its answer was lost, is still a creation
        return to_message(stored), stored.get("created_at") == item["created_at"]
    start_soon(config, item, context)
    return to_message(item), True


def ms_up(seconds: float) -> str:
    """Epoch seconds to the millisecond, rounded up: a stored time is never before the one
    asked for (fired at it, never early)."""
    return f"{math.ceil(round(seconds * 1000, 6)) / 1000:.3f}"


def _fingerprint(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


def _stored(config: SchedulerSettings, message_id: str, fingerprint: str) -> dict[str, Any] | None:
    """The stored item of this exact registration (same fingerprint), if any."""
    stored = read_item(config, message_id)
    if stored is None or stored.get("fingerprint", {}).get("S") != fingerprint:
        return None
    return stored


def _replay(config: SchedulerSettings, body: Any, idempotency_key: str) -> dict[str, Any] | None:
    """The stored item this exact registration made earlier, if any (time not checked)."""
    try:
        fields = validate(body, None)
    except BadEvent:
        return None
    return _stored(config, message_id_for(idempotency_key), _fingerprint(fields))


def start_soon(config: SchedulerSettings, item: dict[str, Any], context: Any) -> None:
    """Start a STANDBY message's execution now, best effort: the stream (and, failing it,
    the sweep) starts it too, under the same name, so a failure here only costs the head
    start. Never fails a registration that is already stored: the client would register
    again, and without an Idempotency-Key that would be a second message."""
    if item["status"]["S"] != Status.STANDBY:
        return
    try:
        start(config, item, context)
    except Exception as exc:  # any failure: the stream and the sweep start it instead
        log("WARNING", "start deferred to the stream", message_id=item["id"]["S"], exc=exc)


def to_message(item: dict[str, Any]) -> dict[str, Any]:
    message = {
        "id": item["id"]["S"],
        "status": item["status"]["S"],
        "publishTime": float(item["publish_at"]["N"]),
        "channel": item["channel"]["S"],
        "parameters": json.loads(item["parameters"]["S"]),
        "fingerprint": item.get("fingerprint", {}).get("S"),
    }
    for name in ("fired_at", "error"):
        if name in item:
            message[name] = next(iter(item[name].values()))
    if "late_on_arrival" in item:
        message["lateOnArrival"] = float(item["late_on_arrival"]["N"])
    return message


def read_item(config: SchedulerSettings, message_id: str) -> dict[str, Any] | None:
    return (
        _ddb()
        .get_item(TableName=config.table, Key=message_key(message_id), ConsistentRead=True)
        .get("Item")
    )


def get(config: SchedulerSettings, message_id: str) -> dict[str, Any] | None:
    item = read_item(config, message_id)
    return to_message(item) if item else None


def transition(
    config: SchedulerSettings,
    message_id: str,
    expected: tuple[Status, ...],
    new: Status,
    unsent: bool = False,
) -> bool:
    """Set status `new` if the status is one of `expected` (and, `unsent`, no send of it
    was counted: one may have reached its target); False otherwise. An end expires by the
    retention registered with the message (its time and retention never change: read
    before the write, they are the write's)."""
    expires = None
    if new in ENDED:
        item = read_item(config, message_id)
        expires = scheduler_store.expiry(item, time.time()) if item else None
    return scheduler_store.move(_ddb(), config.table, message_id, expected, new, unsent, expires)


def cancel(config: SchedulerSettings, message_id: str) -> dict[str, Any]:
    """Cancel a RESERVED or STANDBY message; its Wait, if started, is stopped too."""
    cancelled = (Status.RESERVED, Status.STANDBY), Status.CANCELLED
    if not transition(config, message_id, *cancelled, unsent=True):
        item = read_item(config, message_id)
        if item is None:
            raise NotFound(f"no message {message_id}")
        message = to_message(item)
        if message["status"] == Status.CANCELLED:
            return message
        if "sends" in item and message["status"] == Status.STANDBY:
            # given back by a claimant out of time after a send whose outcome it never saw
            raise Conflict("message may have been delivered (a send's outcome is unknown)")
        raise Conflict(f"message is {message['status']}; only RESERVED or STANDBY can be cancelled")
    # Its claim would find it CANCELLED anyway; stopping its own Wait just ends it early
    # (a slot's execution is its second's other messages' too: it runs on).
    _stop(execution_arn(config.state_machine_arn, execution_name(message_id)))
    ended = get(config, message_id)
    assert ended is not None
    return ended


# -- the stream starter: each STANDBY message's slot (or its own execution), started once --
def start(
    config: SchedulerSettings,
    image: dict[str, Any],
    context: Any,
    written: float | None = None,
) -> Outcome:
    """Start what fires a STANDBY message: its second's slot clock while the slot has not
    read its messages yet (`scheduler_slots.join_by`), else a slot of one, its own
    execution, named by its id. Either is started once, however often asked (an overdue
    message's next attempt is its slot's: the sweep's). `written`: when the message became
    STANDBY (its stream record's time): one written before its slot's cutoff is in the
    index the slot reads, however late this start comes, so its slot (started now if
    nobody has) fires it: no slot of one."""
    publish_at, message_id = float(image["publish_at"]["N"]), image["id"]["S"]
    slot = slots.slot_of(publish_at)
    if "first_sent" in image:
        # Claimed once, and given back (its release's stream record, or a sweep's read):
        # its claimant's Fire retry, or the sweep's retry of its slot, takes it up; a slot
        # of one would only add an invocation against a target that may be refusing it.
        name = slots.slot_name(slot)
        return Outcome(DUPLICATE, name, execution_arn(config.state_machine_arn, name), 0)
    joins = config.join_slots
    # (the record's time is rounded down to the second: written before the cutoff for sure)
    indexed = written is not None and written + 1 <= slots.join_by(slot)
    if joins and (indexed or time.time() < slots.join_by(slot)):
        outcome = _start_slot(config.state_machine_arn, slot, context)
        # In time only if the slot had not woken when the start returned (a slow call
        # may straddle the cutoff), or the message was in its index by then and the slot
        # has not yet read it a second time, or fired it: otherwise its own execution too;
        # the claim decides.
        if time.time() < slots.join_by(slot) or (indexed and not _missed(config, image, slot)):
            log("DEBUG", outcome.status, message_id=message_id, execution=outcome.name)
            return outcome
    outcome = start_once(
        config.state_machine_arn,
        message_id,
        slots.slot_input(slot, message_id),
        request_id(context),
    )
    # (a line per message at DEBUG: its caller's summary is the INFO line, one per batch)
    log("DEBUG", outcome.status, message_id=message_id, execution=outcome.name)
    if outcome.status == "STARTED":
        _stop_if_cancelled(config, message_id, outcome.execution_arn)
    return outcome


def _missed(config: SchedulerSettings, image: dict[str, Any], slot: int) -> bool:
    """Whether a message its slot should have read is still STANDBY after the slot's
    second read, never claimed (the index having missed it twice): then it gets its own
    execution. One claimed and given back (`first_sent`: a target that throttled it past
    its deadline, a Fire that failed) is its slot's retry's, or the sweep's: a slot of
    one each would only add an invocation per message against a target already refusing
    (a late stream on LocalStack so started 200 beside a throttled burst of 1,000)."""
    if time.time() < slot + 1:
        return False
    item = read_item(config, image["id"]["S"])
    return item is not None and item["status"]["S"] == Status.STANDBY and "first_sent" not in item


# Slots this sandbox started or found started: a burst of one second's messages costs one
# StartExecution per sandbox, not one per message (StartExecution's token bucket is shared
# by the whole account and Region).
_STARTED_SLOTS: dict[tuple[str, int], Outcome] = {}


def _start_slot(machine_arn: str, slot: int, context: Any) -> Outcome:
    known = _STARTED_SLOTS.get((machine_arn, slot))
    if known is not None:
        return dataclasses.replace(known, status="DUPLICATE")
    outcome = start_once(
        machine_arn, slots.slot_name(slot), slots.slot_input(slot), request_id(context)
    )
    if len(_STARTED_SLOTS) > 10_000:  # a long-lived sandbox: forget the old ones
        _STARTED_SLOTS.clear()
    _STARTED_SLOTS[(machine_arn, slot)] = outcome
    return outcome


# Per sandbox: how many of each second's messages it started, and the seconds it warmed.
_SEEN: collections.Counter[tuple[str, int]] = collections.Counter()
_WARMED: set[tuple[str, int]] = set()


def forget_sandbox() -> None:
    """A new sandbox's memory: no slot started or warmed, no message seen (tests)."""
    _STARTED_SLOTS.clear()
    _SEEN.clear()
    _WARMED.clear()


def warm_dense(config: SchedulerSettings, messages: list[dict[str, Any]], context: Any) -> None:
    """Start the warm-up execution of each dense second among `messages` (STANDBY ones a
    request registered, or a stream batch started: scheduler_slots.WARM_LEAD_SECONDS):
    every PROBE_EVERY of a second's messages this sandbox has seen, one Query counts the
    lane of the last of them, LANES times which estimates the second (at most one Query
    a second a call); from `warm_ahead_from` on, its warm-up is started (once: by name).
    A failure is logged, never raised: the messages are stored and started, and their
    slot fires them warmed or not."""
    if not config.warm_ahead_from:
        return
    by_slot: dict[int, list[str]] = collections.defaultdict(list)
    for message in messages:
        if message.get("status") == Status.STANDBY:
            by_slot[slots.slot_of(float(message["publishTime"]))].append(message["id"])
    if len(_SEEN) > 10_000:  # a long-lived sandbox: forget the old ones
        _SEEN.clear()
        _WARMED.clear()
    for slot, message_ids in by_slot.items():
        key = (config.state_machine_arn, slot)
        before = _SEEN[key]
        _SEEN[key] += len(message_ids)
        if key in _WARMED or before // slots.PROBE_EVERY == _SEEN[key] // slots.PROBE_EVERY:
            continue
        if time.time() >= slot - slots.WARM_LEAD_SECONDS:  # too late to be done by its wake
            continue
        try:
            lane = scheduler_index.lane(Status.STANDBY, message_ids[-1])
            listed = scheduler_index.count(_ddb(), config.table, lane, slot, slot + 0.999)
            if listed * scheduler_index.LANES < config.warm_ahead_from:
                continue
            warm = start_once(
                config.state_machine_arn,
                slots.warm_name(slot),
                slots.warm_input(slot),
                request_id(context),
            )
        except Exception as exc:
            log("WARNING", "could not warm a dense second", slot=slot, exc=exc)
            continue
        _WARMED.add(key)
        log(
            "INFO",
            "warming a dense second",
            slot=slot,
            estimate=listed * scheduler_index.LANES,
            status=warm.status,
        )


def _stop_if_cancelled(config: SchedulerSettings, message_id: str, arn: str) -> None:
    """A cancel between the STANDBY image this start read and the start itself found no
    execution to stop: stop it now, rather than let it wait to find CANCELLED at its Claim
    (harmless, but an execution nobody needs)."""
    item = read_item(config, message_id)
    if item is not None and item["status"]["S"] != Status.CANCELLED:
        return
    _stop(arn)
    log("INFO", "stopped: cancelled while it started", message_id=message_id)


def _stop(arn: str) -> None:
    """Stop a cancelled message's execution; one that never started or ended is fine."""
    try:
        client("stepfunctions").stop_execution(executionArn=arn, cause="message cancelled")
    except ClientError as exc:
        if aws_code(exc) not in ("ExecutionDoesNotExist", "ExecutionNotFound"):
            raise


@lambda_handler
def stream_handler(event: Any, context: Any) -> dict[str, Any]:
    return start_records(SchedulerSettings.current(), event, context)


def start_records(config: SchedulerSettings, event: Any, context: Any) -> dict[str, Any]:
    """Records arrive filtered to STANDBY images (components/scheduler.py: STREAM_FILTERS).
    A failure raises, so the event source mapping retries and bisects the batch; starting
    again is harmless (same name)."""
    outcomes, ids, standby = [], [], []
    for record in event.get("Records", []):
        change = record.get("dynamodb", {})
        image = change.get("NewImage") or {}
        if image.get("status", {}).get("S") == Status.STANDBY:
            written = change.get("ApproximateCreationDateTime")
            when = float(written) if isinstance(written, int | float) else None
            outcomes.append(start(config, image, context, written=when).status)
            ids.append(image["id"]["S"])
            at = float(image["publish_at"]["N"])
            standby.append({"id": image["id"]["S"], "status": Status.STANDBY, "publishTime": at})
    warm_dense(config, standby, context)
    # one line for the batch: its messages (which a search for one finds) and the outcomes
    log("INFO", "records started", ids=ids, **collections.Counter(outcomes))
    return {"outcomes": outcomes}
