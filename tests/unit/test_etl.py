"""The ETL library per strategy, in-process against moto (S3, DynamoDB, SQS), with the
example transforms imported from their own folder as a user's module would be."""

from __future__ import annotations

import gzip
import io
import json
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from etl_transforms import csv_jsonl, jsonl_gzip
from host_executor import lambda_wrappers

from exactly_once.handlers import etl, runtime
from exactly_once.handlers.errors import BadEvent, BadInput
from exactly_once.handlers.s3_events import object_refs
from exactly_once.handlers.s3_publish import MIN_PART_SIZE
from exactly_once.handlers.settings import SettingsError
from tooling import events

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
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "etl-test")
    yield {"queue": queue}


class Killed(BaseException):
    """What os._exit does to the sandbox."""


@pytest.fixture
def crash_after_write(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> Iterator[Callable[[], None]]:
    """The e2e suite's crash fault (the host executor's wrapper), armed on demand on this
    process's S3 client, raising Killed where the sandbox would die; disarmed after."""

    def die() -> None:
        raise Killed

    monkeypatch.setattr(lambda_wrappers, "_die", die)
    monkeypatch.setenv(lambda_wrappers.MARKS, str(tmp_path))
    events = runtime.client("s3").meta.events
    yield lambda: lambda_wrappers.arm_crash_after_write(events)
    for event, unique_id in lambda_wrappers.HOOKS:
        events.unregister(event, unique_id=unique_id)


def settings(strategy: str, **changes: Any) -> etl.EtlSettings:
    queue = runtime.client("sqs").get_queue_url(QueueName="dlq")["QueueUrl"]
    fields: dict[str, Any] = {
        "output_bucket": "out-bucket",
        "output_prefix": "out/",
        "output_suffix": ".jsonl",
        "control_table": "control",
        "dlq_url": queue,
        "part_size": MIN_PART_SIZE,
    }
    return etl.EtlSettings(strategy=strategy, **{**fields, **changes})  # type: ignore[arg-type]


def run(config: etl.EtlSettings, event: Any, ctx: Any = None) -> dict[str, Any]:
    """The library as a user's handler calls it, with the example CSV transform."""
    return etl.transform_once(event, csv_jsonl.transform, config, ctx or context())


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
        run(config, event, context(f"req-{attempt}"))
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
    first = run(config, event, context("a"))["results"][0]
    second = run(config, event, context("b"))["results"][0]
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
    result = run(config, event, context("retry"))["results"][0]
    assert result["status"] == "WRITTEN"
    assert len(outputs()) == 1


def test_a_retryable_failure_releases_the_lock(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings("control-record")
    event = notification("k.csv")

    def broken(*_: Any, **__: Any) -> str:
        raise ConnectionError("S3 went away")

    monkeypatch.setattr(etl, "produce", broken)
    with pytest.raises(ConnectionError):
        run(config, event, context())
    assert records() == []  # the next delivery need not wait for the lock to expire


def test_two_invocations_with_one_request_id_own_the_lock_apart(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lambda's retries keep the request id: an earlier invocation's release (sent again
    after a lost answer) must not drop a later one's lock."""
    config = settings("control-record")
    event = notification("k.csv")
    owners: list[str] = []
    acquire = etl.acquire

    def recorded(config: etl.EtlSettings, ref: Any, owner: str, remaining_ms: int) -> Any:
        owners.append(owner)
        return acquire(config, ref, owner, remaining_ms)

    monkeypatch.setattr(etl, "acquire", recorded)
    run(config, event, context("same-id"))
    run(config, event, context("same-id"))
    assert len(set(owners)) == 2 and all(o.startswith("same-id/") for o in owners)
    [other] = object_refs(notification("other.csv"))
    assert acquire(config, other, owners[1], remaining_ms=30_000) is None  # the later one's
    etl.release(config, other, owners[0])  # the earlier one's release, landing late
    held = [r["owner"]["S"] for r in records() if r["id"]["S"] == other.identity]
    assert held == [owners[1]]


def test_a_lock_put_resent_after_its_answer_was_lost_is_its_own(world: dict[str, str]) -> None:
    """The SDK resends a put whose answer was lost: the first send took the lock, so the
    resend fails its condition on the attempt's own lock. That is the lock taken, not
    another's (which would fail the attempt InProgress and hold the key until the lock
    expired); another owner's is still InProgress."""
    config = settings("control-record")
    [ref] = object_refs(notification("resent.csv"))
    assert etl.acquire(config, ref, "r1/aaaaaaaaaaaa", remaining_ms=30_000) is None
    assert etl.acquire(config, ref, "r1/aaaaaaaaaaaa", remaining_ms=30_000) is None  # the resend
    with pytest.raises(etl.InProgress, match="r1/aaaaaaaaaaaa"):
        etl.acquire(config, ref, "r1/bbbbbbbbbbbb", remaining_ms=30_000)


@pytest.mark.parametrize("strategy", etl.STRATEGIES)
def test_malformed_input_is_recorded_dead_lettered_once_and_never_written(
    world: dict[str, str], strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings(strategy)
    event = notification("bad.csv", b"id,name,amount\n1,alpha,lots\n")
    for _ in range(2):
        assert run(config, event, context())["results"][0]["status"] == "REJECTED"
    [failure] = [r for r in records() if r["id"]["S"].startswith("failed#")]
    assert "amount" in failure["reason"]["S"]
    messages = runtime.client("sqs").receive_message(
        QueueUrl=world["queue"], MaxNumberOfMessages=10
    )
    assert len(messages["Messages"]) == 1
    assert outputs() == []


def test_a_non_s3_event_goes_to_the_dlq(world: dict[str, str]) -> None:
    result = run(settings("deterministic"), {"hello": 1}, context())
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
def test_the_csv_transform_rejects_malformed_csv_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(BadInput, match=message):
        b"".join(csv_jsonl.json_lines(io.BytesIO(data)))


def test_the_csv_transform_is_deterministic() -> None:
    def render() -> bytes:
        return b"".join(csv_jsonl.json_lines(io.BytesIO(b"\xef\xbb\xbf" + CSV)))  # a BOM, too

    assert render() == render() == b'{"amount": 2.5, "id": 1, "name": "alpha"}\n'


def test_the_csv_transform_streams_in_bounded_chunks() -> None:
    rows = b"".join(b"%d,n,1\n" % i for i in range(3 * csv_jsonl.ROWS_PER_CHUNK + 1))
    chunks = list(csv_jsonl.json_lines(io.BytesIO(b"id,name,amount\n" + rows)))
    assert [c.count(b"\n") for c in chunks] == [csv_jsonl.ROWS_PER_CHUNK] * 3 + [1]


def test_an_object_without_version_or_etag_is_bad() -> None:
    [ref] = object_refs({"detail": {"bucket": {"name": "b"}, "object": {"key": "k"}}})
    with pytest.raises(BadEvent):
        _ = ref.identity


@pytest.mark.parametrize("strategy", etl.STRATEGIES)
def test_a_redelivery_after_completion_reads_and_writes_nothing(
    world: dict[str, str], strategy: str
) -> None:
    # GIVEN an input of several parts' output, transformed once
    config = settings(strategy)
    event = notification("in/big.csv", big_csv(ROWS_OVER_TWO_PARTS))
    first = run(config, event, context("first"))["results"][0]
    assert first["status"] == "WRITTEN"
    # WHEN it is delivered again after completion
    calls: list[str] = []

    def called(model: Any, **kwargs: Any) -> None:
        calls.append(model.name)

    s3 = runtime.client("s3")
    s3.meta.events.register("before-call.s3", called)
    try:
        result = run(config, event, context("again"))["results"][0]
    finally:
        s3.meta.events.unregister("before-call.s3", called)
    # THEN it is a DUPLICATE at the cost of at most one HEAD: the input is not read again,
    # nothing is transformed or uploaded (conditional-write used to re-read and
    # re-transform all of it to meet the 412 at the end: 0.88x the first run for 40 MB)
    # (Powertools answers with the first call's stored result: told apart, a DUPLICATE)
    first_output = {key: first[key] for key in ("object", "output")}
    assert result == {**first_output, "status": "DUPLICATE"}
    assert calls in ([], ["HeadObject"]), calls


def test_deterministic_redelivery_stops_at_the_published_output(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings("deterministic")
    event = notification("k.csv")
    assert run(config, event, context())["results"][0]["status"] == "WRITTEN"
    monkeypatch.setattr(etl, "produce", lambda *_: pytest.fail("rewrote an output"))
    assert run(config, event, context())["results"][0]["status"] == "DUPLICATE"


@pytest.mark.parametrize("strategy", ["deterministic", "conditional-write"])
def test_the_crash_fault_kills_the_first_run_after_its_put_and_the_retry_finds_it_whole(
    crash_after_write: Callable[[], None], strategy: str
) -> None:
    config = settings(strategy)
    event = notification(f"in/{lambda_wrappers.CRASH_MARK}.csv")
    crash_after_write()  # after the upload: the fault is for the ETL's PUTs
    with pytest.raises(Killed):
        run(config, event, context("first"))
    assert len(outputs()) == 1  # one PUT, atomic: the output is whole
    # the redelivery does not crash (its key was written before) and finds it
    assert run(config, event, context("retry"))["results"][0]["status"] == "DUPLICATE"
    [output] = outputs()
    assert output.startswith(f"out/in/{lambda_wrappers.CRASH_MARK}.csv.")
    # an unmarked key never crashes
    other = run(config, notification("in/plain.csv"), context("other"))
    assert other["results"][0]["status"] == "WRITTEN"


@pytest.mark.parametrize(("code", "status"), [(409, None), (412, "DUPLICATE")])
def test_a_concurrent_conditional_write_is_retried_never_a_duplicate(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch, code: int, status: str | None
) -> None:
    from botocore.exceptions import ClientError

    # S3: 412 PreconditionFailed when the key exists; "If a concurrent operation occurs
    # during the upload S3 returns a 409 ConditionalRequestConflict response. On a 409
    # failure you should retry" (PutObject / CompleteMultipartUpload IfNoneMatch)
    name = {409: "ConditionalRequestConflict", 412: "PreconditionFailed"}[code]

    def answered(*_: Any, **__: Any) -> str:
        raise ClientError({"Error": {"Code": name}}, "PutObject")

    monkeypatch.setattr(etl, "produce", answered)
    [ref] = object_refs(notification("in/race.csv"))
    if status is None:
        with pytest.raises(etl.InProgress):  # Retryable: redelivered, never a DUPLICATE
            etl.ConditionalWrite().process(
                settings("conditional-write"), ref, csv_jsonl.transform, None
            )
    else:
        result = etl.ConditionalWrite().process(
            settings("conditional-write"), ref, csv_jsonl.transform, None
        )
        assert result["status"] == status


def test_an_overwritten_write_in_an_unversioned_bucket_is_never_read_under_its_name(
    world: dict[str, str],
) -> None:
    s3 = runtime.client("s3")
    s3.create_bucket(Bucket="plain")  # not versioned: events carry the ETag only
    first = s3.put_object(Bucket="plain", Key="in/a.csv", Body=CSV)
    s3.put_object(Bucket="plain", Key="in/a.csv", Body=CSV + b"2,beta,3\n")
    event = events.notification("plain", "in/a.csv", etag=first["ETag"])
    [result] = run(settings("conditional-write"), event, context())["results"]
    assert result["status"] == "REJECTED" and "overwritten" in result["reason"]
    assert outputs() == []  # the newer write is transformed on its own event


def test_a_write_in_an_unversioned_bucket_is_read_by_its_etag(world: dict[str, str]) -> None:
    s3 = runtime.client("s3")
    s3.create_bucket(Bucket="plain")
    put = s3.put_object(Bucket="plain", Key="in/a.csv", Body=CSV)
    event = events.notification("plain", "in/a.csv", etag=put["ETag"])  # unquoted, as S3 sends
    [result] = run(settings("conditional-write"), event, context())["results"]
    assert result["status"] == "WRITTEN"
    assert outputs() == [f"out/in/a.csv.{put['ETag'].strip(chr(34))}.jsonl"]


# -- a user's transform, streaming and multipart outputs ------------------------------
JSON_LINES = b'{"id": 1}\n\n{"id": 2, "tags": ["a"]}\r\n'


@pytest.mark.parametrize("strategy", etl.STRATEGIES)
def test_a_users_transform_from_its_own_module_runs_once_per_version(
    world: dict[str, str], strategy: str
) -> None:
    # GIVEN a transform from a separate package (examples/etl, as a team's own code)
    config = settings(strategy, output_suffix=".jsonl.gz", content_type="application/gzip")
    event = notification("in/events.jsonl", JSON_LINES)
    # WHEN it is delivered three times
    statuses = [
        etl.transform_once(event, jsonl_gzip.transform, config, context(f"r{n}"))["results"][0][
            "status"
        ]
        for n in range(3)
    ]
    # THEN one output, its bytes the transform's, with the content type asked for
    # (Powertools replays the first run's result to a duplicate: told apart, a DUPLICATE)
    assert statuses == ["WRITTEN", "DUPLICATE", "DUPLICATE"]
    [key] = outputs()
    assert key.endswith(".jsonl.gz")
    got = runtime.client("s3").get_object(Bucket="out-bucket", Key=key)
    assert got["ContentType"] == "application/gzip"
    assert gzip.decompress(got["Body"].read()) == b'{"id": 1}\n{"id": 2, "tags": ["a"]}\n'


def test_the_gzip_transform_is_deterministic_and_rejects_a_line_that_is_not_an_object() -> None:
    def render(data: bytes) -> bytes:
        return b"".join(jsonl_gzip.transform(io.BytesIO(data), None))  # type: ignore[arg-type]

    assert render(JSON_LINES) == render(JSON_LINES)
    with pytest.raises(BadInput, match="line 2 is list"):
        render(b'{"id": 1}\n[1]\n')
    with pytest.raises(BadInput, match="line 1 is not JSON"):
        render(b"{oops\n")


def big_csv(rows: int) -> bytes:
    return b"id,name,amount\n" + b"".join(b"%d,name-%d,%d.25\n" % (i, i, i) for i in range(rows))


ROWS_OVER_TWO_PARTS = 240_000  # ~11 MB of JSON lines: a multipart upload of 5 MiB parts


@pytest.mark.parametrize("strategy", ["conditional-write", "control-record"])
def test_a_large_output_is_one_multipart_object_published_once(
    world: dict[str, str], strategy: str
) -> None:
    config = settings(strategy)
    event = notification("in/big.csv", big_csv(ROWS_OVER_TWO_PARTS))
    s3 = runtime.client("s3")
    calls: list[str] = []
    s3.meta.events.register("before-call.s3", lambda model, **_: calls.append(model.name))
    assert run(config, event, context("a"))["results"][0]["status"] == "WRITTEN"
    assert calls.count("UploadPart") >= 2 and "PutObject" not in calls
    assert run(config, event, context("b"))["results"][0]["status"] == "DUPLICATE"
    [key] = outputs()
    body = s3.get_object(Bucket="out-bucket", Key=key)["Body"].read()
    assert body.count(b"\n") == ROWS_OVER_TWO_PARTS
    assert json.loads(body.splitlines()[-1])["id"] == ROWS_OVER_TWO_PARTS - 1
    assert s3.list_multipart_uploads(Bucket="out-bucket").get("Uploads", []) == []


def test_a_bad_row_after_parts_were_uploaded_publishes_nothing_and_aborts_the_upload(
    world: dict[str, str],
) -> None:
    config = settings("conditional-write")
    event = notification("in/bad-late.csv", big_csv(ROWS_OVER_TWO_PARTS) + b"x,late,1\n")
    [result] = run(config, event, context())["results"]
    assert result["status"] == "REJECTED" and "'id' is not int" in result["reason"]
    assert outputs() == []
    assert runtime.client("s3").list_multipart_uploads(Bucket="out-bucket").get("Uploads", []) == []


def test_a_duplicate_multipart_completion_is_a_duplicate_and_its_parts_are_dropped(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings("conditional-write")
    event = notification("in/big.csv", big_csv(ROWS_OVER_TWO_PARTS))
    [ref] = object_refs(event)
    run(config, event, context("first"))
    # a concurrent twin whose HEAD came before the first's completion uploads its parts,
    # then S3 refuses the completion with 412: DUPLICATE, and its upload is aborted, not
    # left billed
    monkeypatch.setattr(etl, "published", lambda *_: False)
    result = etl.ConditionalWrite().process(config, ref, csv_jsonl.transform, None)
    assert result["status"] == "DUPLICATE"
    assert runtime.client("s3").list_multipart_uploads(Bucket="out-bucket").get("Uploads", []) == []


def test_the_crash_fault_kills_a_run_mid_multipart_and_the_retry_publishes_once(
    crash_after_write: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings("conditional-write")
    event = notification(f"in/{lambda_wrappers.CRASH_MARK}-big.csv", big_csv(ROWS_OVER_TWO_PARTS))
    crash_after_write()
    from exactly_once.handlers import s3_publish

    monkeypatch.setattr(s3_publish, "_abort", lambda *_: None)  # a killed run aborts nothing
    with pytest.raises(Killed):
        run(config, event, context("first"))
    s3 = runtime.client("s3")
    # the crashed run's upload is incomplete: stored parts, no object
    assert len(s3.list_multipart_uploads(Bucket="out-bucket")["Uploads"]) == 1
    assert outputs() == []
    assert run(config, event, context("retry"))["results"][0]["status"] == "WRITTEN"
    [key] = outputs()
    body = s3.get_object(Bucket="out-bucket", Key=key)["Body"].read()
    assert body.count(b"\n") == ROWS_OVER_TWO_PARTS


def test_without_a_queue_or_table_a_bad_input_is_raised_for_lambda_to_keep(
    world: dict[str, str],
) -> None:
    config = settings("conditional-write", control_table="", dlq_url="")
    event = notification("bad.csv", b"id,name,amount\n1,alpha,lots\n")
    with pytest.raises(BadInput, match="amount"):
        run(config, event)
    assert outputs() == []


def test_without_a_table_each_delivery_of_a_bad_input_is_dead_lettered(
    world: dict[str, str],
) -> None:
    config = settings("deterministic", control_table="")
    event = notification("bad.csv", b"id,name,amount\n1,alpha,lots\n")
    for _ in range(2):
        assert run(config, event)["results"][0]["status"] == "REJECTED"
    got = runtime.client("sqs").receive_message(QueueUrl=world["queue"], MaxNumberOfMessages=10)
    assert len(got["Messages"]) == 2 and records() == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"strategy": "control-record", "control_table": ""}, "needs a control_table"),
        ({"strategy": "powertools", "control_table": ""}, "needs a control_table"),
        ({"strategy": "exactly"}, "strategy must be one of"),
        ({"part_size": 1024}, "at least"),
    ],
)
def test_settings_that_cannot_work_are_refused(changes: dict[str, Any], message: str) -> None:
    base = {"output_bucket": "out", "control_table": "t"}
    with pytest.raises(SettingsError, match=message):
        etl.EtlSettings(**{**base, **changes})


def test_the_components_handler_runs_the_transform_its_environment_names(
    world: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = settings("conditional-write")
    env = {
        **{var: str(getattr(config, name)) for name, var in etl.EtlSettings.variables().items()},
        "TRANSFORM": "etl_transforms.csv_jsonl:transform",
    }
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setattr("exactly_once.handlers.settings._CURRENT", {})
    [result] = etl.handler(notification("in/a.csv"), context())["results"]
    assert result["status"] == "WRITTEN"


@pytest.mark.parametrize(
    "reference", ["etl_transforms.nowhere:transform", "etl_transforms.csv_jsonl:nothing"]
)
def test_a_transform_reference_that_names_nothing_fails_with_its_name(reference: str) -> None:
    with pytest.raises(SettingsError, match="TRANSFORM="):
        etl.load_transform(reference)


def test_a_broken_input_stream_resumes_where_it_stopped_on_the_same_version(
    world: dict[str, str],
) -> None:
    from botocore.exceptions import IncompleteReadError

    from exactly_once.handlers.s3_read import open_version

    s3 = runtime.client("s3")
    data = bytes(range(256)) * 40_000  # 10 MB
    put = s3.put_object(Bucket="in-bucket", Key="big.bin", Body=data)
    s3.put_object(Bucket="in-bucket", Key="big.bin", Body=b"a later version")
    requests: list[dict[str, Any]] = []
    real_get = s3.get_object

    def get_object(**request: Any) -> dict[str, Any]:
        requests.append(request)
        answer = real_get(**request)
        if len(requests) == 1:  # the first connection drops after 3 MB
            body, sent = answer["Body"], [0]

            class Dropping:
                def read(self, amount: int) -> bytes:
                    if sent[0] >= 3_000_000:
                        raise IncompleteReadError(actual_bytes=sent[0], expected_bytes=len(data))
                    chunk: bytes = body.read(min(amount, 3_000_000 - sent[0]))
                    sent[0] += len(chunk)
                    return chunk

                def close(self) -> None:
                    body.close()

            answer["Body"] = Dropping()
        return answer

    s3.get_object = get_object  # type: ignore[method-assign]
    try:
        with open_version(
            s3, {"Bucket": "in-bucket", "Key": "big.bin", "VersionId": put["VersionId"]}
        ) as f:
            assert f.read() == data
    finally:
        del s3.get_object
    assert [r.get("Range") for r in requests] == [None, "bytes=3000000-"]
    assert {r["VersionId"] for r in requests} == {put["VersionId"]}


def test_every_strategy_is_one_registered_class_and_process_asks_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert set(etl.STRATEGY_OF) == set(etl.Strategy)
    assert all(isinstance(s, etl.EtlStrategy) for s in etl.STRATEGY_OF.values())
    calls = []
    # a name is registered once: a subclass of a registered strategy is refused
    with pytest.raises(TypeError, match="registered already"):

        class Tweaked(etl.ConditionalWrite):
            pass

    del etl.STRATEGY_OF[etl.Strategy.DETERMINISTIC]  # (restored below)

    class Recording(etl.EtlStrategy):  # defining it registers it (here: in place of one)
        name = etl.Strategy.DETERMINISTIC

        def process(self, config: Any, ref: Any, transform: Any, context: Any) -> dict[str, Any]:
            calls.append(ref)
            return {"status": etl.WRITTEN, "output": "s3://x/y"}

    try:
        config = etl.EtlSettings("out", strategy="deterministic")
        ref = etl.ObjectRef("in", "a.csv", None, "etag")
        monkeypatch.setattr(etl, "object_refs", lambda event: [ref])
        result = etl.transform_once({}, lambda source, obj: [], config)
        assert result["results"][0]["status"] == etl.WRITTEN
        assert calls == [ref]
        # a strategy without `process` is refused where it is defined (an ABC)
        with pytest.raises(TypeError, match="abstract"):

            class Incomplete(etl.EtlStrategy):
                name = etl.Strategy.POWERTOOLS
    finally:
        etl.STRATEGY_OF[etl.Strategy.DETERMINISTIC] = etl.Deterministic()
