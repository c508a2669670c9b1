"""DynamoDB as the explorer's model of what moto does not show: a global secondary index that
lags its table, and the table's stream.

What it follows (DynamoDB developer guide):
- "Read consistency for global secondary indexes": GSI reads are eventually consistent;
  "changes to the table data are propagated to the global secondary indexes within a
  fraction of a second, under normal conditions": a read may miss a recent write, and an
  item whose index key changed may still be listed under its old key (so, for a moment,
  under both). The `stale` fault answers a Query on the index from that view: every item
  written in this schedule as its previous image was.
- "Change data capture for DynamoDB Streams": each write is one stream record (INSERT,
  MODIFY, REMOVE) with the item's images, in order per item; Lambda's event source mapping
  delivers records at least once, in batches, retrying a failed batch ("DynamoDB Streams
  and AWS Lambda triggers"): the same records may come again after a batch succeeded, and
  an old image may arrive after later writes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from tests.explore.faults import Call, Injector

WRITES = ("PutItem", "UpdateItem", "DeleteItem")


@dataclasses.dataclass
class Record:
    """One stream record: its event, the key, the images (NEW_AND_OLD_IMAGES)."""

    event: str  # INSERT | MODIFY | REMOVE
    keys: dict[str, Any]
    old: dict[str, Any] | None
    new: dict[str, Any] | None

    def as_event(self) -> dict[str, Any]:
        change: dict[str, Any] = {"Keys": self.keys, "StreamViewType": "NEW_AND_OLD_IMAGES"}
        if self.old is not None:
            change["OldImage"] = self.old
        if self.new is not None:
            change["NewImage"] = self.new
        return {"eventName": self.event, "eventSource": "aws:dynamodb", "dynamodb": change}


class Table:
    """One table's writes, as its stream and its lagging index see them. Attach with
    `watch(injector)`: it reads each written item back (a look, not a call) after every
    write that took effect, whoever made it."""

    def __init__(self, name: str, key: str, client: Callable[[], Any]) -> None:
        self.name = name
        self.key = key
        self.client = client
        self.images: dict[str, list[dict[str, Any] | None]] = {}  # key -> images, oldest first
        self.stream: list[Record] = []

    def watch(self, injector: Injector) -> None:
        injector.observers.append(self.observe)
        injector.stale = self.stale
        injector.lagging = self.lagging

    def lagging(self, call: Call) -> bool:
        """Whether the lagging index would answer this Query otherwise than the table:
        an item it reads moved into or out of its keys with its last write."""
        if call.params.get("TableName") != self.name:
            return False
        matches = _condition(call.params)
        return any(
            len(history) > 1
            and bool(history[-1] and matches(history[-1]))
            != bool(history[-2] and matches(history[-2]))
            for history in self.images.values()
        )

    def observe(self, call: Call) -> None:
        if call.service != "dynamodb" or call.operation not in WRITES:
            return
        if call.params.get("TableName") != self.name:
            return
        keys = call.params.get("Key") or {self.key: call.params["Item"][self.key]}
        key = keys[self.key]["S"]
        now = self.client().get_item(TableName=self.name, Key=keys, ConsistentRead=True).get("Item")
        history = self.images.setdefault(key, [None])
        old = history[-1]
        if now == old:
            return  # (a write that changed nothing writes no stream record)
        history.append(now)
        event = "INSERT" if old is None else ("REMOVE" if now is None else "MODIFY")
        self.stream.append(Record(event, keys, old, now))

    # -- the index's eventually consistent view -------------------------------------------------
    def stale(self, call: Call) -> dict[str, Any]:
        """A Query on an index answered as the index was before each item's last write."""
        params = call.params
        fresh = self.client().query(**params)
        matches = _condition(params)
        listed = {item[self.key]["S"]: item for item in fresh.get("Items", [])}
        for key, history in self.images.items():
            if len(history) < 2:
                continue
            previous, latest = history[-2], history[-1]
            if latest is not None and matches(latest) and not (previous and matches(previous)):
                listed.pop(key, None)  # the index has not seen it arrive yet
            if previous is not None and matches(previous):
                listed[key] = previous  # it has not seen it leave yet
        items = list(listed.values())
        return {"Items": items, "Count": len(items), "ScannedCount": len(items)}


def _condition(params: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """The key condition of a Query, as a test on an item image (the forms the handlers use:
    `a = :v`, `AND b <= :u`, `AND b BETWEEN :s AND :u`)."""
    text = params["KeyConditionExpression"]
    names = params.get("ExpressionAttributeNames", {})
    values = params["ExpressionAttributeValues"]
    tests: list[Callable[[dict[str, Any]], bool]] = []

    def attribute(token: str) -> str:
        return str(names.get(token, token))

    def value(item: dict[str, Any], name: str) -> Any:
        found = item.get(name)
        if found is None:
            return None
        kind, raw = next(iter(found.items()))
        return float(raw) if kind == "N" else raw

    def literal(token: str) -> Any:
        kind, raw = next(iter(values[token].items()))
        return float(raw) if kind == "N" else raw

    def between(name: str, low: Any, high: Any) -> Callable[[dict[str, Any]], bool]:
        return lambda item: value(item, name) is not None and low <= value(item, name) <= high

    def compare(name: str, operator: str, right: Any) -> Callable[[dict[str, Any]], bool]:
        return lambda item: _compare(value(item, name), operator, right)

    for name, low, high in re.findall(r"(\S+)\s+BETWEEN\s+(\S+)\s+AND\s+(\S+)", text):
        tests.append(between(attribute(name), literal(low), literal(high)))
    text = re.sub(r"\S+\s+BETWEEN\s+\S+\s+AND\s+\S+", "", text)
    for part in filter(None, (p.strip() for p in re.split(r"\bAND\b", text))):
        compared = re.fullmatch(r"(\S+)\s*(=|<=|<|>=|>)\s*(\S+)", part)
        if not compared:
            raise AssertionError(f"the index model has no key condition {part!r}")
        name, operator, token = compared.groups()
        tests.append(compare(attribute(name), operator, literal(token)))
    return lambda item: all(test(item) for test in tests)


def _compare(left: Any, operator: str, right: Any) -> bool:
    if left is None:
        return False
    return {
        "=": left == right,
        "<": left < right,
        "<=": left <= right,
        ">": left > right,
        ">=": left >= right,
    }[operator]
