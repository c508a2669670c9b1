"""The ETL handler per strategy, in-process against moto (S3, DynamoDB, SQS)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from deploy import events
from handlers import etl, runtime
from handlers.csv_transform import DEFAULT_SCHEMA, transform
from handlers.errors import BadEvent, BadInput
from handlers.s3_events import object_refs

CSV = b"id,name,amount\n1,alpha,2.5\n"


@pytest.fixture
def world(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    s3, ddb = runtime.client("s3"), runtime.client("dynamodb")
    for bucket in ("in-bucket", "out-bucket"):
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket="in-bucket", VersioningConfiguration={"Status": "Enabled"})
    ddb.create_table(
        TableName="control",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    queue = runtime.client("sqs").create_queue(QueueName="dlq")["QueueUrl"]
    monkeypatch.setattr(etl, "_POWERTOOLS", {})  # Powertools' wrapper holds the moto client
    monkeypatch.setenv("DLQ_URL", queue)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "etl-test")
    yield {"queue": queue}


def settings(strategy: str) -> etl.EtlSettings:
    return etl.EtlSettings(
        strategy=strategy,  # type: ignore[arg-type]
        output_bucket="out-bucket",
        output_prefix="out/",
        control_table="control",
        record_ttl_seconds=7 * 24 * 3600,
        schema=dict(DEFAULT_SCHEMA),
    )


def context(request_id: str = "req-1", remaining_ms: int = 30_000) -> SimpleNamespace:
    deadline = time.time() * 1000 + remaining_ms
    return SimpleNamespace(
        aws_request_id=request_id,
        function_name="etl-test",
        memory_limit_in_mb=128,
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:etl-test",
        get_remaining_time_in_millis=lambda: int(deadline - time.time() * 1000),
    )


def notification(key: str, body: bytes = CSV) -> dict[str, Any]:
    put = runtime.client("s3").put_object(Bucket="in-bucket", Key=key, Body=body)
    return events.notification("in-bucket", key, put["VersionId"], put["ETag"])


def outputs() -> list[str]:
    listing = runtime.client("s3").list_objects_v2(Bucket="out-bucket")
    return [o["Key"] for o in listing.get("Contents", [])]


def records() -> list[dict]:
    return runtime.client("dynamodb").scan(TableName="control")["Items"]


@pytest.mark.parametrize("strategy", etl.STRATEGIES)
def test_each_strategy_writes_one_output_however_often_it_runs(
    world: dict[str, str], strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings(strategy)
    event = notification("in/a b.csv")
    for attempt in range(3):
        etl.process_event(config, event, context(f"req-{attempt}"))
    [key] = outputs()
    assert key.startswith("out/in/a b.csv.") and key.endswith(".jsonl")
    body = runtime.client("s3").get_object(Bucket="out-bucket", Key=key)["Body"].read()
    assert json.loads(body) == {"amount": 2.5, "id": 1, "name": "alpha"}
    done = [r for r in records() if r["status"]["S"] in ("COMPLETE", "COMPLETED")]
    assert len(done) == (0 if strategy in ("deterministic", "conditional-write") else 1)


def test_control_record_reports_duplicates(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings("control-record")
    event = notification("k.csv")
    first = etl.process_event(config, event, context("a"))["results"][0]
    second = etl.process_event(config, event, context("b"))["results"][0]
    assert (first["status"], second["status"]) == ("WRITTEN", "DUPLICATE")
    assert first["output"] == second["output"]


def test_a_live_lock_makes_a_concurrent_duplicate_back_off(world: dict[str, str]) -> None:
    [ref] = object_refs(notification("k.csv"))
    config = settings("control-record")
    assert etl.acquire(config, ref, "first", remaining_ms=30_000) is None
    with pytest.raises(etl.InProgress, match="first"):
        etl.acquire(config, ref, "second", remaining_ms=30_000)


def test_a_crashed_runs_lock_expires_and_the_next_delivery_redoes_the_work(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings("control-record")
    event = notification("k.csv")
    [ref] = object_refs(event)
    etl.acquire(config, ref, "crashed", remaining_ms=1)  # a run that died holding a 1 ms lock
    time.sleep(0.01)
    result = etl.process_event(config, event, context("retry"))["results"][0]
    assert result["status"] == "WRITTEN"
    assert len(outputs()) == 1


def test_a_retryable_failure_releases_the_lock(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings("control-record")
    event = notification("k.csv")

    def broken(config: etl.EtlSettings, ref: Any) -> str:
        raise ConnectionError("S3 went away")

    monkeypatch.setattr(etl, "produce", broken)
    with pytest.raises(ConnectionError):
        etl.process_event(config, event, context())
    assert records() == []  # the next delivery need not wait for the lock to expire


@pytest.mark.parametrize("strategy", etl.STRATEGIES)
def test_malformed_input_is_recorded_dead_lettered_once_and_never_written(
    world: dict[str, str], strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings(strategy)
    event = notification("bad.csv", b"id,name,amount\n1,alpha,lots\n")
    for _ in range(2):
        assert etl.process_event(config, event, context())["results"][0]["status"] == "REJECTED"
    [failure] = [r for r in records() if r["id"]["S"].startswith("failed#")]
    assert "amount" in failure["reason"]["S"]
    messages = runtime.client("sqs").receive_message(
        QueueUrl=world["queue"], MaxNumberOfMessages=10
    )
    assert len(messages["Messages"]) == 1
    assert outputs() == []


def test_a_non_s3_event_goes_to_the_dlq(world: dict[str, str]) -> None:
    result = etl.process_event(settings("deterministic"), {"hello": 1}, context())
    assert result["results"][0]["status"] == "REJECTED"
    messages = runtime.client("sqs").receive_message(QueueUrl=world["queue"])
    assert "neither" in json.loads(messages["Messages"][0]["Body"])["reason"]


# (the key S3 wrote, as a notification carries it: URL-encoded, spaces as '+')
KEYS = [
    ("a b.csv", "a+b.csv"),
    ("a+b.csv", "a%2Bb.csv"),
    ("données/é.csv", "donn%C3%A9es/%C3%A9.csv"),
    ("100%.csv", "100%25.csv"),
]


@pytest.mark.parametrize(("key", "encoded"), KEYS)
def test_a_notification_key_is_url_decoded(key: str, encoded: str) -> None:
    # "The object key name value is URL encoded" (S3 notification-content-structure)
    record = {"s3": {"bucket": {"name": "b"}, "object": {"key": encoded, "versionId": "v"}}}
    [ref] = object_refs({"Records": [record]})
    assert (ref.key, ref.identity) == (key, f"b/{key}#v")


@pytest.mark.parametrize(("key", "encoded"), KEYS)
def test_an_eventbridge_key_is_taken_as_it_is(key: str, encoded: str) -> None:
    # EventBridge's S3 events carry the key itself (S3 user guide, ev-events)
    detail = {"bucket": {"name": "b"}, "object": {"key": key, "version-id": "v"}}
    [ref] = object_refs({"detail": detail})
    assert (ref.key, ref.identity) == (key, f"b/{key}#v")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"id,name\n1,a\n", "lacks required columns"),
        (b"id,name,amount\n1,a\n", "expected 3 fields"),
        (b"id,name,amount\nx,a,1\n", "'id' is not int"),
        (b"id,name,amount\n", "no rows"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_transform_rejects_malformed_csv_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        transform(data)


def test_transform_output_is_deterministic() -> None:
    assert transform(CSV) == transform(CSV) == b'{"amount": 2.5, "id": 1, "name": "alpha"}\n'


def test_an_object_without_version_or_etag_is_bad() -> None:
    [ref] = object_refs({"detail": {"bucket": {"name": "b"}, "object": {"key": "k"}}})
    with pytest.raises(BadEvent):
        _ = ref.identity


def test_deterministic_redelivery_stops_at_the_published_output(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings("deterministic")
    event = notification("k.csv")
    assert etl.process_event(config, event, context())["results"][0]["status"] == "WRITTEN"
    monkeypatch.setattr(etl, "produce", lambda config, ref: pytest.fail("rewrote an output"))
    assert etl.process_event(config, event, context())["results"][0]["status"] == "DUPLICATE"


@pytest.mark.parametrize("strategy", ["deterministic", "conditional-write"])
def test_the_crash_fault_kills_the_first_run_after_its_put_and_the_retry_publishes_once(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch, strategy: str
) -> None:
    from handlers import fault_hooks

    class Killed(BaseException):  # what os._exit would do to the sandbox
        pass

    def die() -> None:
        raise Killed

    monkeypatch.setattr(fault_hooks, "_die", die)
    config = settings(strategy)
    event = notification(f"in/{fault_hooks.CRASH_MARK}.csv")
    fault_hooks.arm_crash_after_put()  # after the upload: the fault is for the ETL's PUTs
    with pytest.raises(Killed):
        etl.process_event(config, event, context("first"))
    published = [key for key in outputs() if not key.startswith("_staging/")]
    # staged: nothing published yet; conditional: the PUT was atomic, the output is whole
    assert len(published) == (1 if strategy == "conditional-write" else 0)
    # the redelivery does not crash (its key was written before) and one output stands
    retried = etl.process_event(config, event, context("retry"))["results"][0]["status"]
    assert retried == ("DUPLICATE" if strategy == "conditional-write" else "WRITTEN")
    [output] = outputs()
    assert output.startswith(f"out/in/{fault_hooks.CRASH_MARK}.csv.")
    # an unmarked key never crashes
    other = etl.process_event(config, notification("in/plain.csv"), context("other"))
    assert other["results"][0]["status"] == "WRITTEN"


def test_a_concurrent_conditional_write_is_retried_never_a_duplicate(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.stub import Stubber

    [ref] = object_refs(notification("in/race.csv"))
    monkeypatch.setattr(etl, "render", lambda config, ref: b"{}\n")
    config, s3 = settings("conditional-write"), runtime.client("s3")
    with Stubber(s3) as stub:
        # S3: "If a concurrent operation occurs during the upload S3 returns a 409
        # ConditionalRequestConflict response. On a 409 failure you should retry"
        stub.add_client_error("put_object", "ConditionalRequestConflict", http_status_code=409)
        with pytest.raises(etl.InProgress):  # Retryable: redelivered, never a DUPLICATE
            etl.process_conditionally(config, ref)
        stub.add_client_error("put_object", "PreconditionFailed", http_status_code=412)
        assert etl.process_conditionally(config, ref)["status"] == "DUPLICATE"


def test_an_overwritten_write_in_an_unversioned_bucket_is_never_read_under_its_name(
    world: dict[str, str],
) -> None:
    s3 = runtime.client("s3")
    s3.create_bucket(Bucket="plain")  # not versioned: events carry the ETag only
    first = s3.put_object(Bucket="plain", Key="in/a.csv", Body=CSV)
    s3.put_object(Bucket="plain", Key="in/a.csv", Body=CSV + b"2,beta,3\n")
    event = events.notification("plain", "in/a.csv", etag=first["ETag"])
    [result] = etl.process_event(settings("conditional-write"), event, context())["results"]
    assert result["status"] == "REJECTED" and "overwritten" in result["reason"]
    assert outputs() == []  # the newer write is transformed on its own event


def test_a_write_in_an_unversioned_bucket_is_read_by_its_etag(world: dict[str, str]) -> None:
    s3 = runtime.client("s3")
    s3.create_bucket(Bucket="plain")
    put = s3.put_object(Bucket="plain", Key="in/a.csv", Body=CSV)
    event = events.notification("plain", "in/a.csv", etag=put["ETag"])  # unquoted, as S3 sends
    [result] = etl.process_event(settings("conditional-write"), event, context())["results"]
    assert result["status"] == "WRITTEN"
    assert outputs() == [f"out/in/a.csv.{put['ETag'].strip(chr(34))}.jsonl"]
