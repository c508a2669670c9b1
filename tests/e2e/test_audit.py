"""The audit on LocalStack (#56): for the ETL, the scheduler and the resumable workflow, a
clean run reports nothing; a planted loss and a planted double are reported by
`exactly-once audit` (exit 3) and by the component's scheduled audit (its metric, its
alarm in ALARM), the audit functions reading under their read-only roles (IAM enforced).

Each component's inputs are planted where no other test's are: the ETL's audited
component is this test's alone (`etl-audited`); the scheduler's and the workflow's items
are judged by `--since` and `--grace-minutes` in a window only they occupy."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from exactly_once.handlers import timestamps
from exactly_once.handlers.checkpoints import EMPTY
from exactly_once.handlers.scheduler_index import Status, lane, message_key
from exactly_once.ops.__main__ import FOUND
from exactly_once.ops.__main__ import main as ops
from tooling.clients import ENDPOINT, client, eventually, metric_points, new_tag

CSV = b"id,name,amount\n1,alpha,2.5\n"
ALARM_TIMEOUT = 360  # one minute's grace, a run a minute, an alarm evaluated each minute


def audit(
    capsys: pytest.CaptureFixture[str],
    outputs: Path,
    component: str,
    since: float,
    until: float,
) -> tuple[int, dict[str, Any]]:
    """`exactly-once audit` of `component`, judging the inputs from `since` to `until`."""
    capsys.readouterr()
    grace_minutes = (time.time() - until) / 60
    code = ops(
        [
            "audit",
            "--outputs",
            str(outputs),
            "--component",
            component,
            "--since",
            timestamps.iso_ms(since),
            "--grace-minutes",
            f"{grace_minutes:.6f}",
            "--endpoint-url",
            ENDPOINT,
            "--region",
            "us-east-1",
        ]
    )
    out = capsys.readouterr().out
    assert code in (0, FOUND), out
    return code, json.loads(out)


def found(report: dict[str, Any]) -> dict[str, str]:
    """item -> kind, of every finding listed."""
    return {finding["item"]: finding["kind"] for finding in report["findings"]}


def metric(component: str, name: str) -> float:
    return max(metric_points(component, "audit", name, "Maximum", 5), default=0.0)


def alarm(outputs: dict[str, Any], finding: str) -> str:
    [name] = [n for n in outputs["alarmNames"] if f"-audit-{finding}" in n]  # (+ its suffix)
    [found] = client("cloudwatch").describe_alarms(AlarmNames=[name])["MetricAlarms"]
    return str(found["StateValue"])


# -- the ETL: an output deleted, a second output of one version ---------------------------
def etl_plants(
    capsys: pytest.CaptureFixture[str], outputs: Path, etl: dict[str, Any], tag: str
) -> dict[str, str]:
    s3 = client("s3")
    since = time.time() - 1
    puts = {
        name: s3.put_object(Bucket=etl["inputBucket"], Key=f"{tag}/{name}.csv", Body=CSV)
        for name in ("lost", "doubled", "kept")
    }
    output = {name: f"out/{tag}/{name}.csv.{put['VersionId']}.jsonl" for name, put in puts.items()}

    def published() -> bool:
        listed = s3.list_objects_v2(Bucket=etl["outputBucket"], Prefix=f"out/{tag}/")
        return {o["Key"] for o in listed.get("Contents", [])} == set(output.values())

    eventually(published, timeout=120)
    # GIVEN every input transformed: a clean run reports nothing
    code, report = audit(capsys, outputs, "etl-audited", since, time.time())
    assert code == 0 and report["audited"] == 3 and not report["findings"], report
    assert report["accounted"] == {"one output": 3}
    # WHEN one output is deleted and another written twice (a second suffix)
    s3.delete_object(Bucket=etl["outputBucket"], Key=output["lost"])
    s3.copy_object(
        Bucket=etl["outputBucket"],
        Key=f"{output['doubled']}.gz",
        CopySource={"Bucket": etl["outputBucket"], "Key": output["doubled"]},
    )
    # THEN the audit reports both, and nothing of the one kept
    code, report = audit(capsys, outputs, "etl-audited", since, time.time())
    item = {
        name: f"s3://{etl['inputBucket']}/{tag}/{name}.csv#{put['VersionId']}"
        for name, put in puts.items()
    }
    assert code == FOUND
    assert found(report) == {item["lost"]: "lost", item["doubled"]: "doubled"}, report
    return {"lost": item["lost"], "doubled": item["doubled"]}


def etl_clean_up(etl: dict[str, Any], tag: str) -> None:
    s3 = client("s3")
    for bucket, prefix in ((etl["inputBucket"], f"{tag}/"), (etl["outputBucket"], f"out/{tag}/")):
        listed = s3.list_object_versions(Bucket=bucket, Prefix=prefix)
        for version in [*listed.get("Versions", []), *listed.get("DeleteMarkers", [])]:
            s3.delete_object(Bucket=bucket, Key=version["Key"], VersionId=version["VersionId"])


# -- the scheduler: a message left FIRING, one DONE and never received, one received twice ----
def message(
    scheduler: dict[str, Any],
    message_id: str,
    status: Status,
    publish_at: float,
    channel: str = "demo",
) -> None:
    item = {
        **message_key(message_id),
        "id": {"S": message_id},
        "status": {"S": str(status)},
        "publish_at": {"N": f"{publish_at:.3f}"},
        "channel": {"S": channel},
        "parameters": {"S": "{}"},
    }
    if status == Status.FIRING:  # delivered and unrecorded: the sweep leaves it be
        item |= {
            "lane": {"S": lane(status, message_id)},
            "claimed_by": {"S": "e2e-audit#0#r"},
            "lease": {"N": f"{publish_at + 1:.3f}"},
            "unrecorded": {"BOOL": True},
        }
    client("dynamodb").put_item(TableName=scheduler["table"], Item=item)


def deliver(scheduler: dict[str, Any], message_id: str, channel: str = "demo") -> None:
    """What the slot function sends a demo target (a receiver-wrapped function)."""
    payload = {"id": message_id, "publishTime": int(time.time() * 1000), "parameters": {}}
    target = client("lambda")

    def invoked() -> Any:  # (`serial` runs one at a time: another test's burst throttles)
        try:
            return target.invoke(
                FunctionName=scheduler["targetFunctions"][channel],
                Payload=json.dumps(payload).encode(),
            )
        except target.exceptions.TooManyRequestsException:
            return None

    answer = eventually(invoked, timeout=120, interval=1)
    assert "FunctionError" not in answer, answer["Payload"].read()


def scheduler_plants(
    capsys: pytest.CaptureFixture[str], outputs: Path, scheduler: dict[str, Any], tag: str
) -> dict[str, str]:
    # GIVEN a message delivered and received once, days ago (within the receipts' 30):
    # a clean run
    clean = f"audit-clean-{tag}"
    then = time.time() - random.uniform(2, 20) * 86400
    message(scheduler, clean, Status.DONE, then)
    deliver(scheduler, clean)
    code, report = audit(capsys, outputs, "scheduler", then - 0.5, then + 0.5)
    assert code == 0 and report["audited"] == 1 and not report["findings"], report
    # WHEN, five minutes ago, one message was left FIRING, one DONE never reached its
    # target's receiver, and one reached it twice on a channel sent at most once (its
    # receiver dropped the second), and one twice on a channel resent by design (`demo`,
    # in `redeliver`: a lost answer's resend)
    kinds = ("pending", "lost", "doubled", "resent")
    ids = {kind: f"audit-{kind}-{tag}" for kind in kinds}
    before = time.time() - 300
    message(scheduler, ids["pending"], Status.FIRING, before)
    message(scheduler, ids["lost"], Status.DONE, before)
    message(scheduler, ids["doubled"], Status.DONE, before, channel="serial")
    message(scheduler, ids["resent"], Status.DONE, before)
    for _ in range(2):
        deliver(scheduler, ids["doubled"], channel="serial")
        deliver(scheduler, ids["resent"])
    # THEN the audit reports each but the one resent by design
    code, report = audit(capsys, outputs, "scheduler", before - 0.5, before + 0.5)
    assert code == FOUND
    assert found(report) == {ids[kind]: kind for kind in kinds[:3]}, report
    assert report["accounted"] == {
        "DONE, redelivered after a lost answer (its channel's design), applied once": 1
    }
    return ids


def scheduler_clean_up(scheduler: dict[str, Any], tag: str) -> None:
    ddb = client("dynamodb")
    for kind in ("clean", "pending", "lost", "doubled", "resent"):
        message_id = f"audit-{kind}-{tag}"
        ddb.delete_item(TableName=scheduler["table"], Key=message_key(message_id))
        for fires in scheduler["firesTables"].values():
            for key in (f"RECEIVED#{message_id}", f"fired#{message_id}", f"attempts#{message_id}"):
                ddb.delete_item(TableName=fires, Key={"pk": {"S": key}})


# -- the workflow: a run completed cleanly, a lease left behind past the timeout ----------------
def resumable_plants(
    capsys: pytest.CaptureFixture[str], outputs: Path, workflow: dict[str, Any], tag: str
) -> str:
    sfn, ddb = client("stepfunctions"), client("dynamodb")
    # GIVEN a key whose run completed: a clean run reports nothing
    key = f"audit-ok-{tag}"
    arn = sfn.start_execution(
        stateMachineArn=workflow["stateMachineArn"], name=key, input=json.dumps({"orderId": key})
    )["executionArn"]
    eventually(lambda: sfn.describe_execution(executionArn=arn)["status"] != "RUNNING", 120)
    assert sfn.describe_execution(executionArn=arn)["status"] == "SUCCEEDED"
    item = ddb.get_item(TableName=workflow["table"], Key={"pk": {"S": key}})["Item"]
    completed = float(item["completed_at"]["N"])
    code, report = audit(capsys, outputs, "resumable", completed, completed + 0.999)
    assert code == 0 and not report["findings"] and report["audited"] >= 1, report
    # WHEN a run took a key a day and two minutes ago, saved its first step, and ended
    # without finishing, and nobody ran the key again
    left = f"audit-left-{tag}"
    timeout = float(workflow["timeoutSeconds"])
    saved = time.time() - timeout - 120
    steps = workflow["steps"]
    entries = {f"out_{step}": {"S": EMPTY} for step in steps[1:]}
    machine = workflow["stateMachineArn"]
    execution = f"{machine.replace(':stateMachine:', ':execution:')}:{left}"
    ddb.put_item(
        TableName=workflow["table"],
        Item={
            "pk": {"S": left},
            "first_execution": {"S": execution},
            "lease": {"S": execution},
            "saved_at": {"S": timestamps.iso_ms(saved)},
            f"out_{steps[0]}": {"S": json.dumps({"done": True, "output": {}})},
            **entries,
        },
    )
    # THEN the audit reports it lost (when its run should have ended: two minutes ago)
    code, report = audit(capsys, outputs, "resumable", saved + timeout - 0.5, saved + timeout + 0.5)
    assert code == FOUND and found(report) == {left: "lost"}, report
    return left


@pytest.mark.waits  # a minute's grace, then the scheduled audits and their alarms
def test_the_audit_reports_planted_losses_and_doubles_and_nothing_when_clean(
    stack: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    etl, scheduler, workflow = stack["etl"]["etl-audited"], stack["scheduler"], stack["resumable"]
    outputs = tmp_path / "outputs.json"  # as `pulumi stack output --json` writes it
    outputs.write_text(
        json.dumps({"etl-audited": etl, "scheduler": scheduler, "resumable": workflow})
    )
    tag = new_tag()
    left = ""
    try:
        etl_plants(capsys, outputs, etl, tag)
        scheduler_plants(capsys, outputs, scheduler, tag)
        left = resumable_plants(capsys, outputs, workflow, tag)
        # AND each component's scheduled audit writes its findings, and their alarms fire
        expected = [
            ("etl-audited", etl, ("Lost", "Doubled")),
            ("scheduler", scheduler, ("Pending", "Lost", "Doubled")),
            ("resumable", workflow, ("Lost",)),
        ]
        for component, outs, names in expected:
            for name in names:

                def written(component: str = component, name: str = name) -> bool:
                    return metric(component, name) >= 1

                def alarmed(outs: dict[str, Any] = outs, name: str = name) -> bool:
                    return alarm(outs, name.lower()) == "ALARM"

                eventually(written, ALARM_TIMEOUT, interval=5)
                eventually(alarmed, ALARM_TIMEOUT, interval=5)
        assert alarm(workflow, "doubled") != "ALARM"  # (nothing doubled there)
    finally:
        etl_clean_up(etl, tag)
        scheduler_clean_up(scheduler, tag)
        if left:
            client("dynamodb").delete_item(TableName=workflow["table"], Key={"pk": {"S": left}})
        client("dynamodb").delete_item(
            TableName=workflow["table"], Key={"pk": {"S": f"audit-ok-{tag}"}}
        )


@pytest.mark.exclusive  # turns the starter's rule off for a moment: no other upload then
def test_an_upload_whose_event_never_reached_the_starter_is_lost(
    stack: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from exactly_once.handlers.names import execution_name

    starter = stack["nameDedup"]
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"nameDedup": starter}))
    s3, sfn, events = client("s3"), client("stepfunctions"), client("events")
    tag = new_tag()
    since = time.time() - 1
    # GIVEN an upload the starter started: a clean run
    put = s3.put_object(Bucket=starter["bucket"], Key=f"audit/{tag}/a.csv", Body=CSV)
    name = execution_name(f"{starter['bucket']}/audit/{tag}/a.csv#{put['VersionId']}")
    arn = f"{starter['stateMachineArn'].replace(':stateMachine:', ':execution:')}:{name}"

    def started() -> bool:
        try:
            return bool(sfn.describe_execution(executionArn=arn))
        except sfn.exceptions.ExecutionDoesNotExist:
            return False

    eventually(started, timeout=60)
    code, report = audit(capsys, outputs, "nameDedup", since, time.time())
    assert code == 0 and report["audited"] == 1 and not report["findings"], report
    # WHEN an upload's event never reaches it (its rule off: as a rule that did not match)
    rule = starter["ruleArn"].rsplit("/", 1)[-1]
    events.disable_rule(Name=rule)
    time.sleep(2)  # (AWS: events "might continue to match" for "a short period of time")
    try:
        lost = s3.put_object(Bucket=starter["bucket"], Key=f"audit/{tag}/b.csv", Body=CSV)
        time.sleep(5)  # (what EventBridge would have delivered by now, it drops)
    finally:
        events.enable_rule(Name=rule)
    # THEN the audit reports it lost, and nothing of the one started
    code, report = audit(capsys, outputs, "nameDedup", since, time.time())
    item = f"s3://{starter['bucket']}/audit/{tag}/b.csv#{lost['VersionId']}"
    assert code == FOUND and found(report) == {item: "lost"}, report
