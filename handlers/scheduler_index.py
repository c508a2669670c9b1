"""The scheduler's message record: its key, its status, and the status index written across lanes.

Every module of the scheduler reads and writes a message through these names (the API,
the sweep and the starter in handlers/scheduler.py; the claim, the delivery and the
final write in handlers/scheduler_slots.py).

DynamoDB gives each partition of an index at most 1,000 write units a second, and an
index keyed by the status alone puts every STANDBY message (and every FIRING one) in one
partition: ten thousand messages fired in the same second would queue their claims behind
it for ten seconds, and throttle the table's own writes with them (DynamoDB developer
guide, "GSI write throttling and back pressure"; "Using write sharding to distribute
workloads evenly"). So each message lives in one of `LANES` lanes, chosen by its id, and
the index is keyed by `lane` = "<status>#<lane>": a burst spreads over `LANES` partitions.
A message leaves the index when it ends (DONE, FAILED, UNKNOWN, CANCELLED: `lane` removed), as
nothing reads ended messages by status. Reading one status is one Query per lane.

A FIRING message stays in its STANDBY lane: the claim (and its release) changes no key of
the index, and the index (keys only) is not written at all, where a move between two
lanes is a delete and a put, two write units more per message (DynamoDB developer guide,
"Provisioned throughput considerations for global secondary indexes"). A reader of the
STANDBY lanes meets FIRING messages there, and tells them apart by their item (a claim
refused, or the status read).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

PATTERN = "scheduler"  # its metrics' Pattern dimension (the API's, the sweep's, the slots')
STATUS_INDEX = "by-lane"
LANE = "lane"  # the index's partition key; its sort key is publish_at
LANES = 16
KEY_PREFIX = "MESSAGE#"


class Status(StrEnum):
    """A message's status (handlers/scheduler.py draws the transitions)."""

    RESERVED = "RESERVED"
    STANDBY = "STANDBY"
    FIRING = "FIRING"
    DONE = "DONE"
    FAILED = "FAILED"
    # sent, and its outcome unseen (a timeout, a lost answer, a claimant that died after
    # its claim) where resending could apply it twice: never sent again (handlers/targets.py)
    UNKNOWN = "UNKNOWN"
    CANCELLED = "CANCELLED"


ENDED = frozenset({Status.DONE, Status.FAILED, Status.UNKNOWN, Status.CANCELLED})


def message_key(message_id: str) -> dict[str, Any]:
    return {"pk": {"S": f"{KEY_PREFIX}{message_id}"}}


def lane_of(message_id: str) -> int:
    """A message's lane, from its id (CRC-32 spreads any id evenly)."""
    return zlib.crc32(message_id.encode()) % LANES


# The status whose lanes a status shares (FIRING: STANDBY's, above).
_LISTED_AS = {Status.FIRING: Status.STANDBY}
# A message claimed by an earlier release (0.4 and before) was moved to a FIRING lane of
# its own; one claimed so and not yet ended is still there, and is read there too.
_EARLIER_LANES = {Status.FIRING: (Status.FIRING,)}


def lane(status: str, message_id: str) -> str:
    """The lane a message of `status` is written to."""
    return f"{_LISTED_AS.get(Status(status), status)}#{lane_of(message_id):02d}"


def lanes(status: str, first: int = 0, step: int = 1) -> list[str]:
    """Where messages of `status` are listed (lanes first, first + step, ...: one share of
    them): FIRING ones in the STANDBY lanes, and in their own of an earlier release."""
    listed = (_LISTED_AS.get(Status(status), status), *_EARLIER_LANES.get(Status(status), ()))
    return [f"{name}#{n:02d}" for name in listed for n in range(first, LANES, step)]


def _pages(ddb: Any, query: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every page of a Query of the status index."""
    start: dict[str, Any] | None = None
    while True:
        page = ddb.query(**query, **({"ExclusiveStartKey": start} if start else {}))
        yield page
        start = page.get("LastEvaluatedKey")
        if not start:
            return


def _of_lane(table: str, status_lane: str, until: float, since: float | None) -> dict[str, Any]:
    """A Query of a lane's messages due by `until` (and from `since`)."""
    condition = "lane = :lane AND publish_at <= :until"
    values = {":lane": {"S": status_lane}, ":until": {"N": f"{until:.3f}"}}
    if since is not None:
        condition = "lane = :lane AND publish_at BETWEEN :since AND :until"
        values[":since"] = {"N": f"{since:.3f}"}
    return {
        "TableName": table,
        "IndexName": STATUS_INDEX,
        "KeyConditionExpression": condition,
        "ExpressionAttributeValues": values,
    }


def due(
    ddb: Any, table: str, status_lane: str, until: float, since: float | None = None
) -> Iterator[tuple[str, float]]:
    """(message id, publish time) of a lane's messages due by `until` (and from `since`),
    every page: the one read of the index (the sweep's and the slot clock's)."""
    for page in _pages(ddb, _of_lane(table, status_lane, until, since)):
        for item in page.get("Items", []):  # (KEYS_ONLY: pk, lane, publish_at)
            yield item["pk"]["S"].removeprefix(KEY_PREFIX), float(item["publish_at"]["N"])


def count(ddb: Any, table: str, status_lane: str, since: float, until: float) -> int:
    """How many of a lane's messages are due from `since` to `until` (a Query's COUNT,
    every page: it reads what it counts, keys only)."""
    query = {**_of_lane(table, status_lane, until, since), "Select": "COUNT"}
    return sum(int(page.get("Count", 0)) for page in _pages(ddb, query))


def table_schema() -> dict[str, Any]:
    """The messages table's keys and index, as CreateTable takes them (tests, benchmarks;
    components/scheduler.py declares the same for Pulumi)."""
    return {
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": LANE, "AttributeType": "S"},
            {"AttributeName": "publish_at", "AttributeType": "N"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": STATUS_INDEX,
                "KeySchema": [
                    {"AttributeName": LANE, "KeyType": "HASH"},
                    {"AttributeName": "publish_at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        "BillingMode": "PAY_PER_REQUEST",
    }
