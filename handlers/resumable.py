"""Pattern 4's checkpoint function: the Load and Finish of the resumable workflow (and
the same functions for its durable-function form, handlers/resumable_durable.py).

The state machine (components/resumable_asl.py) calls it twice per run:

- `load`: take the key's **lease** and return every step's entry. The lease is the
  execution's ARN in the item; a run whose key is held by another execution that is
  still RUNNING fails at once with `KeyInProgress`, before any step. A lease whose
  holder ended (failed, timed out, stopped, or gone) is taken over: a crashed run never
  blocks its key. A **completed** key (finished within the retention) takes no lease:
  its stored entries come back, every step done, so the run executes no step and
  answers with the stored results. An item past its `expires_at` counts as absent
  (DynamoDB's TTL deletes it only eventually): a key reused later starts afresh.
- `finish`: mark the key completed, keep it for the retention (`expires_at`), and
  release the lease.

Every write sets `expires_at` (epoch seconds, the table's TTL attribute): in-progress and
failed checkpoints live `checkpoint_ttl_seconds` from their last run's start, completed
ones `retention_seconds` from completion.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time
from typing import Any

from exactly_once.handlers import metrics, timestamps
from exactly_once.handlers.checkpoints import EMPTY, SAVED_AT, attribute
from exactly_once.handlers.errors import ClientError, aws_code
from exactly_once.handlers.runtime import client, correlate, lambda_handler, log
from exactly_once.handlers.settings import Settings

# What DescribeExecution (a state machine's run) or GetDurableExecution (a durable
# function's, handlers/resumable_durable.py) answers for a holder that will never write again.
ENDED = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"})
DURABLE_ENDED = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "STOPPED"})
ATTEMPTS = 3  # takeovers race only with other runs of the same key


@dataclasses.dataclass(frozen=True)
class ResumableSettings(Settings):
    table: str
    steps: list[str]
    checkpoint_ttl_seconds: int
    retention_seconds: int


@dataclasses.dataclass(frozen=True)
class ResumableDurableSettings(Settings):
    """The durable form's settings (handlers/resumable_durable.py), here so its component
    reads them without the durable-execution SDK."""

    table: str
    steps: list[str]
    step_functions: list[str]  # each step's Lambda function ARN, in the order of `steps`
    key_path: str  # $.field[.field...]: the business key in the input
    checkpoint_ttl_seconds: int
    retention_seconds: int

    @property
    def checkpoints(self) -> ResumableSettings:
        return ResumableSettings(
            self.table, self.steps, self.checkpoint_ttl_seconds, self.retention_seconds
        )


class KeyInProgress(Exception):
    """Another execution holds this key and is still running: this run executes no step.
    (The error name Step Functions shows is this class's name.)"""


class LeaseLost(Exception):
    """The lease was taken from this execution while it ran (a checkpoint cleared by hand)."""


@lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    config = ResumableSettings.current()
    key, execution = str(event["key"]), str(event["execution"])
    correlate(key)
    if event["action"] == "load":
        return load(config, key, execution)
    if event["action"] == "finish":
        return finish(config, key, execution)
    raise ValueError(f"unknown action {event['action']!r}")


def entries(config: ResumableSettings, item: dict[str, Any]) -> dict[str, Any]:
    """Every step's entry ({} = not done), as the state machine's `$.results` holds them."""
    return {
        step: json.loads(item.get(attribute(step), {}).get("S", EMPTY)) for step in config.steps
    }


# DynamoDB's limits on one UpdateExpression: 4 KB, and 300 operators and functions
# (Developer Guide, "Constraints", expression parameters). Load initializes every step's
# entry: a long workflow's initializers are written in as many updates as they need.
MAX_EXPRESSION_BYTES = 4096
MAX_FUNCTIONS = 100  # with room to spare under 300


def _batches(head: str, pieces: list[str]) -> list[list[str]]:
    """`pieces` (SET actions) in order, in batches whose expression fits the limits: the
    first batch after `head` (the lease's own actions), every later one alone."""
    batches: list[list[str]] = [[]]
    size = len(head.encode())
    for piece in pieces:
        cost = len(piece.encode()) + 2  # ", "
        if size + cost > MAX_EXPRESSION_BYTES or len(batches[-1]) >= MAX_FUNCTIONS:
            batches.append([])
            size = len(b"SET ")
        batches[-1].append(piece)
        size += cost
    return batches


def _claim(
    config: ResumableSettings,
    key: str,
    execution: str,
    now: int,
    condition: str,
    **values: Any,
) -> dict[str, Any] | None:
    """Take the lease if `condition` holds; the item after, or None if it did not hold.
    The claim is the claimant's write too: saved_at is now, by this function's clock (a
    run redriven at its Load re-takes its own lease, and is then seen running again; the
    Load state's $$.State.EnteredTime is not documented to be the redrive's)."""
    head = (
        "SET lease = :me, expires_at = :ttl, first_execution = if_not_exists(first_execution, :me)"
        f", {SAVED_AT} = :stamped"
    )
    values[":stamped"] = {"S": timestamps.iso_ms(time.time())}
    pieces = [f"{attribute(s)} = if_not_exists({attribute(s)}, :empty)" for s in config.steps]
    first, *rest = _batches(head, pieces)
    ddb = client("dynamodb")
    empty = {":empty": {"S": EMPTY}}
    try:
        item = ddb.update_item(
            TableName=config.table,
            Key={"pk": {"S": key}},
            UpdateExpression=", ".join([head, *first]),
            ConditionExpression=condition,
            ExpressionAttributeValues={
                ":me": {"S": execution},
                ":ttl": {"N": str(now + config.checkpoint_ttl_seconds)},
                **(empty if first else {}),
                **values,
            },
            ReturnValues="ALL_NEW",
        )["Attributes"]
    except ClientError as exc:
        if aws_code(exc) == "ConditionalCheckFailedException":
            return None
        raise
    for batch in rest:  # only a workflow of many long step names
        try:
            item = ddb.update_item(
                TableName=config.table,
                Key={"pk": {"S": key}},
                UpdateExpression="SET " + ", ".join(batch),
                ConditionExpression="lease = :me",
                ExpressionAttributeValues={":me": {"S": execution}, **empty},
                ReturnValues="ALL_NEW",
            )["Attributes"]
        except ClientError as exc:
            if aws_code(exc) == "ConditionalCheckFailedException":
                raise LeaseLost(
                    f"key {key!r}: {execution} lost its lease while taking it"
                ) from None
            raise
    return item


def _holder_ended(holder: str, saved_at: str | None) -> bool:
    """Whether `holder` will never write again. `saved_at`: when it last saved a step (the
    item as read before this call), if it is a state machine's run."""
    if ":states:" not in holder:  # a durable execution's
        try:
            described = client("lambda").get_durable_execution(DurableExecutionArn=holder)
        except ClientError as exc:
            if aws_code(exc) == "ResourceNotFoundException":  # past the retention
                return True
            raise
        return described["Status"] in DURABLE_ENDED
    try:
        described = client("stepfunctions").describe_execution(executionArn=holder)
    except ClientError as exc:
        if aws_code(exc) == "ExecutionDoesNotExist":  # past Step Functions' 90 days
            return True
        raise
    if described["status"] not in ENDED:
        return False
    # An ended run is not ended for good: RedriveExecution reopens a FAILED, TIMED_OUT or
    # ABORTED run for 14 days, under the same ARN, and DescribeExecution "is eventually
    # consistent ... may not reflect very recent updates". A holder that saved a step
    # after the stopDate described was redriven and runs on, whatever the status says.
    stopped = described.get("stopDate")
    saved = _instant(saved_at)
    if saved is not None and stopped is not None:
        return saved <= stopped
    return True


def _instant(text: str | None) -> dt.datetime | None:
    """saved_at as an aware datetime; None if absent or not such a time (written by hand,
    say): then only the status counts."""
    if not text:
        return None
    try:
        return timestamps.parse(text)
    except ValueError:
        log("WARNING", "saved_at is not an ISO 8601 time with its offset", saved_at=text)
        return None


def load(
    config: ResumableSettings,
    key: str,
    execution: str,
    now: int | None = None,
) -> dict[str, Any]:
    """Take `key`'s lease for `execution` and return every step's entry (see the module)."""
    now = int(time.time()) if now is None else now
    ddb = client("dynamodb")
    for _ in range(ATTEMPTS):
        # The common case first: no item, a free lease, or this execution's own (a retry).
        free = (
            "(attribute_not_exists(lease) OR lease = :me) AND attribute_not_exists(completed_at)"
            " AND (attribute_not_exists(expires_at) OR expires_at > :now)"
        )
        item = _claim(config, key, execution, now, free, **{":now": {"N": str(now)}})
        if item is not None:
            metrics.emit(PATTERN, {"key": key}, RunsStarted=1)
            return entries(config, item)
        found = ddb.get_item(TableName=config.table, Key={"pk": {"S": key}}, ConsistentRead=True)
        item = found.get("Item")
        if item is None:
            continue  # deleted meanwhile (ops clear): claim it afresh
        expires = item.get("expires_at", {}).get("N")
        if expires is not None and int(float(expires)) <= now:
            # Expired, not yet deleted by TTL: forget it, unless it changed meanwhile.
            try:
                ddb.delete_item(
                    TableName=config.table,
                    Key={"pk": {"S": key}},
                    ConditionExpression="expires_at = :seen",
                    ExpressionAttributeValues={":seen": {"N": expires}},
                )
            except ClientError as exc:
                if aws_code(exc) != "ConditionalCheckFailedException":
                    raise
            log("INFO", "expired checkpoint forgotten", key=key, expired_at=expires)
            continue
        if "completed_at" in item:
            log("INFO", "key already completed: no step runs", key=key, execution=execution)
            return entries(config, item)
        holder = item["lease"]["S"]
        saved_at = item.get(SAVED_AT, {}).get("S")
        if not _holder_ended(holder, saved_at):
            raise KeyInProgress(f"key {key!r} is being run by {holder}; this run runs no step")
        # Only if the holder saved nothing since the read above: a redriven holder that
        # saved a step meanwhile goes on to the next one (its status read before its
        # redrive), so this run must not run that step beside it.
        unchanged = f"attribute_not_exists({SAVED_AT})"
        values: dict[str, Any] = {":holder": {"S": holder}}
        if saved_at is not None:
            unchanged, values[":seen"] = f"{SAVED_AT} = :seen", {"S": saved_at}
        taken = _claim(config, key, execution, now, f"lease = :holder AND {unchanged}", **values)
        if taken is not None:
            log("INFO", "lease taken over from an ended run", key=key, previous=holder)
            metrics.emit(PATTERN, {"key": key}, RunsStarted=1)
            return entries(config, taken)
    raise KeyInProgress(f"key {key!r}: the lease changed hands {ATTEMPTS} times; try again")


def finish(
    config: ResumableSettings, key: str, execution: str, now: int | None = None
) -> dict[str, Any]:
    """Mark `key` completed for the retention and release the lease; a key that was
    already completed (this run ran no step) stays as it is."""
    now = int(time.time()) if now is None else now
    ddb = client("dynamodb")
    try:
        item = ddb.update_item(
            TableName=config.table,
            Key={"pk": {"S": key}},
            UpdateExpression=(
                "SET completed_at = :now, completed_by = :me, expires_at = :ttl REMOVE lease"
            ),
            ReturnValues="ALL_NEW",  # every entry, to count what this run did
            ConditionExpression="lease = :me",
            ExpressionAttributeValues={
                ":now": {"N": str(now)},
                ":me": {"S": execution},
                ":ttl": {"N": str(now + config.retention_seconds)},
            },
        )["Attributes"]
    except ClientError as exc:
        if aws_code(exc) != "ConditionalCheckFailedException":
            raise
        found = ddb.get_item(TableName=config.table, Key={"pk": {"S": key}}, ConsistentRead=True)
        if "completed_at" in found.get("Item", {}):
            by = found["Item"].get("completed_by", {}).get("S")
            if by != execution:  # not this run's own retry
                metrics.emit(PATTERN, {"key": key}, KeysCompleted=1)
            return {"completed": True, "already": True}
        raise LeaseLost(f"key {key!r}: {execution} no longer holds its lease") from None
    log("INFO", "key completed", key=key, execution=execution)
    ran = sum(entry.get("by") == execution for entry in entries(config, item).values())
    metrics.emit(
        PATTERN,
        {"key": key},
        RunsSucceeded=1,
        StepsRun=ran,
        StepsSkipped=len(config.steps) - ran,
    )
    return {"completed": True, "already": False}


PATTERN = "resumable"
