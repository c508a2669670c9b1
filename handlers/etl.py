"""Pattern 5, the idempotent S3 ETL: one output per input object version, however often it runs.

Every strategy transforms the exact object version named by the event, builds the
whole output in memory and publishes it under a key derived from the input
(`<prefix><key>.<version or ETag>.jsonl`). Strategies (`EtlSettings.strategy`):
- conditional-write: one `PutObject(IfNoneMatch="*")` straight to the output key. S3
  writes it only if no object has that key: the first writer wins, a duplicate gets
  412 PreconditionFailed (a DUPLICATE), a concurrent conditional write may get 409
  ConditionalRequestConflict (retried). No table, no HEAD, no staging; a PUT is atomic,
  so a crash leaves no partial output.
The others stage the output, then publish it with one atomic CopyObject (a crash leaves
at most a staging object, which the retry overwrites and removes):
- deterministic: no table; a redelivery finds the output under its derived key and
  stops there, and a concurrent duplicate rewrites the same bytes under the same key.
- control-record: a DynamoDB record per object version, IN_PROGRESS (a lock that
  expires with this invocation's remaining time) then COMPLETE with the output. A
  concurrent duplicate sees the live lock and fails with a retryable error; a
  crashed run's lock expires and the next delivery redoes the work.
- powertools: Powertools for AWS Lambda's idempotency utility on the same table.
A malformed input gets a FAILED record (id `failed#<object version>`) with the
reason and one DLQ message however often it is delivered; it is never half-written.
"""

from __future__ import annotations

import dataclasses
import time
import typing
from typing import Any, Literal

from handlers.csv_transform import transform
from handlers.errors import BadInput, ClientError, Permanent, Retryable, aws_code, object_missing
from handlers.runtime import client, dead_letter, log
from handlers.s3_events import ObjectRef, object_refs
from handlers.settings import Settings

Strategy = Literal["conditional-write", "deterministic", "control-record", "powertools"]
STRATEGIES: tuple[Strategy, ...] = typing.get_args(Strategy)
STAGING_PREFIX = "_staging/"


@dataclasses.dataclass(frozen=True)
class EtlSettings(Settings):
    strategy: Strategy
    output_bucket: str
    output_prefix: str
    control_table: str
    record_ttl_seconds: int
    schema: dict[str, str]  # see handlers.csv_transform


IN_PROGRESS, COMPLETE, FAILED = "IN_PROGRESS", "COMPLETE", "FAILED"
WRITTEN, DUPLICATE, REJECTED = "WRITTEN", "DUPLICATE", "REJECTED"


class InProgress(Retryable):
    """Another invocation holds the lock on this object version: retry later."""


def output_key(config: EtlSettings, ref: ObjectRef) -> str:
    return f"{config.output_prefix}{ref.key}.{ref.revision}.jsonl"


# -- the work itself ------------------------------------------------------------------
def render(config: EtlSettings, ref: ObjectRef) -> bytes:
    """Read exactly this version and transform it (BadInput if it is gone or malformed).
    In an unversioned bucket "this version" is the write with the event's ETag: read only
    if the object still has it, never a later write under this write's output name."""
    exact = {"VersionId": ref.version_id} if ref.version_id else {"IfMatch": ref.revision}
    try:
        data = client("s3").get_object(Bucket=ref.bucket, Key=ref.key, **exact)["Body"].read()
    except ClientError as exc:
        if aws_code(exc) in ("NoSuchKey", "NoSuchVersion"):
            raise BadInput(f"s3://{ref.bucket}/{ref.key} ({ref.revision}) is gone") from exc
        if aws_code(exc) == "PreconditionFailed":
            raise BadInput(
                f"s3://{ref.bucket}/{ref.key} was overwritten before {ref.revision} was read "
                "(an unversioned bucket keeps no old writes); the newer write has its own event"
            ) from exc
        raise
    return transform(data, config.schema)


def produce(config: EtlSettings, ref: ObjectRef) -> str:
    """Render, stage, publish atomically; the output key."""
    s3 = client("s3")
    body = render(config, ref)
    key = output_key(config, ref)
    staging = STAGING_PREFIX + key
    s3.put_object(
        Bucket=config.output_bucket, Key=staging, Body=body, ContentType="application/x-ndjson"
    )
    try:
        s3.copy_object(
            Bucket=config.output_bucket,
            Key=key,
            CopySource={"Bucket": config.output_bucket, "Key": staging},
        )
    except ClientError as exc:
        # A concurrent run of the deterministic strategy published the same bytes and
        # removed the shared staging object first: done, if the output is there.
        if aws_code(exc) != "NoSuchKey":
            raise
        s3.head_object(Bucket=config.output_bucket, Key=key)
        return key
    s3.delete_object(Bucket=config.output_bucket, Key=staging)
    return key


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


def process_with_control_record(
    config: EtlSettings, ref: ObjectRef, context: Any
) -> dict[str, Any]:
    owner = getattr(context, "aws_request_id", "local")
    existing = acquire(config, ref, owner, _remaining_ms(context))
    if existing is not None:
        return {"status": DUPLICATE, "output": existing["output"]["S"]}
    try:
        key = produce(config, ref)
    except BaseException:
        release(config, ref, owner)  # a malformed input is recorded apart, under failed#<id>
        raise
    complete(config, ref, owner, key)
    return {"status": WRITTEN, "output": f"s3://{config.output_bucket}/{key}"}


# -- Powertools ------------------------------------------------------------------------
def process_with_powertools(config: EtlSettings, ref: ObjectRef, context: Any) -> dict[str, Any]:
    idempotency, produce_once = _powertools(config)
    if context is not None:
        idempotency.register_lambda_context(context)
    result: dict[str, Any] = produce_once(obj={**ref.as_dict(), "identity": ref.identity})
    return result


_POWERTOOLS: dict[str, tuple[Any, Any]] = {}  # by repr(settings): they hold a dict


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
        persistence = DynamoDBPersistenceLayer(table_name=config.control_table, key_attr="id")

        @idempotent_function(
            data_keyword_argument="obj", config=idempotency, persistence_store=persistence
        )
        def produce_once(obj: dict[str, Any]) -> dict[str, Any]:
            ref = ObjectRef(obj["bucket"], obj["key"], obj["version_id"], obj["etag"])
            return {
                "status": WRITTEN,
                "output": f"s3://{config.output_bucket}/{produce(config, ref)}",
            }

        _POWERTOOLS[repr(config)] = (idempotency, produce_once)
    return _POWERTOOLS[repr(config)]


def _remaining_ms(context: Any) -> int:
    return context.get_remaining_time_in_millis() if context is not None else 60_000


# -- conditional write -----------------------------------------------------------------
def process_conditionally(config: EtlSettings, ref: ObjectRef) -> dict[str, Any]:
    """The first writer of the output key wins (see the module docstring)."""
    key = output_key(config, ref)
    output = f"s3://{config.output_bucket}/{key}"
    try:
        client("s3").put_object(
            Bucket=config.output_bucket,
            Key=key,
            Body=render(config, ref),
            ContentType="application/x-ndjson",
            IfNoneMatch="*",
        )
    except ClientError as exc:
        code = aws_code(exc)
        if code == "PreconditionFailed":  # the output exists: this run is a duplicate
            return {"status": DUPLICATE, "output": output}
        if code == "ConditionalRequestConflict":  # a concurrent write of it: S3 says retry
            raise InProgress(f"{ref.identity}: a concurrent write of {key}; retry later") from exc
        raise
    return {"status": WRITTEN, "output": output}


# -- entry point -----------------------------------------------------------------------
def process(config: EtlSettings, ref: ObjectRef, context: Any) -> dict[str, Any]:
    if config.strategy == "conditional-write":
        return process_conditionally(config, ref)
    if config.strategy == "control-record":
        return process_with_control_record(config, ref, context)
    if config.strategy == "powertools":
        return process_with_powertools(config, ref, context)
    return process_deterministically(config, ref)


def process_deterministically(config: EtlSettings, ref: ObjectRef) -> dict[str, Any]:
    """A redelivery finds its output already published: one HEAD, no rewrite."""
    key = output_key(config, ref)
    try:
        client("s3").head_object(Bucket=config.output_bucket, Key=key)
    except ClientError as exc:
        if not object_missing(exc):
            raise
        return {"status": WRITTEN, "output": f"s3://{config.output_bucket}/{produce(config, ref)}"}
    return {"status": DUPLICATE, "output": f"s3://{config.output_bucket}/{key}"}


def handler(event: Any, context: Any) -> dict[str, Any]:
    return process_event(EtlSettings.current(), event, context)


def process_event(config: EtlSettings, event: Any, context: Any) -> dict[str, Any]:
    """Every object version the event reports, each exactly once (S3 notification or
    EventBridge form, batches included)."""
    try:
        refs = object_refs(event)
    except Permanent as exc:
        dead_letter(event, str(exc))
        return {"results": [{"status": REJECTED, "reason": str(exc)}]}
    results = []
    for ref in refs:
        try:
            result = process(config, ref, context)
        except Permanent as exc:
            reason = str(exc)
            # The FAILED record is the dedup: one DLQ message per object version.
            if record_failure(config, ref, reason):
                dead_letter(event, reason, object=ref.identity)
            result = {"status": REJECTED, "reason": reason}
        except Exception as exc:
            log(
                "WARNING",
                "transform failed; the event will be retried",
                object=ref.identity,
                error=aws_code(exc) if isinstance(exc, ClientError) else type(exc).__name__,
                detail=str(exc)[:300],
            )
            raise
        log("INFO", result["status"], object=ref.identity, output=result.get("output"))
        results.append({"object": ref.identity, **result})
    return {"results": results}
