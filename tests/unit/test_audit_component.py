"""A component's scheduled audit (components/audit.py) under Pulumi mocks: its function,
schedule and alarms; a role that reads only; the outputs it is given, and no more."""

from __future__ import annotations

import json

import pytest

from exactly_once.components.audit import AuditOptions
from exactly_once.handlers.audit import READS
from exactly_once.testing import Mocks
from tests.unit.pulumi_harness import component, run

FUNCTION = "aws:lambda/function:Function"
KINDS = {"etl": "IdempotentEtl", "scheduler": "Scheduler", "resumable": "ResumableWorkflow"}
KINDS |= {"name-dedup": "NameDedupStarter"}
# what reading needs; the role's other statements are its own log writes
READ_ONLY = {
    "s3:ListBucket",
    "s3:ListBucketVersions",
    "s3:GetBucketVersioning",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:BatchGetItem",
    "states:ListExecutions",
}


def actions(mocks: Mocks, function: str) -> set[str]:
    """Every action of the function's role's inline policy."""
    policy = mocks.named(f"{function}-policy", "aws:iam/rolePolicy:RolePolicy")
    found: set[str] = set()
    for statement in json.loads(policy.inputs["policy"])["Statement"]:
        listed = statement["Action"]
        found |= {listed} if isinstance(listed, str) else set(listed)
    return found


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_audit_runs_on_schedule_reads_only_and_alarms_each_finding(kind: str) -> None:
    mocks = run(lambda: component(kind, audit=AuditOptions(period_minutes=30, grace_minutes=5)))
    function = mocks.named("c-audit", FUNCTION)
    assert function.inputs["handler"] == "exactly_once.handlers.audit.handler"
    variables = function.inputs["environment"]["variables"]
    audited = json.loads(variables["AUDITED"])
    assert audited == {"kind": KINDS[kind], **{k: audited[k] for k in READS[KINDS[kind]]}}
    assert (variables["GRACE_SECONDS"], variables["WINDOW_SECONDS"]) == ("300", "86400")
    rule = mocks.named("c-audit-schedule", "aws:cloudwatch/eventRule:EventRule")
    assert rule.inputs["scheduleExpression"] == "rate(30 minutes)"
    granted = actions(mocks, "c-audit") - {"logs:CreateLogStream", "logs:PutLogEvents"}
    assert granted <= READ_ONLY and granted & {"dynamodb:Scan", "s3:ListBucket"}
    alarms = {a.name for a in mocks.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")}
    assert {f"c-audit-{m}" for m in ("lost", "doubled", "pending", "stopped")} <= alarms


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_without_audit_options_there_is_no_audit(kind: str) -> None:
    mocks = run(lambda: component(kind))
    assert not [f for f in mocks.of_type(FUNCTION) if f.name.endswith("-audit")]


def test_bad_audit_options_are_refused_where_written() -> None:
    with pytest.raises(Exception, match="period_minutes and window_hours must be at least 1"):
        run(lambda: component("resumable", audit=AuditOptions(period_minutes=0)))


def test_a_schedulers_receipts_are_the_channels_its_audit_names() -> None:
    from exactly_once.components.scheduler import Scheduler, SchedulerArgs
    from tests.unit.pulumi_harness import FUNCTION_ARN

    def program() -> None:
        channels = {"mail": FUNCTION_ARN, "sms": FUNCTION_ARN}
        audit = AuditOptions(receipt_channels=["mail"])
        Scheduler("c", SchedulerArgs(channels, redeliver=["sms"], receiver_table=True, audit=audit))

    mocks = run(program)
    audited = json.loads(
        mocks.named("c-audit", FUNCTION).inputs["environment"]["variables"]["AUDITED"]
    )
    assert list(audited["receipts"]) == ["mail"]  # sms is resent, and keeps no receipts
    assert (audited["redeliver"], audited["receiptDays"]) == (["sms"], 30)
    assert audited["receipts"]["mail"].startswith("c-received")
    assert "dynamodb:BatchGetItem" in actions(mocks, "c-audit")


def test_receipts_name_channels_of_a_scheduler_only() -> None:
    with pytest.raises(Exception, match="audit receipts: no channel fax"):
        run(lambda: component("scheduler", audit=AuditOptions(receipts={"fax": "t"})))
    with pytest.raises(Exception, match="receipts are a Scheduler's option"):
        run(lambda: component("resumable", audit=AuditOptions(receipts={"demo": "t"})))
    with pytest.raises(Exception, match="record in receiver_table: set receiver_table"):
        run(lambda: component("scheduler", audit=AuditOptions(receipt_channels=["demo"])))
    with pytest.raises(Exception, match="within window_hours"):
        run(lambda: component("scheduler", audit=AuditOptions(period_minutes=120, window_hours=1)))


def test_a_starter_of_its_own_event_pattern_cannot_be_audited() -> None:
    from exactly_once.components.name_dedup import NameDedupStarterArgs
    from tests.unit.pulumi_harness import WORKFLOW

    with pytest.raises(ValueError, match="its own event pattern"):
        NameDedupStarterArgs(event_pattern="{}", definition=WORKFLOW, audit=AuditOptions())
