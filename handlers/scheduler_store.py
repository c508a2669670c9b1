"""The scheduler's message record, written here only: each write a named transition whose
condition is the rule that makes it safe, and the status index's lane following the
status in every one of them (scheduler_index: an ended message leaves the index).

    create            -> RESERVED | STANDBY       (API: a new key only)
    move              RESERVED -> STANDBY, RESERVED | STANDBY -> CANCELLED (unsent)
    claim             STANDBY | FIRING (own, or its lease ended) -> FIRING, a send counted
                      (in its STANDBY lane: the index unwritten)
    count_send        FIRING (own) -> FIRING, one more send, within the budget
    renew             FIRING (own) -> FIRING, its lease moved on
    finish            FIRING (own) -> DONE | FAILED | UNKNOWN
    release           FIRING (own) -> STANDBY, an unmade send's count dropped
    mark_unrecorded   FIRING (a named claimant's) -> FIRING, never taken over
    add_lane          any pending status, its lane (once, after an upgrade)
    settle            FIRING (marked unrecorded) -> DONE | FAILED | UNKNOWN, by an operator

Each takes the caller's client (sized for it: a slot's threads, the keeper's short
timeouts, an operator's session) and answers what the write found; retries, logging and
what an answer means to the caller stay with the caller. A refused condition is an
answer (False, or the item as it was), never an exception; any other error is raised.
"""

from __future__ import annotations

from typing import Any

from exactly_once.handlers.errors import ClientError, aws_code
from exactly_once.handlers.scheduler_index import ENDED, LANE, Status, lane, message_key

Item = dict[str, Any]
# An ended message's expiry (the table's TTL attribute): its record kept `keep_for` seconds
# (the API writes the component's `retention_days` on the item) past its end, then removed
# by DynamoDB, free, within a few days of it ("Using time to live (TTL) in DynamoDB").
TTL_ATTRIBUTE = "expires_at"
KEEP_FOR = "keep_for"


def kept_for(item: Item) -> float | None:
    """How long a message's record is kept past its end: None, for ever (registered with
    no retention, or before retentions)."""
    keep = item.get(KEEP_FOR, {}).get("N")
    return float(keep) if keep else None


def expiry(item: Item, now: float) -> int | None:
    """When a message ending `now` expires (`kept_for`), if ever: that long past its end or
    its time, whichever is later. A registration replayed under its key after the record
    is gone must find its time long past (refused, never a second message): a message
    cancelled weeks ahead of its time is kept until then, and its retention beyond
    (longer than the late tolerance, as SchedulerArgs checks)."""
    return expires_at(kept_for(item), float(item.get("publish_at", {}).get("N", 0)), now)


def expires_at(keep: float | None, publish_at: float, now: float) -> int | None:
    """`expiry`, of a message kept `keep` seconds (None: for ever) due at `publish_at`."""
    return int(max(now, publish_at) + keep) + 1 if keep else None


def _expiring(update: str, values: dict[str, Any], expires_at: int | None) -> str:
    """`update` ("SET ... REMOVE ...") also setting the expiry, if any, last of its SET."""
    if expires_at is None:
        return update
    values[":expires"] = {"N": str(expires_at)}
    sets, removes = update.split(" REMOVE ", 1) if " REMOVE " in update else (update, "")
    return f"{sets}, {TTL_ATTRIBUTE} = :expires" + (f" REMOVE {removes}" if removes else "")


def _refused(exc: ClientError) -> bool:
    return aws_code(exc) == "ConditionalCheckFailedException"


def _as_it_was(exc: ClientError) -> Item:
    """The item a refused write found (ReturnValuesOnConditionCheckFailure: ALL_OLD)."""
    found: Item = exc.response.get("Item") or {}  # type: ignore[assignment]
    return dict(found)


def _conditional(write: Any, **request: Any) -> Item | None:
    """`write(**request)`, a conditional write: None if it landed, else the item as it was
    (empty unless the request asked for it); any error but a refused condition raised."""
    try:
        write(**request)
    except ClientError as exc:
        if not _refused(exc):
            raise
        return _as_it_was(exc)
    return None


def create(ddb: Any, table: str, item: Item) -> bool:
    """A new message (its `status` and `lane` set by `placed`): False if its key exists."""
    written = _conditional(
        ddb.put_item, TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)"
    )
    return written is None


def placed(status: Status, message_id: str) -> Item:
    """A new item's status and lane."""
    return {"status": {"S": status}, LANE: {"S": lane(status, message_id)}}


def move(
    ddb: Any,
    table: str,
    message_id: str,
    expected: tuple[Status, ...],
    new: Status,
    unsent: bool = False,
    expires_at: int | None = None,
) -> bool:
    """Status `new` if it is one of `expected` (and, `unsent`, no send of it was counted:
    one may have reached its target); False otherwise. An ended one expires at
    `expires_at`, if given."""
    expecting = {f":e{i}": {"S": status} for i, status in enumerate(expected)}
    values: dict[str, Any] = {**expecting, ":new": {"S": new}}
    if new in ENDED:
        update = _expiring("SET #s = :new REMOVE lane", values, expires_at)
    else:
        update = "SET #s = :new, lane = :lane"
        values[":lane"] = {"S": lane(new, message_id)}
    return (
        _conditional(
            ddb.update_item,
            TableName=table,
            Key=message_key(message_id),
            UpdateExpression=update,
            ConditionExpression=f"#s IN ({', '.join(expecting)})"
            + (" AND attribute_not_exists(sends)" if unsent else ""),
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues=values,
        )
        is None
    )


def claim(
    ddb: Any,
    table: str,
    message_id: str,
    me: str,
    lease: float,
    first_send: str,
    now: float,
    expired: float,
) -> tuple[Item | None, Item]:
    """STANDBY -> FIRING for `me` until `lease`; or FIRING taken over from a claimant whose
    lease ended before `expired` (and never marked unrecorded); or `me`'s own earlier
    claim. Counts `first_send` (and `first_sent` = `now`, if none was before). (the item
    as claimed, {}) or (None, the item as it was)."""
    try:
        answer = ddb.update_item(
            TableName=table,
            Key=message_key(message_id),
            UpdateExpression=(
                # (no `lane`: a FIRING message stays in its STANDBY lane, the index
                # unwritten; scheduler_index)
                "SET #s = :firing, claimed_by = :me, lease = :lease, "
                "first_sent = if_not_exists(first_sent, :now) ADD sends :token"
            ),
            ConditionExpression=(
                "#s = :standby OR (#s = :firing AND (claimed_by = :me OR "
                "(lease < :expired AND attribute_not_exists(unrecorded))))"
            ),
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":firing": {"S": Status.FIRING},
                ":standby": {"S": Status.STANDBY},
                ":me": {"S": me},
                ":lease": {"N": f"{lease:.3f}"},
                ":expired": {"N": f"{expired:.3f}"},
                ":now": {"N": f"{now:.3f}"},
                ":token": {"SS": [first_send]},
            },
            ReturnValues="ALL_NEW",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except ClientError as exc:
        if not _refused(exc):
            raise
        return None, _as_it_was(exc)
    return dict(answer["Attributes"]), {}


def count_send(
    ddb: Any, table: str, message_id: str, me: str, token: str, budget: int
) -> Item | None:
    """One more send on `me`'s claim (`token`), while fewer than `budget` are counted (or
    this one was, its answer lost): None, or the item as it was when refused."""
    return _conditional(
        ddb.update_item,
        TableName=table,
        Key=message_key(message_id),
        UpdateExpression="ADD sends :token",
        ConditionExpression=(
            "#s = :firing AND claimed_by = :me AND "
            "(contains(sends, :mine) OR size(sends) < :budget)"
        ),
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={
            ":token": {"SS": [token]},
            ":mine": {"S": token},
            ":firing": {"S": Status.FIRING},
            ":me": {"S": me},
            ":budget": {"N": str(budget)},
        },
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )


def renew(ddb: Any, table: str, message_id: str, me: str, lease: float) -> bool:
    """`me`'s claim held until `lease`: False if it is no longer `me`'s."""
    return (
        _conditional(
            ddb.update_item,
            TableName=table,
            Key=message_key(message_id),
            UpdateExpression="SET lease = :lease",
            ConditionExpression="#s = :firing AND claimed_by = :me",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":lease": {"N": f"{lease:.3f}"},
                ":firing": {"S": Status.FIRING},
                ":me": {"S": me},
            },
        )
        is None
    )


def finish(
    ddb: Any,
    table: str,
    message_id: str,
    me: str,
    status: Status,
    at: str | None = None,
    error: str | None = None,
    expires_at: int | None = None,
) -> Item | None:
    """`me`'s claim ended: DONE (fired `at`), or FAILED or UNKNOWN with `error`, the message
    leaving the status index (and expiring at `expires_at`, if given). None, or the item
    as it was when refused (no longer `me`'s, or already ended by this very write, its
    answer lost)."""
    if status == Status.DONE:
        update = "SET #s = :done, fired_at = :at REMOVE lane"
        values: dict[str, Any] = {":done": {"S": status}, ":at": {"S": at or ""}}
        names = {"#s": "status"}
    else:
        update = "SET #s = :ended, #e = :error REMOVE lane"
        values = {":ended": {"S": status}, ":error": {"S": error or ""}}
        names = {"#s": "status", "#e": "error"}
    return _conditional(
        ddb.update_item,
        TableName=table,
        Key=message_key(message_id),
        UpdateExpression=_expiring(update, values, expires_at),
        ConditionExpression="#s = :firing AND claimed_by = :me",
        ExpressionAttributeNames=names,
        ExpressionAttributeValues={**values, ":firing": {"S": Status.FIRING}, ":me": {"S": me}},
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )


def release(ddb: Any, table: str, message_id: str, me: str, token: str | None = None) -> bool:
    """FIRING -> STANDBY, `me`'s claim given back (`token`, the count of a send never made,
    dropped): False if it was not `me`'s. (Its lane is written for a message claimed by an
    earlier release, in a FIRING lane of its own: scheduler_index.)"""
    return (
        _conditional(
            ddb.update_item,
            TableName=table,
            Key=message_key(message_id),
            UpdateExpression="SET #s = :standby, lane = :lane REMOVE claimed_by, lease"
            + (" DELETE sends :token" if token else ""),
            ConditionExpression="#s = :firing AND claimed_by = :me",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":standby": {"S": Status.STANDBY},
                ":firing": {"S": Status.FIRING},
                ":me": {"S": me},
                ":lane": {"S": lane(Status.STANDBY, message_id)},
                **({":token": {"SS": [token]}} if token else {}),
            },
        )
        is None
    )


def mark_unrecorded(ddb: Any, table: str, message_id: str, claimed_by: str) -> bool:
    """A message its claimant delivered and could not record: no claim takes it over (it
    stays FIRING, Overdue). False if it moved on meanwhile."""
    return (
        _conditional(
            ddb.update_item,
            TableName=table,
            Key=message_key(message_id),
            UpdateExpression="SET unrecorded = :true",
            ConditionExpression="#s = :firing AND claimed_by = :by",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":true": {"BOOL": True},
                ":firing": {"S": Status.FIRING},
                ":by": {"S": claimed_by},
            },
        )
        is None
    )


def add_lane(ddb: Any, table: str, message_id: str, status: str) -> bool:
    """A pending message written before the index had lanes gets its status's lane, if its
    status is still `status` and it has none: False if it moved on (then written with its
    lane)."""
    return (
        _conditional(
            ddb.update_item,
            TableName=table,
            Key=message_key(message_id),
            UpdateExpression="SET #lane = :lane",
            ConditionExpression="#s = :status AND attribute_not_exists(#lane)",
            ExpressionAttributeNames={"#s": "status", "#lane": LANE},
            ExpressionAttributeValues={
                ":lane": {"S": lane(status, message_id)},
                ":status": {"S": status},
            },
        )
        is None
    )


# What an operator may end a message as: what its target did (docs/runbook.md).
SETTLED = (Status.DONE, Status.FAILED, Status.UNKNOWN)


def settle(
    ddb: Any,
    table: str,
    message_id: str,
    status: Status,
    error: str | None = None,
    at: str | None = None,
    expires_at: int | None = None,
) -> Item | None:
    """An operator's end of a message delivered and never recorded: FIRING and marked
    `unrecorded` (the sweep marks one whose claimant's execution failed StatusNotRecorded;
    nothing else will ever write it) -> DONE (fired `at`, if known), FAILED or UNKNOWN (with
    `error`), leaving the status index, `recorded_by` the operator. Any other message has
    a claimant, a restart or the API that writes it: never set by hand. None, or the item
    as it was when refused ({} when there is none)."""
    if status not in SETTLED:
        raise ValueError(f"a message is set by hand to {', '.join(SETTLED)} only, not {status}")
    values: dict[str, Any] = {
        ":status": {"S": status},
        ":firing": {"S": Status.FIRING},
        ":operator": {"S": "operator"},
    }
    names = {"#s": "status"}
    update = "SET #s = :status, recorded_by = :operator"
    if status == Status.DONE and at:
        update += ", fired_at = :at"
        values[":at"] = {"S": at}
    if status != Status.DONE:
        update += ", #e = :error"
        values[":error"] = {"S": error or f"set {status} by hand by an operator"}
        names["#e"] = "error"
    return _conditional(
        ddb.update_item,
        TableName=table,
        Key=message_key(message_id),
        # (ended: out of the index)
        UpdateExpression=_expiring(f"{update} REMOVE lane", values, expires_at),
        ConditionExpression="#s = :firing AND attribute_exists(unrecorded)",
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=values,
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )
