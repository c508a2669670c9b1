"""A scheduler's operator commands: give pending messages their lane in the status index
(once, after upgrading a scheduler deployed before the index was written in lanes:
docs/scheduler.md); end a delivered message whose status was never written (the
runbook's "set the status by hand"). Every write is a transition of
handlers/scheduler_store.py, the lane following the status."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from exactly_once.handlers import scheduler_store
from exactly_once.handlers.scheduler_index import ENDED, KEY_PREFIX, LANE, Status, message_key


class MessageRefused(ValueError):
    """The message is not one an operator may set (or not a message of this table):
    nothing written."""


def _unlaned(ddb: Any, table: str) -> Iterator[dict[str, Any]]:
    pages = ddb.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="begins_with(pk, :message) AND attribute_not_exists(#lane)",
        ExpressionAttributeNames={"#lane": LANE},
        ExpressionAttributeValues={":message": {"S": KEY_PREFIX}},
    )
    for page in pages:
        yield from page.get("Items", [])


def count_lanes(client: Callable[[str], Any], table: str) -> dict[str, int]:
    """What add_lanes would do, read only: messages without a lane, pending and ended."""
    counts = {"to_lane": 0, "ended": 0}
    for item in _unlaned(client("dynamodb"), table):
        counts["ended" if item["status"]["S"] in ENDED else "to_lane"] += 1
    return counts


def add_lanes(client: Callable[[str], Any], table: str) -> dict[str, int]:
    """Every message without a lane gets its status's: conditional on the status it was read
    with (a message that moved on meanwhile was written with its lane by the new code).
    Ended messages stay out of the index. Counts by outcome; safe to run again."""
    ddb = client("dynamodb")
    counts = {"laned": 0, "ended": 0, "moved_on": 0}
    for item in _unlaned(ddb, table):
        status, message_id = item["status"]["S"], item["id"]["S"]
        if status in ENDED:
            counts["ended"] += 1
            continue
        if scheduler_store.add_lane(ddb, table, message_id, status):
            counts["laned"] += 1
        else:
            counts["moved_on"] += 1
    return counts


def settleable(client: Callable[[str], Any], table: str, message_id: str) -> dict[str, Any]:
    """Read only: the message as an operator may end it (FIRING, marked `unrecorded`: its
    target has it, its status was never written), or MessageRefused saying what it is."""
    item = (
        client("dynamodb")
        .get_item(TableName=table, Key=message_key(message_id), ConsistentRead=True)
        .get("Item")
    )
    item = _settleable(table, message_id, item)
    return {
        "id": message_id,
        "status": item["status"]["S"],
        "claimedBy": item.get("claimed_by", {}).get("S"),
        "publishAt": float(item["publish_at"]["N"]) if "publish_at" in item else None,
        # (its record's retention: kept that long past the end written here)
        "keepForSeconds": scheduler_store.kept_for(item),
    }


def _settleable(table: str, message_id: str, item: dict[str, Any] | None) -> dict[str, Any]:
    """`item`, if an operator may end it; MessageRefused saying what it is otherwise."""
    if not item:
        raise MessageRefused(
            f"no message {message_id!r} in table {table} (is --table, or --component, a "
            "Scheduler's messages table?)"
        )
    if "status" not in item or "id" not in item:
        raise MessageRefused(
            f"{KEY_PREFIX}{message_id} in table {table} is no scheduler message: its item "
            f"has {', '.join(sorted(item))}"
        )
    status = item["status"]["S"]
    if status != Status.FIRING or "unrecorded" not in item:
        why = (
            "FIRING and not marked unrecorded: its claimant (or a restart of its slot) still "
            "records it; the sweep marks one whose claimant failed StatusNotRecorded"
            if status == Status.FIRING
            else f"{status}: only a FIRING message marked unrecorded is set by hand"
        )
        raise MessageRefused(f"message {message_id!r} is {why}; nothing written")
    return item


def settle(
    client: Callable[[str], Any],
    table: str,
    message_id: str,
    status: Status,
    error: str | None = None,
    at: str | None = None,
    keep_for: float | None = None,
    publish_at: float | None = None,
) -> dict[str, Any]:
    """The message ended as `status` by hand (scheduler_store.settle), kept `keep_for`
    seconds past its end or `publish_at`, whichever is later, as any end keeps it
    (`settleable`'s keepForSeconds and publishAt; None: for ever), or MessageRefused when
    it was not FIRING and unrecorded when written (moved on since it was read)."""
    ddb = client("dynamodb")
    expires = scheduler_store.expires_at(keep_for, publish_at or 0.0, time.time())
    found = scheduler_store.settle(ddb, table, message_id, status, error, at, expires)
    if found is not None:
        _settleable(table, message_id, found)  # (says what it was)
        raise MessageRefused(f"message {message_id!r} moved on meanwhile; nothing written")
    return {"id": message_id, "status": status, "recordedBy": "operator"}
