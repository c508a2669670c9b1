"""Pattern 5, the idempotent S3 ETL: one output per input object version, however often it runs.

A library for any Lambda function, and the component's own handler:

    from exactly_once.handlers.etl import EtlSettings, transform_once

    SETTINGS = EtlSettings(output_bucket="my-outputs", output_suffix=".jsonl.gz", dlq_url=URL)

    def handler(event, context):
        return transform_once(event, my_transform, SETTINGS, context)

`transform_once` takes an S3 event (notification or EventBridge form, batches included)
and a transform: a function given a readable stream of the exact object version the
event names (and its `ObjectRef`), yielding the output's bytes. The output is published
under a key derived from the input (`<prefix><key>.<version or ETag><suffix>`) as it is
yielded, in bounded memory (handlers/s3_publish.py: one PUT, or a multipart upload that
S3 makes visible only when complete), never staged and copied. A transform raises
`BadInput` for an input no retry can fix; anything else it raises is retried.

Strategies (`EtlSettings.strategy`):
- conditional-write (default): a HEAD finds an output already published (DUPLICATE, at
  the cost of one request: nothing read or transformed); otherwise the output is written
  with `If-None-Match: *`, so the first writer wins: a concurrent duplicate gets 412
  (DUPLICATE), a concurrent write 409 (retried). No table.
- deterministic: a HEAD finds an existing output (DUPLICATE); a concurrent duplicate
  rewrites the same bytes under the same key, so the transform must be deterministic.
- control-record: a DynamoDB record per object version, IN_PROGRESS (a lock that expires
  with this invocation's remaining time) then COMPLETE with the output. A concurrent
  duplicate sees the live lock and fails with a retryable error; a crashed run's lock
  expires and the next delivery redoes the work. Use it when the transform has effects
  beyond its output, or must run once even if its output is deleted.
- powertools: Powertools for AWS Lambda's idempotency utility on the same table.
With a control table, a malformed input gets a FAILED record (id `failed#<object
version>`) with the reason and one DLQ message however often it is delivered; without
one, one message per delivery. It is never half-written.
"""

from __future__ import annotations

import abc
import dataclasses
import enum
import functools
import importlib
import time
import typing
import uuid
from collections.abc import Callable, Iterable
from typing import IO, Any, ClassVar, Literal

from exactly_once.handlers import metrics
from exactly_once.handlers.errors import (
    BadInput,
    ClientError,
    Permanent,
    Retryable,
    aws_code,
    object_missing,
)
from exactly_once.handlers.registry import register
from exactly_once.handlers.runtime import client, dead_letter, lambda_handler, log
from exactly_once.handlers.s3_events import ObjectRef, object_refs
from exactly_once.handlers.s3_publish import DEFAULT_PART_SIZE, MIN_PART_SIZE, publish
from exactly_once.handlers.s3_read import open_version
from exactly_once.handlers.settings import Settings, SettingsError, choice

__all__ = ["BadInput", "EtlSettings", "ObjectRef", "Transform", "transform_once"]


class Strategy(enum.StrEnum):
    """How a duplicate delivery is stopped (see the module docstring)."""

    CONDITIONAL_WRITE = "conditional-write"
    DETERMINISTIC = "deterministic"
    CONTROL_RECORD = "control-record"
    POWERTOOLS = "powertools"


# its values (components/config.py)
StrategyName = Literal["conditional-write", "deterministic", "control-record", "powertools"]

STRATEGIES: tuple[Strategy, ...] = tuple(Strategy)

Transform = Callable[[IO[bytes], ObjectRef], Iterable[bytes]]
"""`transform(source, obj)`: the output's bytes, read from `source` (the object version
`obj` names), yielded in chunks of any size. Raise `BadInput` for an unusable input."""


@dataclasses.dataclass(frozen=True)
class EtlSettings(Settings):
    """Where and how outputs are published. In the component's function these are read
    from the environment (every one set by the component); in yours, construct them."""

    output_bucket: str
    strategy: Strategy = Strategy.CONDITIONAL_WRITE
    output_prefix: str = ""
    output_suffix: str = ""
    content_type: str = "application/octet-stream"
    control_table: str = ""
    """DynamoDB table (partition key `id`, TTL on `expiration`): required by the locking
    strategies; with any strategy it keeps a bad input to one DLQ message."""
    record_ttl_seconds: int = 7 * 24 * 3600
    dlq_url: str = ""
    """SQS queue for inputs no retry can fix, with the reason. Without one such an input
    is raised, so Lambda's own retries and failure destination take the event."""
    part_size: int = DEFAULT_PART_SIZE
    """Outputs larger than this are multipart uploads of parts this size (S3: >= 5 MiB)."""

    def __post_init__(self) -> None:
        try:  # a plain string is welcome; frozen: set through object
            object.__setattr__(self, "strategy", choice(Strategy, self.strategy, "strategy"))
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        if STRATEGY_OF[self.strategy].locking and not self.control_table:
            raise SettingsError(f"the {self.strategy} strategy needs a control_table")
        if self.part_size < MIN_PART_SIZE:
            raise SettingsError(f"part_size must be at least {MIN_PART_SIZE} (S3's minimum)")


@dataclasses.dataclass(frozen=True)
class TransformSettings(Settings):
    """The component's function only: which transform its handler runs."""

    transform: str
    """`package.module:function`, importable from the function's code."""


PATTERN = "etl"  # its metrics' Pattern dimension (handlers/metrics.py)
IN_PROGRESS, COMPLETE, FAILED = "IN_PROGRESS", "COMPLETE", "FAILED"
WRITTEN, DUPLICATE, REJECTED = "WRITTEN", "DUPLICATE", "REJECTED"


class InProgress(Retryable):
    """Another invocation holds the lock on this object version: retry later."""


def output_key(config: EtlSettings, ref: ObjectRef) -> str:
    return f"{config.output_prefix}{ref.key}.{ref.revision}{config.output_suffix}"


# -- the work itself ------------------------------------------------------------------
def produce(
    config: EtlSettings, ref: ObjectRef, transform: Transform, only_if_absent: bool = False
) -> tuple[str, int]:
    """Stream exactly this version through the transform into its output; the output key
    and its size.
    In an unversioned bucket "this version" is the write with the event's ETag: read only
    if the object still has it, never a later write under this write's output name."""
    exact = {"VersionId": ref.version_id} if ref.version_id else {"IfMatch": ref.revision}
    s3 = client("s3")
    try:
        source = open_version(s3, {"Bucket": ref.bucket, "Key": ref.key, **exact})
    except ClientError as exc:
        if aws_code(exc) in ("NoSuchKey", "NoSuchVersion"):
            raise BadInput(f"s3://{ref.bucket}/{ref.key} ({ref.revision}) is gone") from exc
        if aws_code(exc) == "PreconditionFailed":
            raise BadInput(
                f"s3://{ref.bucket}/{ref.key} was overwritten before {ref.revision} was read "
                "(an unversioned bucket keeps no old writes); the newer write has its own event"
            ) from exc
        raise
    key = output_key(config, ref)
    with source:
        size = publish(
            s3,
            config.output_bucket,
            key,
            transform(source, ref),
            content_type=config.content_type,
            only_if_absent=only_if_absent,
            part_size=config.part_size,
        )
    return key, size


# -- control records -----------------------------------------------------------------
def _table() -> Any:
    return client("dynamodb")


def record_failure(config: EtlSettings, ref: ObjectRef, reason: str) -> bool:
    """A FAILED record with the reason; False when this version already has one."""
    now = int(time.time())
    try:
        _table().put_item(
            TableName=config.control_table,
            Item={
                "id": {"S": f"failed#{ref.identity}"},
                "status": {"S": FAILED},
                "reason": {"S": reason[:1000]},
                "expiration": {"N": str(now + config.record_ttl_seconds)},
            },
            ConditionExpression="attribute_not_exists(id)",
        )
    except ClientError as exc:
        if aws_code(exc) == "ConditionalCheckFailedException":
            return False
        raise
    return True


def acquire(
    config: EtlSettings, ref: ObjectRef, owner: str, remaining_ms: int
) -> dict[str, Any] | None:
    """Take the lock (None), or return the COMPLETE record; InProgress while it is held."""
    now = time.time()
    try:
        _table().put_item(
            TableName=config.control_table,
            Item={
                "id": {"S": ref.identity},
                "status": {"S": IN_PROGRESS},
                "owner": {"S": owner},
                "lock_expires": {"N": f"{now + remaining_ms / 1000:.3f}"},
                "expiration": {"N": str(int(now) + config.record_ttl_seconds)},
            },
            ConditionExpression=(
                "attribute_not_exists(id) OR (#s = :in_progress AND lock_expires < :now)"
            ),
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":in_progress": {"S": IN_PROGRESS},
                ":now": {"N": f"{now:.3f}"},
            },
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return None
    except ClientError as exc:
        if aws_code(exc) != "ConditionalCheckFailedException":
            raise
        # ReturnValuesOnConditionCheckFailure puts the item that failed the condition here.
        old: dict[str, Any] | None = exc.response.get("Item")  # type: ignore[assignment]
        item = old or _table().get_item(
            TableName=config.control_table, Key={"id": {"S": ref.identity}}, ConsistentRead=True
        ).get("Item")
    if item is None:  # expired by TTL between the two calls: try once more
        return acquire(config, ref, owner, remaining_ms)
    if item["status"]["S"] == IN_PROGRESS:
        if item.get("owner", {}).get("S") == owner:
            # Ours: an earlier send of this put took the lock and its answer was lost; the
            # SDK's resend found it taken (by us).
            return None
        raise InProgress(f"{ref.identity} is being processed by {item['owner']['S']}; retry later")
    return item


def complete(config: EtlSettings, ref: ObjectRef, owner: str, key: str) -> None:
    try:
        _table().update_item(
            TableName=config.control_table,
            Key={"id": {"S": ref.identity}},
            UpdateExpression="SET #s = :complete, #o = :output REMOVE lock_expires",
            ConditionExpression="#s = :in_progress AND #w = :owner",
            ExpressionAttributeNames={"#s": "status", "#o": "output", "#w": "owner"},
            ExpressionAttributeValues={
                ":complete": {"S": COMPLETE},
                ":in_progress": {"S": IN_PROGRESS},
                ":owner": {"S": owner},
                ":output": {"S": f"s3://{config.output_bucket}/{key}"},
            },
        )
    except ClientError as exc:
        if aws_code(exc) != "ConditionalCheckFailedException":
            raise
        # Our lock expired and another run took over; it writes the same bytes.
        log("WARNING", "lock lost before completion", object=ref.identity)


def release(config: EtlSettings, ref: ObjectRef, owner: str) -> None:
    """Drop our lock after a retryable failure so the retry need not wait for expiry."""
    try:
        _table().delete_item(
            TableName=config.control_table,
            Key={"id": {"S": ref.identity}},
            ConditionExpression="#s = :in_progress AND #w = :owner",
            ExpressionAttributeNames={"#s": "status", "#w": "owner"},
            ExpressionAttributeValues={":in_progress": {"S": IN_PROGRESS}, ":owner": {"S": owner}},
        )
    except ClientError as exc:
        if aws_code(exc) != "ConditionalCheckFailedException":
            raise


# -- the strategies, behind one interface -----------------------------------------------
class EtlStrategy(abc.ABC):
    """How a duplicate delivery is stopped: `process` publishes an object version's output
    once (WRITTEN or DUPLICATE; raises Permanent for a bad input, anything else to be
    retried), and the class says what the function needs for it, which the component
    reads (components/etl.py) instead of asking which strategy it is. A fifth strategy is
    a subclass in a module of its own, its name added to `Strategy`: defining it
    registers it (`STRATEGY_OF`)."""

    name: ClassVar[Strategy]
    locking: ClassVar[bool] = False
    """It keeps a lock and a COMPLETE record per version in the control table (GetItem,
    UpdateItem, DeleteItem on it, and the table is required)."""
    reads_output: ClassVar[bool] = False
    """It looks for a published output (HEAD: s3:GetObject, and s3:ListBucket for S3 to
    answer 404 rather than 403)."""
    requirements: ClassVar[tuple[str, ...]] = ()
    """What the function's zip packages for it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register(STRATEGY_OF, cls, EtlStrategy)

    @abc.abstractmethod
    def process(
        self, config: EtlSettings, ref: ObjectRef, transform: Transform, context: Any
    ) -> dict[str, Any]:
        """One object version's output, published once."""


STRATEGY_OF: dict[Strategy, EtlStrategy] = {}


class ConditionalWrite(EtlStrategy):
    """The first writer of the output key wins (see the module docstring). A redelivery
    after completion is found by a HEAD first: without it, it re-read and re-transformed
    the whole input to meet the 412 only at the end (0.88x the first run's work for a
    40 MB object)."""

    name = Strategy.CONDITIONAL_WRITE
    reads_output = True
    # No SDK of its own: on a runtime whose botocore predates S3's IfNoneMatch,
    # handlers/s3_publish.py sends the header itself.

    def process(
        self, config: EtlSettings, ref: ObjectRef, transform: Transform, context: Any
    ) -> dict[str, Any]:
        key = output_key(config, ref)
        output = f"s3://{config.output_bucket}/{key}"
        if published(config, key):
            return {"status": DUPLICATE, "output": output}
        try:
            _, size = produce(config, ref, transform, only_if_absent=True)
        except ClientError as exc:
            code = aws_code(exc)
            if code == "PreconditionFailed":  # written meanwhile: a concurrent duplicate
                return {"status": DUPLICATE, "output": output}
            if code == "ConditionalRequestConflict":  # a concurrent write of it: retry
                raise InProgress(f"{ref.identity}: {output} is being written; retry later") from exc
            raise
        return {"status": WRITTEN, "output": output, "bytes": size}


class Deterministic(EtlStrategy):
    """A redelivery finds its output already published: one HEAD, no rewrite."""

    name = Strategy.DETERMINISTIC
    reads_output = True

    def process(
        self, config: EtlSettings, ref: ObjectRef, transform: Transform, context: Any
    ) -> dict[str, Any]:
        key = output_key(config, ref)
        if not published(config, key):
            _, size = produce(config, ref, transform)
            output = f"s3://{config.output_bucket}/{key}"
            return {"status": WRITTEN, "output": output, "bytes": size}
        return {"status": DUPLICATE, "output": f"s3://{config.output_bucket}/{key}"}


class ControlRecord(EtlStrategy):
    """A lock per object version in the control table, then a COMPLETE record."""

    name = Strategy.CONTROL_RECORD
    locking = True

    def process(
        self, config: EtlSettings, ref: ObjectRef, transform: Transform, context: Any
    ) -> dict[str, Any]:
        # One owner per invocation, not the request id alone: two invocations may carry one
        # request id (Lambda's retries of an event do), a request sent before an attempt
        # ended may land after its successor began, and callers with no Lambda context all
        # had "local". A release by another owner never drops this one's lock.
        owner = f"{getattr(context, 'aws_request_id', 'local')}/{uuid.uuid4().hex[:12]}"
        existing = acquire(config, ref, owner, _remaining_ms(context))
        if existing is not None:
            return {"status": DUPLICATE, "output": existing["output"]["S"]}
        try:
            key, size = produce(config, ref, transform)
        except BaseException:
            release(config, ref, owner)  # a malformed input is recorded apart, failed#<id>
            raise
        complete(config, ref, owner, key)
        output = f"s3://{config.output_bucket}/{key}"
        return {"status": WRITTEN, "output": output, "bytes": size}


class Powertools(EtlStrategy):
    """Powertools for AWS Lambda's idempotency utility on the control table."""

    name = Strategy.POWERTOOLS
    locking = True
    requirements = ("aws-lambda-powertools>=3.0,<4",)

    def process(
        self, config: EtlSettings, ref: ObjectRef, transform: Transform, context: Any
    ) -> dict[str, Any]:
        idempotency, produce_once = _powertools(config)
        if context is not None:
            idempotency.register_lambda_context(context)
        obj = {**ref.as_dict(), "identity": ref.identity}
        # Powertools answers a completed key with the stored result: this call's own
        # token in it says the work ran now, any other that an earlier delivery did it.
        token = uuid.uuid4().hex
        result: dict[str, Any] = produce_once(obj=obj, transform=transform, token=token)
        if result.pop("token", None) == token:
            return result
        return {"status": DUPLICATE, "output": result["output"]}


# -- what the strategies use ------------------------------------------------------------
_POWERTOOLS: dict[str, tuple[Any, Any]] = {}  # by repr(settings)


def _powertools(config: EtlSettings) -> tuple[Any, Any]:
    """Powertools' idempotency config and the wrapped `produce`, built once per settings
    on first use: it is the heaviest import here."""
    if repr(config) not in _POWERTOOLS:
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )

        idempotency = IdempotencyConfig(
            event_key_jmespath="identity",
            payload_validation_jmespath="etag",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=config.record_ttl_seconds,
        )
        persistence = DynamoDBPersistenceLayer(
            table_name=config.control_table,
            key_attr="id",
            boto3_client=client("dynamodb"),  # the handlers' one client per service
        )

        @idempotent_function(
            data_keyword_argument="obj", config=idempotency, persistence_store=persistence
        )
        def produce_once(obj: dict[str, Any], transform: Transform, token: str) -> dict[str, Any]:
            ref = ObjectRef(obj["bucket"], obj["key"], obj["version_id"], obj["etag"])
            key, size = produce(config, ref, transform)
            output = f"s3://{config.output_bucket}/{key}"
            return {"status": WRITTEN, "output": output, "bytes": size, "token": token}

        _POWERTOOLS[repr(config)] = (idempotency, produce_once)
    return _POWERTOOLS[repr(config)]


def _remaining_ms(context: Any) -> int:
    return context.get_remaining_time_in_millis() if context is not None else 60_000


def published(config: EtlSettings, key: str) -> bool:
    """Whether the output `key` exists: one HEAD (a 404 needs s3:ListBucket on the output
    bucket, else S3 answers 403, which is raised and retried, never taken for absent)."""
    try:
        client("s3").head_object(Bucket=config.output_bucket, Key=key)
    except ClientError as exc:
        if not object_missing(exc):
            raise
        return False
    return True


# -- entry points ----------------------------------------------------------------------
def transform_once(
    event: Any, transform: Transform, config: EtlSettings, context: Any = None
) -> dict[str, Any]:
    """Every object version the event reports, transformed exactly once (S3 notification
    or EventBridge form, batches included). Returns each object's status: WRITTEN,
    DUPLICATE or REJECTED (with the reason; dead-lettered). Raises what should be retried."""
    try:
        refs = object_refs(event)
    except Permanent as exc:
        _reject(config, event, str(exc), exc, context)
        metrics.emit(PATTERN, Rejected=1)
        return {"results": [{"status": REJECTED, "reason": str(exc)}]}
    results: list[dict[str, Any]] = []
    for ref in refs:
        try:
            result = STRATEGY_OF[config.strategy].process(config, ref, transform, context)
        except Permanent as exc:
            reason = str(exc)
            # The FAILED record is the dedup: one DLQ message per object version.
            if not config.control_table or record_failure(config, ref, reason):
                _reject(config, event, reason, exc, context, object=ref.identity)
            result = {"status": REJECTED, "reason": reason}
        except Exception as exc:
            log(
                "WARNING",
                "transform failed; the event will be retried",
                object=ref.identity,
                error=aws_code(exc) if isinstance(exc, ClientError) else type(exc).__name__,
                exc=exc,
            )
            raise
        log("INFO", result["status"], object=ref.identity, output=result.get("output"))
        results.append({"object": ref.identity, **result})
    statuses = [result["status"] for result in results]
    metrics.emit(
        PATTERN,
        Written=statuses.count(WRITTEN),
        Duplicate=statuses.count(DUPLICATE),
        Rejected=statuses.count(REJECTED),
        Bytes=sum(result.get("bytes", 0) for result in results),
    )
    return {"results": results}


def _reject(
    config: EtlSettings, event: Any, reason: str, exc: Permanent, context: Any, **fields: Any
) -> None:
    if not config.dlq_url:  # no queue of ours: the function's own failure handling keeps it
        raise exc
    dead_letter(event, reason, queue_url=config.dlq_url, context=context, **fields)


@functools.cache
def load_transform(reference: str) -> Transform:
    """The function a `package.module:function` reference names (once per cold start)."""
    module_name, _, name = reference.partition(":")
    try:
        found = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise SettingsError(f"TRANSFORM={reference!r} names no importable function: {exc}") from exc
    if not callable(found):
        raise SettingsError(f"TRANSFORM={reference!r} is not a function")
    return typing.cast(Transform, found)


@lambda_handler
def handler(event: Any, context: Any) -> dict[str, Any]:
    """The component's function: its settings and transform, from its environment."""
    transform = load_transform(TransformSettings.current().transform)
    return transform_once(event, transform, EtlSettings.current(), context)
