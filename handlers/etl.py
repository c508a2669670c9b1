"""Pattern 5, the idempotent S3 ETL: one output per input object version, however often it runs.

Every strategy transforms the exact object version named by the event, builds the
whole output in memory, stages it, then publishes it under a key derived from the
input (`<prefix><key>.<version or ETag>.jsonl`) with one atomic CopyObject. So a
crash leaves at most a staging object, which the retry overwrites and removes.
Strategies (env STRATEGY):
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

import json
import os
import time
from typing import Any

from handlers.csv_transform import DEFAULT_SCHEMA, transform
from handlers.errors import BadInput, ClientError, Permanent, Retryable, aws_code
from handlers.runtime import client, dead_letter, log
from handlers.s3_events import ObjectRef, object_refs

STRATEGY = os.environ.get("STRATEGY", "deterministic")
STRATEGIES = ("deterministic", "control-record", "powertools")
OUTPUT_BUCKET = os.environ.get("OUTPUT_BUCKET", "")
OUTPUT_PREFIX = os.environ.get("OUTPUT_PREFIX", "out/")
STAGING_PREFIX = "_staging/"
CONTROL_TABLE = os.environ.get("CONTROL_TABLE", "")
RECORD_TTL_SECONDS = int(os.environ.get("RECORD_TTL_SECONDS", str(7 * 24 * 3600)))
SCHEMA: dict[str, str] = json.loads(os.environ.get("SCHEMA", "null")) or DEFAULT_SCHEMA
FAULT_INJECTION = os.environ.get("FAULT_INJECTION", "")

IN_PROGRESS, COMPLETE, FAILED = "IN_PROGRESS", "COMPLETE", "FAILED"
WRITTEN, DUPLICATE, REJECTED = "WRITTEN", "DUPLICATE", "REJECTED"


class InProgress(Retryable):
    """Another invocation holds the lock on this object version: retry later."""


def output_key(ref: ObjectRef) -> str:
    return f"{OUTPUT_PREFIX}{ref.key}.{ref.revision}.jsonl"


# -- the work itself ------------------------------------------------------------------
def produce(ref: ObjectRef) -> str:
    """Read exactly this version, transform, stage, publish atomically; the output key."""
    s3 = client("s3")
    version = {"VersionId": ref.version_id} if ref.version_id else {}
    try:
        data = s3.get_object(Bucket=ref.bucket, Key=ref.key, **version)["Body"].read()
    except ClientError as exc:
        if aws_code(exc) in ("NoSuchKey", "NoSuchVersion"):
            raise BadInput(f"s3://{ref.bucket}/{ref.key} ({ref.revision}) is gone") from exc
        raise
    body = transform(data, SCHEMA)
    key = output_key(ref)
    staging = STAGING_PREFIX + key
    crash = _crash_armed(ref, staging)
    s3.put_object(Bucket=OUTPUT_BUCKET, Key=staging, Body=body, ContentType="application/x-ndjson")
    if crash:
        log("ERROR", "fault injection: crashing after staging", staging=staging)
        os._exit(137)  # as if the sandbox were killed: no cleanup, no error report
    try:
        s3.copy_object(
            Bucket=OUTPUT_BUCKET, Key=key, CopySource={"Bucket": OUTPUT_BUCKET, "Key": staging}
        )
    except ClientError as exc:
        # A concurrent run of the deterministic strategy published the same bytes and
        # removed the shared staging object first: done, if the output is there.
        if aws_code(exc) != "NoSuchKey":
            raise
        s3.head_object(Bucket=OUTPUT_BUCKET, Key=key)
        return key
    s3.delete_object(Bucket=OUTPUT_BUCKET, Key=staging)
    return key


def _crash_armed(ref: ObjectRef, staging: str) -> bool:
    """Test hook (env FAULT_INJECTION=crash-after-staging, never set on AWS stacks):
    crash once for keys containing 'crash-once', i.e. when no earlier run staged."""
    if FAULT_INJECTION != "crash-after-staging" or "crash-once" not in ref.key:
        return False
    try:
        client("s3").head_object(Bucket=OUTPUT_BUCKET, Key=staging)
    except ClientError as exc:
        if aws_code(exc) in ("404", "NoSuchKey", "NotFound"):
            return True
        raise
    return False


# -- control records -----------------------------------------------------------------
def _table() -> Any:
    return client("dynamodb")


def record_failure(ref: ObjectRef, reason: str) -> bool:
    """A FAILED record with the reason; False when this version already has one."""
    now = int(time.time())
    try:
        _table().put_item(
            TableName=CONTROL_TABLE,
            Item={
                "id": {"S": f"failed#{ref.identity}"},
                "status": {"S": FAILED},
                "reason": {"S": reason[:1000]},
                "expiration": {"N": str(now + RECORD_TTL_SECONDS)},
            },
            ConditionExpression="attribute_not_exists(id)",
        )
    except ClientError as exc:
        if aws_code(exc) == "ConditionalCheckFailedException":
            return False
        raise
    return True


def acquire(ref: ObjectRef, owner: str, remaining_ms: int) -> dict[str, Any] | None:
    """Take the lock (None), or return the COMPLETE record; InProgress while it is held."""
    now = time.time()
    try:
        _table().put_item(
            TableName=CONTROL_TABLE,
            Item={
                "id": {"S": ref.identity},
                "status": {"S": IN_PROGRESS},
                "owner": {"S": owner},
                "lock_expires": {"N": f"{now + remaining_ms / 1000:.3f}"},
                "expiration": {"N": str(int(now) + RECORD_TTL_SECONDS)},
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
        item = exc.response.get("Item") or _table().get_item(  # type: ignore[typeddict-item]
            TableName=CONTROL_TABLE, Key={"id": {"S": ref.identity}}, ConsistentRead=True
        ).get("Item")
    if item is None:  # expired by TTL between the two calls: try once more
        return acquire(ref, owner, remaining_ms)
    if item["status"]["S"] == IN_PROGRESS:
        raise InProgress(f"{ref.identity} is being processed by {item['owner']['S']}; retry later")
    return item


def complete(ref: ObjectRef, owner: str, key: str) -> None:
    try:
        _table().update_item(
            TableName=CONTROL_TABLE,
            Key={"id": {"S": ref.identity}},
            UpdateExpression="SET #s = :complete, #o = :output REMOVE lock_expires",
            ConditionExpression="#s = :in_progress AND #w = :owner",
            ExpressionAttributeNames={"#s": "status", "#o": "output", "#w": "owner"},
            ExpressionAttributeValues={
                ":complete": {"S": COMPLETE},
                ":in_progress": {"S": IN_PROGRESS},
                ":owner": {"S": owner},
                ":output": {"S": f"s3://{OUTPUT_BUCKET}/{key}"},
            },
        )
    except ClientError as exc:
        if aws_code(exc) != "ConditionalCheckFailedException":
            raise
        # Our lock expired and another run took over; it writes the same bytes.
        log("WARNING", "lock lost before completion", object=ref.identity)


def release(ref: ObjectRef, owner: str) -> None:
    """Drop our lock after a retryable failure so the retry need not wait for expiry."""
    try:
        _table().delete_item(
            TableName=CONTROL_TABLE,
            Key={"id": {"S": ref.identity}},
            ConditionExpression="#s = :in_progress AND #w = :owner",
            ExpressionAttributeNames={"#s": "status", "#w": "owner"},
            ExpressionAttributeValues={":in_progress": {"S": IN_PROGRESS}, ":owner": {"S": owner}},
        )
    except ClientError as exc:
        if aws_code(exc) != "ConditionalCheckFailedException":
            raise


def process_with_control_record(ref: ObjectRef, context: Any) -> dict[str, Any]:
    owner = getattr(context, "aws_request_id", "local")
    existing = acquire(ref, owner, _remaining_ms(context))
    if existing is not None:
        return {"status": DUPLICATE, "output": existing["output"]["S"]}
    try:
        key = produce(ref)
    except BaseException:
        release(ref, owner)  # a malformed input is recorded apart, under failed#<id>
        raise
    complete(ref, owner, key)
    return {"status": WRITTEN, "output": f"s3://{OUTPUT_BUCKET}/{key}"}


# -- Powertools ------------------------------------------------------------------------
_powertools: dict[str, Any] = {}


def process_with_powertools(ref: ObjectRef, context: Any) -> dict[str, Any]:
    if not _powertools:  # imported on first use only: it is the heaviest import here
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )

        config = IdempotencyConfig(
            event_key_jmespath="identity",
            payload_validation_jmespath="etag",
            raise_on_no_idempotency_key=True,
            expires_after_seconds=RECORD_TTL_SECONDS,
        )
        persistence = DynamoDBPersistenceLayer(table_name=CONTROL_TABLE, key_attr="id")

        @idempotent_function(
            data_keyword_argument="obj", config=config, persistence_store=persistence
        )
        def produce_once(obj: dict[str, Any]) -> dict[str, Any]:
            ref = ObjectRef(obj["bucket"], obj["key"], obj["version_id"], obj["etag"])
            return {"status": WRITTEN, "output": f"s3://{OUTPUT_BUCKET}/{produce(ref)}"}

        _powertools.update(config=config, produce_once=produce_once)
    if context is not None:
        _powertools["config"].register_lambda_context(context)
    return _powertools["produce_once"](obj={**ref.as_dict(), "identity": ref.identity})


def _remaining_ms(context: Any) -> int:
    return context.get_remaining_time_in_millis() if context is not None else 60_000


# -- entry point -----------------------------------------------------------------------
def process(ref: ObjectRef, context: Any) -> dict[str, Any]:
    if STRATEGY == "control-record":
        return process_with_control_record(ref, context)
    if STRATEGY == "powertools":
        return process_with_powertools(ref, context)
    return process_deterministically(ref)


def process_deterministically(ref: ObjectRef) -> dict[str, Any]:
    """A redelivery finds its output already published: one HEAD, no rewrite."""
    key = output_key(ref)
    try:
        client("s3").head_object(Bucket=OUTPUT_BUCKET, Key=key)
    except ClientError as exc:
        if aws_code(exc) not in ("404", "NoSuchKey", "NotFound"):
            raise
        return {"status": WRITTEN, "output": f"s3://{OUTPUT_BUCKET}/{produce(ref)}"}
    return {"status": DUPLICATE, "output": f"s3://{OUTPUT_BUCKET}/{key}"}


def handler(event: Any, context: Any) -> dict[str, Any]:
    if STRATEGY not in STRATEGIES:
        raise ValueError(f"STRATEGY must be one of {STRATEGIES}, got {STRATEGY!r}")
    try:
        refs = object_refs(event)
    except Permanent as exc:
        dead_letter(event, str(exc))
        return {"results": [{"status": REJECTED, "reason": str(exc)}]}
    results = []
    for ref in refs:
        try:
            result = process(ref, context)
        except Permanent as exc:
            reason = str(exc)
            # The FAILED record is the dedup: one DLQ message per object version.
            if record_failure(ref, reason):
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
