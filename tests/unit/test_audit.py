"""The audit (handlers/audit.py) against moto: each finding planted, and a clean component
reporting none."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from exactly_once.handlers import audit, runtime
from exactly_once.handlers.checkpoints import EMPTY
from exactly_once.handlers.scheduler_index import KEY_PREFIX, Status, lane, table_schema

pytestmark = pytest.mark.usefixtures("moto")
HOUR = 3600.0
LATER = time.time() + HOUR  # "now" an hour on: every input written now is past its grace


def etl_outputs(**changes: Any) -> dict[str, Any]:
    return {
        "kind": "IdempotentEtl",
        "inputBucket": "inputs",
        "inputPrefix": "data/",
        "inputSuffix": ".csv",
        "outputBucket": "outputs",
        "outputPrefix": "out/",
        "outputSuffix": ".json",
        "controlTable": "control",
        "recordTtlSeconds": 7 * 86400,
        **changes,
    }


@pytest.fixture
def buckets() -> Any:
    s3 = runtime.client("s3")
    for bucket in ("inputs", "outputs"):
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket="inputs", VersioningConfiguration={"Status": "Enabled"})
    key_table("control", key="id")
    return s3


def put_input(s3: Any, key: str, publish: bool = True, suffix: str = ".json") -> str:
    version = str(s3.put_object(Bucket="inputs", Key=key, Body=b"a,b\n")["VersionId"])
    if publish:
        s3.put_object(Bucket="outputs", Key=f"out/{key}.{version}{suffix}", Body=b"{}")
    return version


def run(outputs: dict[str, Any], grace: float = 900, now: float = LATER) -> audit.Report:
    return audit.audit(outputs, runtime.client, grace_seconds=grace, now=now)


def test_every_input_version_with_its_one_output_is_clean(buckets: Any) -> None:
    for n in range(3):
        put_input(buckets, f"data/{n}.csv")
    put_input(buckets, "data/0.csv")  # a second version of a key: its own output
    buckets.put_object(Bucket="inputs", Key="data/notes.txt", Body=b"x")  # not an input (suffix)
    report = run(etl_outputs())
    assert report.clean, report.as_dict()
    assert report.audited == 4
    assert report.accounted == {"one output": 4}


def test_an_input_version_without_output_past_its_grace_is_lost(buckets: Any) -> None:
    put_input(buckets, "data/kept.csv")
    version = put_input(buckets, "data/gone.csv")
    buckets.delete_object(Bucket="outputs", Key=f"out/data/gone.csv.{version}.json")
    report = run(etl_outputs())
    assert report.counts == {"lost": 1, "doubled": 0, "pending": 0}
    [finding] = report.findings
    assert finding.item == f"s3://inputs/data/gone.csv#{version}"
    assert f"out/data/gone.csv.{version}.json" in finding.reason


def test_inputs_within_their_grace_are_not_judged(buckets: Any) -> None:
    put_input(buckets, "data/new.csv", publish=False)
    report = run(etl_outputs(), grace=900, now=time.time())
    assert report.clean and report.audited == 0
    assert report.accounted == {"in its grace": 1}


def test_a_second_output_of_one_version_is_doubled(buckets: Any) -> None:
    version = put_input(buckets, "data/a.csv")
    buckets.put_object(Bucket="outputs", Key=f"out/data/a.csv.{version}.json.gz", Body=b"{}")
    report = run(etl_outputs())
    assert report.counts["doubled"] == 1
    assert "2 outputs" in report.findings[0].reason


def test_a_rejected_input_is_accounted_for_and_a_locked_one_pending(buckets: Any) -> None:
    bad = put_input(buckets, "data/bad.csv", publish=False)
    busy = put_input(buckets, "data/busy.csv", publish=False)
    ddb = runtime.client("dynamodb")
    ddb.put_item(TableName="control", Item={"id": {"S": f"failed#inputs/data/bad.csv#{bad}"}})
    ddb.put_item(
        TableName="control",
        Item={
            "id": {"S": f"inputs/data/busy.csv#{busy}"},
            "status": {"S": "IN_PROGRESS"},
            "lock_expires": {"N": str(time.time() + 300)},
        },
    )
    report = run(etl_outputs())
    assert report.counts == {"lost": 0, "doubled": 0, "pending": 1}
    assert report.accounted == {"rejected (a FAILED record says why)": 1}


def test_an_unversioned_bucket_is_judged_by_etag(buckets: Any) -> None:
    buckets.create_bucket(Bucket="plain")
    etag = buckets.put_object(Bucket="plain", Key="data/p.csv", Body=b"1")["ETag"].strip('"')
    buckets.put_object(Bucket="outputs", Key=f"out/data/p.csv.{etag}.json", Body=b"{}")
    buckets.put_object(Bucket="plain", Key="data/q.csv", Body=b"2")
    report = run(etl_outputs(inputBucket="plain"))
    assert report.counts["lost"] == 1 and report.findings[0].item.startswith("s3://plain/data/q")


def test_listings_are_paged_and_findings_bounded(
    buckets: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "MAX_LISTED", 5)
    for n in range(1200):  # past one page of ListObjectVersions and ListObjectsV2 (1,000)
        put_input(buckets, f"data/{n:04}.csv", publish=n % 100 != 0)
    report = run(etl_outputs())
    assert report.audited == 1200
    assert report.counts["lost"] == 12 and len(report.findings) == 5


def key_table(name: str, key: str = "pk") -> Any:
    ddb = runtime.client("dynamodb")
    ddb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    return ddb


@pytest.fixture
def messages() -> Any:
    runtime.client("dynamodb").create_table(TableName="messages", **table_schema())
    return key_table("received")


def message(ddb: Any, message_id: str, status: Status, publish_at: float) -> None:
    item = {
        "pk": {"S": f"{KEY_PREFIX}{message_id}"},
        "channel": {"S": "sms" if message_id.startswith("sms") else "mail"},
        "status": {"S": str(status)},
        "publish_at": {"N": f"{publish_at:.3f}"},
    }
    if status not in (Status.DONE, Status.FAILED, Status.UNKNOWN, Status.CANCELLED):
        item["lane"] = {"S": lane(status, message_id)}
    ddb.put_item(TableName="messages", Item=item)


def scheduler_outputs(
    receipts: str | None = "received", redeliver: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "kind": "Scheduler",
        "table": "messages",
        "receipts": {"mail": receipts} if receipts else {},
        "receiptDays": 30,
        "redeliver": list(redeliver),
    }


def test_a_message_past_its_time_and_grace_not_ended_is_pending(messages: Any) -> None:
    now = time.time()
    message(messages, "late", Status.FIRING, now - 2 * HOUR)
    message(messages, "soon", Status.STANDBY, now - 60)  # within its grace
    message(messages, "ended", Status.FAILED, now - 2 * HOUR)
    report = run(scheduler_outputs(None), now=now)
    assert report.counts == {"lost": 0, "doubled": 0, "pending": 1}
    assert report.findings[0].item == "late" and "FIRING" in report.findings[0].reason
    assert report.limits  # without receipts, DONE is not checked against the target


def test_a_done_message_its_receiver_never_recorded_is_lost(messages: Any) -> None:
    now = time.time()
    for n in range(3):
        message(messages, f"m{n}", Status.DONE, now - 2 * HOUR)
    message(messages, "sms-1", Status.DONE, now - 2 * HOUR)  # a channel without receipts
    messages.put_item(
        TableName="received", Item={"pk": {"S": "RECEIVED#m0"}, "status": {"S": "COMPLETE"}}
    )
    messages.put_item(
        TableName="received", Item={"pk": {"S": "RECEIVED#m1"}, "status": {"S": "IN_PROGRESS"}}
    )
    report = run(scheduler_outputs(), now=now)
    assert report.counts == {"lost": 1, "doubled": 0, "pending": 0}
    assert report.findings[0].item == "m2"
    assert report.audited == 3
    assert report.accounted["DONE (its channel keeps no receipts)"] == 1


def test_a_message_its_receiver_was_sent_twice_is_doubled_unless_resent_by_design(
    messages: Any,
) -> None:
    now = time.time()
    message(messages, "twice", Status.DONE, now - 2 * HOUR)
    receipt = {"pk": {"S": "RECEIVED#twice"}, "status": {"S": "COMPLETE"}}
    messages.put_item(TableName="received", Item={**receipt, "redelivered": {"N": "1"}})
    report = run(scheduler_outputs(), now=now)
    assert report.counts == {"lost": 0, "doubled": 1, "pending": 0}
    assert "delivered at least 2 times" in report.findings[0].reason
    # a channel in `redeliver` is sent again after a lost answer by design: no finding
    report = run(scheduler_outputs(redeliver=("mail",)), now=now)
    assert report.clean and report.audited == 1


def test_receipts_older_than_the_receivers_keep_them_are_not_judged(messages: Any) -> None:
    now = time.time()
    message(messages, "old", Status.DONE, now - 40 * 86400)  # its receipt expired
    report = run(scheduler_outputs(), now=now)
    assert report.clean and report.audited == 0
    assert any("keep them 30 days" in limit for limit in report.limits)


def test_a_long_scan_stops_at_its_deadline_and_says_so(messages: Any) -> None:
    now = time.time()
    message(messages, "m", Status.DONE, now - 2 * HOUR)
    report = audit.audit(scheduler_outputs(), runtime.client, 900, now=now, deadline=now - 1)
    assert report.audited == 0 and any("deadline" in limit for limit in report.limits)


def test_an_etl_writing_into_its_input_bucket_judges_its_inputs_not_its_outputs(
    buckets: Any,
) -> None:
    shared = etl_outputs(outputBucket="inputs", outputPrefix="", inputPrefix="", inputSuffix="")
    version = put_input(buckets, "data/a.csv", publish=False)
    buckets.put_object(Bucket="inputs", Key=f"data/a.csv.{version}.json", Body=b"{}")
    report = run(shared)
    assert report.clean and report.audited == 1, report.as_dict()
    assert any("taken for outputs" in limit for limit in report.limits)


def test_a_version_older_than_its_failed_record_is_kept_is_not_called_lost(buckets: Any) -> None:
    put_input(buckets, "data/old.csv", publish=False)
    report = run(etl_outputs(recordTtlSeconds=60), now=LATER)  # its record would be gone
    assert report.clean and report.audited == 1
    assert any("record_ttl_days" in limit for limit in report.limits)


@pytest.fixture
def checkpoints() -> Any:
    return key_table("checkpoints")


def checkpoint(ddb: Any, key: str, steps: dict[str, bool], **attributes: Any) -> None:
    item = {"pk": {"S": key}, **attributes}
    for step, done in steps.items():
        item[f"out_{step}"] = {"S": json.dumps({"done": True}) if done else EMPTY}
    ddb.put_item(TableName="checkpoints", Item=item)


def test_a_lease_left_past_the_timeout_and_a_completed_key_missing_a_step_are_lost(
    checkpoints: Any,
) -> None:
    from exactly_once.handlers import timestamps

    now = time.time()
    old = {"S": timestamps.iso_ms(now - 3 * HOUR)}
    arn = "arn:aws:states:us-east-1:123456789012:execution:orders:k"
    checkpoint(checkpoints, "done", {"a": True, "b": True}, completed_at={"N": str(int(now))})
    checkpoint(checkpoints, "left", {"a": True, "b": False}, lease={"S": arn}, saved_at=old)
    running = {"S": timestamps.iso_ms(now - 60)}
    checkpoint(checkpoints, "running", {"a": False, "b": False}, lease={"S": arn}, saved_at=running)
    completed = {"N": str(int(now - HOUR))}
    checkpoint(checkpoints, "hole", {"a": True, "b": False}, completed_at=completed)
    checkpoints.put_item(TableName="checkpoints", Item={"pk": {"S": "MESSAGE#other"}})
    outputs = {"kind": "ResumableWorkflow", "table": "checkpoints", "timeoutSeconds": HOUR}
    report = run(outputs, now=now)
    assert report.counts == {"lost": 2, "doubled": 0, "pending": 0}
    assert {f.item for f in report.findings} == {"left", "hole"}
    assert report.audited == 2 and report.accounted == {"in its grace": 2}  # done, running


def test_another_kind_is_refused_by_name() -> None:
    with pytest.raises(audit.NotAudited, match="no audit for Starter"):
        run({"kind": "Starter"})
    with pytest.raises(audit.NotAudited, match="lack outputSuffix"):
        run({k: v for k, v in etl_outputs().items() if k != "outputSuffix"})


def test_the_scheduled_audit_writes_every_count_each_run_and_logs_each_finding(
    buckets: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from exactly_once.handlers.settings import _CURRENT

    version = put_input(buckets, "data/gone.csv", publish=False)
    put_input(buckets, "data/kept.csv")
    monkeypatch.setenv("AUDITED", json.dumps(etl_outputs()))
    monkeypatch.setenv("GRACE_SECONDS", "0")
    monkeypatch.setenv("WINDOW_SECONDS", "7200")
    monkeypatch.setenv("METRICS_COMPONENT", "thumbnails")
    monkeypatch.setattr(audit.time, "time", lambda: LATER)
    _CURRENT.pop(audit.AuditSettings, None)
    summary = audit.handler({}, None)
    assert summary["counts"] == {"lost": 1, "doubled": 0, "pending": 0}
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    [finding] = [line for line in lines if line.get("message") == "audit finding"]
    assert finding["item"] == f"s3://inputs/data/gone.csv#{version}"
    [metric] = [line for line in lines if "_aws" in line]
    assert (metric["Lost"], metric["Doubled"], metric["Pending"]) == (1, 0, 0)
    assert (metric["Pattern"], metric["Component"]) == ("audit", "thumbnails")


def starter_outputs(machine: str, **changes: Any) -> dict[str, Any]:
    return {
        "kind": "NameDedupStarter",
        "bucket": "inputs",
        "stateMachineArn": machine,
        "keyStrategy": "bucket-key-version",
        "hideKey": False,
        "backend": "step-functions",
        **changes,
    }


def test_an_upload_whose_execution_never_started_is_lost(buckets: Any) -> None:
    from exactly_once.handlers.names import execution_name
    from tests.unit.conftest import WAIT_DEFINITION, make_state_machine

    machine = make_state_machine(WAIT_DEFINITION, "orders")
    sfn = runtime.client("stepfunctions")
    versions = {n: put_input(buckets, f"data/{n}.csv", publish=False) for n in ("a", "b", "c")}
    sfn.start_execution(
        stateMachineArn=machine, name=execution_name(f"inputs/data/a.csv#{versions['a']}")
    )
    # b's first attempt long gone, its retry (`-r1`) there; c never started
    retry = execution_name(f"inputs/data/b.csv#{versions['b']}", 1)
    sfn.start_execution(stateMachineArn=machine, name=retry)
    report = run(starter_outputs(machine))
    assert report.counts == {"lost": 1, "doubled": 0, "pending": 0}
    assert report.findings[0].item == f"s3://inputs/data/c.csv#{versions['c']}"
    assert report.accounted == {"started": 2}
    # with the object-key strategy, a key stands for its writes: one execution for each
    sfn.start_execution(stateMachineArn=machine, name=execution_name("inputs/data/c.csv"))
    by_key = run(starter_outputs(machine, keyStrategy="object-key"))
    assert by_key.counts["lost"] == 2 and by_key.audited == 3  # a and b: by version only


def test_a_starter_whose_events_no_listing_holds_is_refused() -> None:
    with pytest.raises(audit.NotAudited, match="its own event pattern"):
        run(starter_outputs("arn", bucket=None))
    with pytest.raises(audit.NotAudited, match="reads the event"):
        run(starter_outputs("arn", keyStrategy="jmespath:detail.id"))
