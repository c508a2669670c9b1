"""Give a scheduler's pending messages their lane in the status index (once, after upgrading
a scheduler deployed before the index was written in lanes: docs/scheduler.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exactly_once.handlers import scheduler_store
from exactly_once.handlers.scheduler_index import ENDED, LANE


def add_lanes(client: Callable[[str], Any], table: str) -> dict[str, int]:
    """Every message without a lane gets its status's: conditional on the status it was read
    with (a message that moved on meanwhile was written with its lane by the new code).
    Ended messages stay out of the index. Counts by outcome; safe to run again."""
    ddb = client("dynamodb")
    counts = {"laned": 0, "ended": 0, "moved_on": 0}
    pages = ddb.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="begins_with(pk, :message) AND attribute_not_exists(#lane)",
        ExpressionAttributeNames={"#lane": LANE},
        ExpressionAttributeValues={":message": {"S": "MESSAGE#"}},
    )
    for page in pages:
        for item in page.get("Items", []):
            status, message_id = item["status"]["S"], item["id"]["S"]
            if status in ENDED:
                counts["ended"] += 1
                continue
            if scheduler_store.add_lane(ddb, table, message_id, status):
                counts["laned"] += 1
            else:
                counts["moved_on"] += 1
    return counts
