"""Which part of an event identifies "the same event": the key strategies.

One strategy is chosen per deployment (env KEY_STRATEGY):
- ``object-key``: bucket and object key; an overwrite of the key is a duplicate.
- ``bucket-key-version``: bucket, key and version id; every new version is new work
  (the bucket must be versioned).
- ``key-sequencer``: bucket, key and S3's sequencer, which grows with every write of the
  key, so an overwrite is new work while a redelivery of the same write is not.
- ``jmespath:<expression>``: any string or number in the event.

Every S3 strategy names the bucket: a rule whose pattern matches several buckets must
never take `b1/x` and `b2/x` for one object. Keys are EventBridge's `detail.object.key`,
the key as it is (S3 user guide, ev-events; not URL-encoded as in notifications).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from exactly_once.handlers.errors import BadEvent


def _s3(event: Any) -> tuple[str, dict[str, Any]]:
    if not isinstance(event, dict):
        raise BadEvent(f"event is {type(event).__name__}, not an object")
    detail = event.get("detail")
    if not isinstance(detail, dict):
        raise BadEvent("event has no 'detail' object (not an EventBridge S3 event)")
    obj = detail.get("object")
    bucket = detail.get("bucket")
    if not isinstance(obj, dict) or not isinstance(obj.get("key"), str) or not obj["key"]:
        raise BadEvent("event has no detail.object.key")
    name = bucket.get("name") if isinstance(bucket, dict) else None
    if not isinstance(name, str) or not name:
        raise BadEvent("event has no detail.bucket.name")
    return name, obj


def object_key(event: Any) -> str:
    bucket, obj = _s3(event)
    return f"{bucket}/{obj['key']}"


def bucket_key_version(event: Any) -> str:
    bucket, obj = _s3(event)
    version = obj.get("version-id")
    if not isinstance(version, str) or not version:
        raise BadEvent(
            "event has no detail.object.version-id: enable bucket versioning or pick another "
            "key strategy"
        )
    return f"{bucket}/{obj['key']}#{version}"


def key_sequencer(event: Any) -> str:
    bucket, obj = _s3(event)
    sequencer = obj.get("sequencer")
    if not isinstance(sequencer, str) or not sequencer:
        raise BadEvent("event has no detail.object.sequencer")
    return f"{bucket}/{obj['key']}#{sequencer}"


def jmespath_key(expression: str) -> Callable[[Any], str]:
    import jmespath  # lazily: only this strategy needs it

    compiled = jmespath.compile(expression)

    def extract(event: Any) -> str:
        if not isinstance(event, dict):
            raise BadEvent(f"event is {type(event).__name__}, not an object")
        value = compiled.search(event)
        if isinstance(value, bool) or not isinstance(value, str | int | float) or value == "":
            raise BadEvent(f"no string or number at {expression!r} (found {value!r})")
        return str(value)

    return extract


STRATEGIES: dict[str, Callable[[Any], str]] = {
    "object-key": object_key,
    "bucket-key-version": bucket_key_version,
    "key-sequencer": key_sequencer,
}


def key_extractor(strategy: str) -> Callable[[Any], str]:
    """The extractor for a strategy name; a ValueError names the valid ones."""
    if strategy.startswith("jmespath:"):
        return jmespath_key(strategy.removeprefix("jmespath:"))
    try:
        return STRATEGIES[strategy]
    except KeyError:
        valid = ", ".join([*STRATEGIES, "jmespath:<expression>"])
        raise ValueError(f"unknown key strategy {strategy!r}; use one of {valid}") from None
