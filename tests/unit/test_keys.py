"""Key strategies: what makes two events "the same"."""

from __future__ import annotations

import pytest

from exactly_once.handlers.errors import BadEvent
from exactly_once.handlers.keys import key_extractor
from tests.unit.conftest import s3_event


def test_object_key() -> None:
    assert key_extractor("object-key")(s3_event(key="in/a.csv")) == "uploads/in/a.csv"


@pytest.mark.parametrize("strategy", ["object-key", "bucket-key-version", "key-sequencer"])
def test_every_s3_strategy_tells_two_buckets_apart(strategy: str) -> None:
    # GIVEN one key written to two buckets a rule's pattern both matches
    extract = key_extractor(strategy)
    first, second = s3_event(bucket="b1", key="x"), s3_event(bucket="b2", key="x")
    # THEN they are two events, never one
    assert extract(first) != extract(second)


@pytest.mark.parametrize("key", ["a b.csv", "a+b.csv", "données/é.csv", "100%25.csv"])
def test_keys_are_taken_as_eventbridge_sends_them(key: str) -> None:
    # EventBridge's S3 events carry the key itself, not URL-encoded: nothing is decoded
    assert key_extractor("object-key")(s3_event(bucket="b", key=key)) == f"b/{key}"


def test_bucket_key_version() -> None:
    extract = key_extractor("bucket-key-version")
    assert extract(s3_event(version="v9")) == "uploads/in/a.csv#v9"


def test_bucket_key_version_needs_a_versioned_bucket() -> None:
    with pytest.raises(BadEvent, match="versioning"):
        key_extractor("bucket-key-version")(s3_event(version=None))


def test_sequencer_tells_an_overwrite_from_a_redelivery() -> None:
    extract = key_extractor("key-sequencer")
    first, redelivered = s3_event(sequencer="0A"), s3_event(sequencer="0A", event_id="e-2")
    overwrite = s3_event(sequencer="0B")
    assert extract(first) == extract(redelivered) != extract(overwrite)


def test_jmespath_strategy() -> None:
    extract = key_extractor("jmespath:detail.order.id")
    assert extract({"detail": {"order": {"id": 42}}}) == "42"


@pytest.mark.parametrize(
    "event",
    [
        None,
        [],
        "text",
        {},
        {"detail": "x"},
        {"detail": {"object": {}}},
        {"detail": {"object": {"key": ""}, "bucket": {"name": "b"}}},
        {"detail": {"object": {"key": 5}, "bucket": {"name": "b"}}},
        {"detail": {"object": {"key": "k"}}},
    ],
)
def test_events_without_a_key_are_bad(event: object) -> None:
    with pytest.raises(BadEvent):
        key_extractor("object-key")(event)


@pytest.mark.parametrize("value", [None, "", True, {"a": 1}, [1]])
def test_jmespath_needs_a_scalar(value: object) -> None:
    with pytest.raises(BadEvent):
        key_extractor("jmespath:k")({"k": value})


def test_unknown_strategy_names_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="object-key"):
        key_extractor("guess")
