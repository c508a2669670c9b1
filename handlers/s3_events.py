"""The S3 objects an event is about, from S3 notifications or EventBridge alike."""

from __future__ import annotations

import dataclasses
from typing import Any
from urllib.parse import unquote_plus

from exactly_once.handlers.errors import BadEvent


@dataclasses.dataclass(frozen=True)
class ObjectRef:
    bucket: str
    key: str
    version_id: str | None
    etag: str | None

    @property
    def revision(self) -> str:
        """What tells two writes of the same key apart: the version id, else the ETag."""
        revision = self.version_id or self.etag
        if not revision:
            raise BadEvent(
                f"s3://{self.bucket}/{self.key}: the event has neither version id nor ETag"
            )
        return revision

    @property
    def identity(self) -> str:
        """One id per object version: the idempotency key of the ETL."""
        return f"{self.bucket}/{self.key}#{self.revision}"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _ref(bucket: Any, obj: Any, version_field: str, etag_field: str, encoded: bool) -> ObjectRef:
    name = bucket.get("name") if isinstance(bucket, dict) else None
    key = obj.get("key") if isinstance(obj, dict) else None
    if not isinstance(name, str) or not name or not isinstance(key, str) or not key:
        raise BadEvent("the event names no S3 bucket and object key")
    return ObjectRef(
        bucket=name,
        key=unquote_plus(key) if encoded else key,
        version_id=obj.get(version_field) or None,
        etag=(obj.get(etag_field) or "").strip('"') or None,
    )


def object_refs(event: Any) -> list[ObjectRef]:
    """Every object the event reports; BadEvent when it reports none."""
    if not isinstance(event, dict):
        raise BadEvent(f"event is {type(event).__name__}, not an object")
    if isinstance(event.get("Records"), list):
        refs = []
        for record in event["Records"]:
            s3 = record.get("s3") if isinstance(record, dict) else None
            if not isinstance(s3, dict):
                raise BadEvent("a record has no 's3' object (not an S3 notification)")
            # "The object key name value is URL encoded" (S3 user guide,
            # notification-content-structure): "red flower.jpg" arrives as "red+flower.jpg".
            refs.append(_ref(s3.get("bucket"), s3.get("object"), "versionId", "eTag", True))
        if not refs:
            raise BadEvent("the notification has no records")
        return refs
    if isinstance(event.get("detail"), dict):
        detail = event["detail"]
        # EventBridge's S3 events carry the key as it is (S3 user guide, ev-events).
        return [_ref(detail.get("bucket"), detail.get("object"), "version-id", "etag", False)]
    raise BadEvent("neither an S3 notification (Records) nor an EventBridge S3 event (detail)")
