"""DynamoDB as the explorer's model of what moto does not show: a global secondary index that
lags its table, and the table's stream.

What it follows (DynamoDB developer guide):
- "Read consistency for global secondary indexes": GSI reads are eventually consistent;
  "changes to the table data are propagated to the global secondary indexes within a
  fraction of a second, under normal conditions": a read may miss a recent write, and an
  item whose index key changed may still be listed under its old key (so, for a moment,
  under both). The `stale` fault answers a Query on the index from that view: the index
  has not seen each item's last write yet.
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

from moto.core import DEFAULT_ACCOUNT_ID
from moto.dynamodb.models import dynamodb_backends

from tests.explore.faults import Call, Injector

WRITES = ("PutItem", "UpdateItem", "DeleteItem")


@dataclasses.dataclass
class Record:
    """One stream record: its event, the key, the images (NEW_AND_OLD_IMAGES)."""

    event: str  # INSERT | MODIFY | REMOVE
    keys: dict[str, Any]
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    created: float = 0.0  # when the write landed

    def as_event(self) -> dict[str, Any]:
        change: dict[str, Any] = {"Keys": self.keys, "StreamViewType": "NEW_AND_OLD_IMAGES"}
        # "rounded down to the closest second" (DynamoDB Streams API, StreamRecord)
        change["ApproximateCreationDateTime"] = int(self.created)
        if self.old is not None:
            change["OldImage"] = self.old
        if self.new is not None:
            change["NewImage"] = self.new
        return {"eventName": self.event, "eventSource": "aws:dynamodb", "dynamodb": change}


class Table:
    """One table's writes, as its stream and its lagging index see them. Attach with
    `watch(injector)`: it reads each written item back (a look, not a call) after every
    write that took effect, whoever made it."""

    def __init__(
        self,
        name: str,
        key: str,
        client: Callable[[], Any],
        clock: Any = None,
        far: bool = False,
        newest: bool = False,
    ) -> None:
        self.name = name
        self.key = key
        # how far behind a stale index read is: each item's last write unseen, or (`far`)
        # every write after the item's first (an index under write back-pressure), or
        # (`newest`) only the table's latest write (one item of a batch seen, the next not)
        self.far = far
        self.newest = newest
        self.client = client
        self.clock = clock  # (.now) when each write landed
        # key -> (when, image) of each write, oldest first (None: absent)
        self.images: dict[str, list[tuple[float, dict[str, Any] | None]]] = {}
        self.stream: list[Record] = []

    def watch(self, injector: Injector) -> None:
        injector.observers.append(self.observe)
        injector.stale = self.stale
        injector.lagging = self.lagging

    def _now(self) -> float:
        return float(self.clock.now) if self.clock is not None else 0.0

    def _view(self, call: Call) -> tuple[dict[str, Any], dict[str, Any]]:
        """(key -> image the lagging index lists, key -> image the table's latest), of the
        items this schedule wrote whose lagging view differs from their latest: the index
        has not seen each item's last write yet, however long ago it was, or (`far`) any
        write after its first: a message fired and ended may still be listed as it was
        registered. (DynamoDB developer guide, "Global secondary indexes": changes reach an
        index "within a fraction of a second, under normal conditions. However, in some
        unlikely failure scenarios, longer propagation delays might occur"; `far` is a
        deliberate worst case; `newest`, the table's last write alone unseen.)"""
        matches = _condition(call.params)
        lagging: dict[str, Any] = {}
        latest: dict[str, Any] = {}
        last = max((history[-1][0] for history in self.images.values()), default=0.0)
        for key, history in self.images.items():
            behind = 1 if self.far else len(history) - 2
            if self.newest and history[-1][0] < last:
                continue  # (seen)
            old, new = history[behind][1] if len(history) > 1 else None, history[-1][1]
            if bool(old and matches(old)) != bool(new and matches(new)):
                lagging[key] = old if old and matches(old) else None
                latest[key] = new
        return lagging, latest

    def lagging(self, call: Call) -> bool:
        """Whether the lagging index would answer this Query otherwise than the table."""
        if call.params.get("TableName") != self.name:
            return False
        return bool(self._view(call)[0])

    def observe(self, call: Call) -> None:
        if call.service != "dynamodb" or call.operation not in WRITES:
            return
        if call.params.get("TableName") != self.name:
            return
        keys = call.params.get("Key") or {self.key: call.params["Item"][self.key]}
        key = keys[self.key]["S"]
        now = self.read(keys)
        history = self.images.setdefault(key, [(float("-inf"), None)])
        old = history[-1][1]
        if now == old:
            return  # (a write that changed nothing writes no stream record)
        history.append((self._now(), now))
        event = "INSERT" if old is None else ("REMOVE" if now is None else "MODIFY")
        self.stream.append(Record(event, keys, old, now, self._now()))

    def read(self, keys: dict[str, Any]) -> dict[str, Any] | None:
        """The item as a consistent GetItem answers it, read from moto's backend: a look, not
        a call, and a fifth of the explorer's time when it went through botocore and moto's
        (de)serialisation after every write."""
        client = self.client()
        backend = dynamodb_backends[DEFAULT_ACCOUNT_ID][client.meta.region_name]
        item = backend.get_item(self.name, keys)
        return None if item is None else item.to_json()["Attributes"]

    # -- the index's eventually consistent view -------------------------------------------------
    def stale(self, call: Call) -> dict[str, Any]:
        """A Query on an index answered by an index that has not seen each item's last
        write yet (a new item missing, a moved one still under its old key)."""
        params = call.params
        fresh = self.client().query(**params)
        listed = {item[self.key]["S"]: item for item in fresh.get("Items", [])}
        lagging, _ = self._view(call)
        for key, image in lagging.items():
            if image is None:
                listed.pop(key, None)  # the index has not seen it arrive yet
            else:
                listed[key] = image  # it has not seen it leave yet
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


@dataclasses.dataclass
class EventSourceMapping:
    """Lambda's event source mapping of a DynamoDB stream, as the Lambda developer guide
    describes it ("Using AWS Lambda with Amazon DynamoDB"; "Lambda event filtering"):
    records that pass the filters, in order, in batches of up to `batch_size`; a batch
    whose invocation fails is retried up to `retries` times, split in two first
    (`bisect`, BisectBatchOnFunctionError), each half retried on its own; a batch that
    still fails goes to the on-failure destination and the mapping moves on."""

    passes: Callable[[dict[str, Any]], bool]
    run: Callable[[list[dict[str, Any]], str], bool]  # one invocation: did it succeed?
    sleep: Callable[[float], None]
    batch_size: int = 25
    retries: int = 5
    bisect: bool = True

    def deliver(self, records: list[Record], who: str) -> list[list[dict[str, Any]]]:
        """Deliver `records` (stream order); the batches given up on."""
        events = [r.as_event() for r in records if self.passes(r.as_event())]
        dropped: list[list[dict[str, Any]]] = []
        for start in range(0, len(events), self.batch_size):
            self._batch(events[start : start + self.batch_size], f"{who}{start}", dropped)
        return dropped

    def _batch(
        self, batch: list[dict[str, Any]], name: str, dropped: list[list[dict[str, Any]]]
    ) -> None:
        if self.run(batch, f"{name}#0"):
            return
        if self.bisect and len(batch) > 1:
            half = len(batch) // 2
            self._batch(batch[:half], f"{name}a", dropped)
            self._batch(batch[half:], f"{name}b", dropped)
            return
        for attempt in range(1, self.retries + 1):
            self.sleep(1)
            if self.run(batch, f"{name}#{attempt}"):
                return
        dropped.append(batch)
