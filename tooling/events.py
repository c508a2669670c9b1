"""S3 events as AWS delivers them, for the tests, the demo and the benchmarks (one builder
each, so a field AWS sends is added in one place).

- `eventbridge`: the EventBridge "Object Created" event (S3 user guide, ev-events): the
  key as it is.
- `notification`: an S3 event notification (notification-content-structure): one record,
  its key URL-encoded as S3 writes it.
- `rebroadcast`: a PutEvents entry that puts an EventBridge event on the bus again, as an
  at-least-once redelivery would (LocalStack takes the `aws.s3` source; AWS refuses it).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any
from urllib.parse import quote_plus


def eventbridge(
    bucket: str,
    key: str,
    version: str | None = None,
    etag: str | None = None,
    sequencer: str = "0001",
    event_id: str | None = None,
) -> dict[str, Any]:
    """Without `event_id`, the id is derived from the object version, as a Lambda retry of
    one delivery keeps it."""
    obj: dict[str, Any] = {"key": key, "size": 1, "sequencer": sequencer}
    if version:
        obj["version-id"] = version
    if etag:
        obj["etag"] = etag.strip('"')
    return {
        "version": "0",
        "id": event_id or str(uuid.uuid5(uuid.NAMESPACE_URL, f"s3://{bucket}/{key}#{version}")),
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": "000000000000",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "region": "us-east-1",
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": obj,
            "reason": "PutObject",
        },
    }


def notification(
    bucket: str, key: str, version: str | None = None, etag: str | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {"key": quote_plus(key, safe="/"), "size": 1, "sequencer": "01"}
    if version:
        obj["versionId"] = version
    if etag:
        obj["eTag"] = etag.strip('"')
    record = {
        "eventSource": "aws:s3",
        "eventName": "ObjectCreated:Put",
        "s3": {"bucket": {"name": bucket}, "object": obj},
    }
    return {"Records": [record]}


def rebroadcast(event: dict[str, Any]) -> dict[str, Any]:
    return {
        "Source": event["source"],
        "DetailType": event["detail-type"],
        "Detail": json.dumps(event["detail"]),
        "Resources": event.get("resources", []),
    }
