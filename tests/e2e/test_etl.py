"""Pattern 5 on LocalStack, under IAM enforcement, triggered by S3 PutObject: each strategy
running the example CSV transform as a team's own code (examples/etl), and a team's own
bucket with its own JSON-lines -> gzip transform."""

from __future__ import annotations

import gzip
import json
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tooling import events
from tooling.clients import (
    client,
    dead_letters,
    eventually,
    invoke,
    invoke_raw,
    keys,
    new_tag,
    steady,
)

CSV = b"id,name,amount\n1,alpha,2.5\n2,beta,3\n"
EXPECTED = [{"amount": 2.5, "id": 1, "name": "alpha"}, {"amount": 3.0, "id": 2, "name": "beta"}]
STRATEGIES = ["etl-conditional", "etl-deterministic", "etl-control", "etl-powertools"]
LOCKLESS = ("deterministic", "conditional-write")  # no success records
LOCK_SECONDS = 10  # the local stack ETL timeout: a crashed run's lock lasts this long


@pytest.fixture(params=STRATEGIES)
def etl(request: pytest.FixtureRequest, stack: dict[str, Any]) -> dict[str, Any]:
    return stack["etl"][request.param]


def outputs(etl: dict[str, Any], tag: str) -> list[str]:
    return keys(etl["outputBucket"], f"out/in/{tag}")


def incomplete_uploads(etl: dict[str, Any], tag: str) -> list[str]:
    """Multipart uploads begun under this test's output keys and never completed."""
    s3, prefix = client("s3"), f"out/in/{tag}"
    listing = s3.list_multipart_uploads(Bucket=etl["outputBucket"], Prefix=prefix)
    return [upload["Key"] for upload in listing.get("Uploads", [])]


def read_lines(etl: dict[str, Any], key: str) -> list[dict]:
    body = client("s3").get_object(Bucket=etl["outputBucket"], Key=key)["Body"].read()
    return [json.loads(line) for line in body.decode().splitlines()]


def completions(etl: dict[str, Any], tag: str) -> list[dict]:
    """Success records for this test's objects (COMPLETE, or Powertools' COMPLETED)."""
    items = client("dynamodb").scan(TableName=etl["controlTable"], ConsistentRead=True)["Items"]
    return [
        item
        for item in items
        if item["status"]["S"] in ("COMPLETE", "COMPLETED")
        and tag in item.get("output", item.get("data", {"S": ""}))["S"]
    ]


def upload(etl: dict[str, Any], key: str, body: bytes = CSV) -> dict[str, Any]:
    return client("s3").put_object(Bucket=etl["inputBucket"], Key=key, Body=body)


def delivery(etl: dict[str, Any], key: str, put: dict[str, Any]) -> dict[str, Any]:
    """The event the strategy's trigger delivers for this upload."""
    bucket, version, etag = etl["inputBucket"], put["VersionId"], put["ETag"]
    if etl["strategy"] == "deterministic":  # EventBridge trigger
        return events.eventbridge(bucket, key, version, etag, event_id=new_tag())
    return events.notification(bucket, key, version, etag)


def test_one_upload_one_output(etl: dict[str, Any]) -> None:
    tag = new_tag()
    upload(etl, f"in/{tag}.csv")
    [key] = eventually(lambda: outputs(etl, tag))
    assert read_lines(etl, key) == EXPECTED
    assert steady(lambda: outputs(etl, tag)) == [key]


def test_a_key_with_spaces_plus_and_unicode_is_read_and_written_under_its_real_name(
    etl: dict[str, Any],
) -> None:
    # GIVEN a key each trigger carries its own way (notifications URL-encode it,
    # EventBridge does not)
    tag = new_tag()
    key = f"in/{tag}/a b+c données.csv"
    put = upload(etl, key)
    # THEN that very object was read, and its output is named for the real key
    [output] = eventually(lambda: outputs(etl, tag))
    assert output == f"out/{key}.{put['VersionId']}.jsonl"
    assert read_lines(etl, output) == EXPECTED


def test_the_same_notification_twice_writes_once(etl: dict[str, Any]) -> None:
    tag = new_tag()
    key = f"in/{tag}.csv"
    put = upload(etl, key)
    eventually(lambda: outputs(etl, tag))
    event = delivery(etl, key, put)
    invoke(etl["functionName"], event)
    invoke(etl["functionName"], event)
    assert len(steady(lambda: outputs(etl, tag), seconds=2)) == 1
    if etl["strategy"] not in LOCKLESS:
        assert len(completions(etl, tag)) == 1


def test_ten_concurrent_identical_invocations_write_once(etl: dict[str, Any]) -> None:
    # GIVEN an uploaded object (its own notification is in flight too)
    tag = new_tag()
    key = f"in/{tag}.csv"
    event = delivery(etl, key, upload(etl, key))
    # WHEN ten identical deliveries run at once
    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(pool.map(lambda _: invoke_raw(etl["functionName"], event), range(10)))
    # THEN at least one wrote; the others were duplicates or failed retryably (Lambda
    # would redeliver them: an in-progress lock, or a timeout on this 2-core machine)
    assert any(ok for ok, _ in results)
    retryable = ("InProgress", "IdempotencyAlreadyInProgressError", "Sandbox.Timedout")
    for ok, payload in results:
        if not ok:
            assert payload["errorType"] in retryable, payload
    [output] = eventually(lambda: outputs(etl, tag))
    assert read_lines(etl, output) == EXPECTED
    assert len(steady(lambda: outputs(etl, tag), seconds=2)) == 1
    if etl["strategy"] not in LOCKLESS:
        assert len(completions(etl, tag)) == 1


def test_a_run_killed_after_its_put_leaves_a_whole_output_the_retry_keeps(
    etl: dict[str, Any],
) -> None:
    # GIVEN the fault: the first run for a 'crash-once' key dies right after the PUT of
    # its output (straight to the output key: a PUT is atomic, so the output is whole)
    tag = new_tag()
    key = f"in/{tag}/crash-once.csv"
    put = upload(etl, key)
    [output] = eventually(lambda: outputs(etl, tag), timeout=90)
    assert read_lines(etl, output) == EXPECTED
    # WHEN the event is delivered again, as Lambda's async retry does once the run's lock
    # has expired (LocalStack in host mode schedules no async retries: we redeliver)
    time.sleep(LOCK_SECONDS)
    result = invoke(etl["functionName"], delivery(etl, key, put))
    # THEN the lockless strategies find the output; the locking ones find an expired lock
    # and redo the work, writing the same bytes under the same key
    expected = "DUPLICATE" if etl["strategy"] in LOCKLESS else "WRITTEN"
    assert result["results"][0]["status"] == expected
    assert outputs(etl, tag) == [output] and read_lines(etl, output) == EXPECTED
    if etl["strategy"] not in LOCKLESS:
        assert len(completions(etl, tag)) == 1


def test_a_run_killed_mid_multipart_upload_leaves_no_object_and_the_retry_publishes_once(
    stack: dict[str, Any],
) -> None:
    # GIVEN an input whose output is over two 5 MiB parts, under a 'crash-once' key: the
    # first run dies right after uploading its first part (never completing or aborting)
    etl = stack["etl"]["etl-conditional"]
    tag = new_tag()
    key = f"in/{tag}/crash-once-big.csv"
    rows = 240_000
    body = b"id,name,amount\n" + b"".join(b"%d,name-%d,%d.25\n" % (i, i, i) for i in range(rows))
    put = upload(etl, key, body)
    # THEN its upload is incomplete and there is no object: readers see nothing
    eventually(lambda: incomplete_uploads(etl, tag), timeout=60)
    assert outputs(etl, tag) == []
    # WHEN the event is delivered again
    result = invoke(etl["functionName"], delivery(etl, key, put))
    # THEN one whole output, published by the retry
    assert result["results"][0]["status"] == "WRITTEN"
    [output] = outputs(etl, tag)
    got = client("s3").get_object(Bucket=etl["outputBucket"], Key=output)["Body"].read()
    assert got.count(b"\n") == rows and json.loads(got.splitlines()[-1])["id"] == rows - 1
    # the crashed run's upload is still incomplete (the output bucket's lifecycle rule
    # removes it), never an object
    assert len(incomplete_uploads(etl, tag)) == 1
    rules = client("s3").get_bucket_lifecycle_configuration(Bucket=etl["outputBucket"])["Rules"]
    assert [r["AbortIncompleteMultipartUpload"]["DaysAfterInitiation"] for r in rules] == [1]


def test_a_new_version_of_the_same_key_is_a_second_output(etl: dict[str, Any]) -> None:
    tag = new_tag()
    upload(etl, f"in/{tag}.csv")
    eventually(lambda: len(outputs(etl, tag)) == 1)
    upload(etl, f"in/{tag}.csv", CSV + b"3,gamma,4\n")
    eventually(lambda: len(outputs(etl, tag)) == 2)
    assert len(steady(lambda: outputs(etl, tag), seconds=2)) == 2


def test_a_malformed_csv_gets_an_error_record_and_a_dlq_entry_and_no_output(
    etl: dict[str, Any],
) -> None:
    tag = new_tag()
    upload(etl, f"in/{tag}.csv", b"id,name,amount\n1,alpha,not-a-number\n")
    [message] = eventually(lambda: dead_letters(etl["dlqUrl"], tag), timeout=90)
    assert "amount" in message["reason"] and "float" in message["reason"]
    items = client("dynamodb").scan(TableName=etl["controlTable"], ConsistentRead=True)["Items"]
    [record] = [i for i in items if i["id"]["S"].startswith("failed#") and tag in i["id"]["S"]]
    assert record["status"]["S"] == "FAILED"
    assert outputs(etl, tag) == [] and incomplete_uploads(etl, tag) == []


JSON_LINES = b'{"id": 1, "name": "alpha"}\n{"id": 2, "name": "beta"}\n'


def gunzip(etl: dict[str, Any], key: str) -> bytes:
    return gzip.decompress(
        client("s3").get_object(Bucket=etl["outputBucket"], Key=key)["Body"].read()
    )


def test_a_teams_own_bucket_is_transformed_under_its_prefix_only(stack: dict[str, Any]) -> None:
    # GIVEN the user-style ETL: a bucket it does not own (EventBridge on, set by its
    # owner), a key prefix, and the team's own JSON lines -> gzip transform
    etl = stack["etl"]["etl-teams-bucket"]
    assert (etl["inputPrefix"], etl["inputSuffix"]) == ("incoming/", ".jsonl")
    tag = new_tag()
    # WHEN one object lands under the prefix with the suffix, one beside it, and one
    # under it with another suffix
    put = upload(etl, f"incoming/{tag}.jsonl", JSON_LINES)
    upload(etl, f"elsewhere/{tag}.jsonl", JSON_LINES)
    upload(etl, f"incoming/{tag}.txt", JSON_LINES)
    # THEN the first is transformed once by the team's transform, the others never read
    [output] = eventually(lambda: keys(etl["outputBucket"], f"out/incoming/{tag}"))
    assert output == f"out/incoming/{tag}.jsonl.{put['VersionId']}.jsonl.gz"
    assert gunzip(etl, output) == JSON_LINES
    assert steady(lambda: keys(etl["outputBucket"], "out/elsewhere/"), seconds=3) == []
    assert steady(lambda: keys(etl["outputBucket"], f"out/incoming/{tag}"), seconds=2) == [output]


def test_fifty_concurrent_identical_deliveries_to_a_teams_etl_write_one_output(
    stack: dict[str, Any],
) -> None:
    # GIVEN an object in the team's bucket (its own EventBridge delivery is in flight too)
    etl = stack["etl"]["etl-teams-bucket"]
    tag = new_tag()
    key = f"incoming/{tag}.jsonl"
    put = upload(etl, key, JSON_LINES)
    event = events.eventbridge(
        etl["inputBucket"], key, put["VersionId"], put["ETag"], event_id=new_tag()
    )
    # WHEN fifty identical deliveries run at once
    with ThreadPoolExecutor(max_workers=50) as pool:
        results = list(pool.map(lambda _: invoke_raw(etl["functionName"], event), range(50)))
    # THEN one output; every other run was a DUPLICATE or failed retryably (a 409 from a
    # concurrent conditional write, or a timeout on this 2-core machine): redelivered,
    # and then a DUPLICATE
    statuses = [payload["results"][0]["status"] for ok, payload in results if ok]
    errors = [payload["errorType"] for ok, payload in results if not ok]
    assert set(statuses) <= {"WRITTEN", "DUPLICATE"} and statuses.count("WRITTEN") <= 1
    assert set(errors) <= {"InProgress", "Sandbox.Timedout"}, errors
    [output] = eventually(lambda: keys(etl["outputBucket"], f"out/incoming/{tag}"))
    assert gunzip(etl, output) == JSON_LINES
    assert len(steady(lambda: keys(etl["outputBucket"], f"out/incoming/{tag}"), seconds=2)) == 1


def test_a_bad_input_in_a_teams_bucket_is_dead_lettered_with_the_reason(
    stack: dict[str, Any],
) -> None:
    etl = stack["etl"]["etl-teams-bucket"]
    tag = new_tag()
    upload(etl, f"incoming/{tag}.jsonl", b'{"id": 1}\nnot json\n')
    [message] = eventually(lambda: dead_letters(etl["dlqUrl"], tag), timeout=90)
    assert "line 2 is not JSON" in message["reason"]
    assert keys(etl["outputBucket"], f"out/incoming/{tag}") == []
