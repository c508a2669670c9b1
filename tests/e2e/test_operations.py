"""Operating the patterns on LocalStack (#36): every component's alarms and dashboard are
deployed; a dead-lettered event turns its DLQ alarm to ALARM, an overdue message keeps
the scheduler's Overdue alarm in ALARM; `ops redrive-dlq --list` shows it (its function
and queue checked: a starter's, and its DLQ), then sends it
back through the starter once, an event whose work succeeded meanwhile is a duplicate,
and a second redrive produces nothing; the handlers' embedded metrics reach CloudWatch."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from exactly_once.handlers.scheduler_index import Status, lane, message_key
from exactly_once.ops.__main__ import main as ops
from tooling import events
from tooling.clients import (
    ENDPOINT,
    client,
    eventually,
    executions,
    fault,
    metric_points,
    new_tag,
)

COMPONENTS = ("nameDedup", "apiStarter", "scheduler", "resumable", "resumableDurable")
AUDIT = ("Lost", "Doubled", "Pending")  # levels each audit run writes (docs/operations.md)
ALARM_TIMEOUT = 240  # LocalStack evaluates a 60 s alarm every 60 s; SQS reports every 10 s


def redrive_dlq(capsys: pytest.CaptureFixture[str], starter: dict[str, Any], *more: str) -> Any:
    capsys.readouterr()
    code = ops(
        [
            "redrive-dlq",
            "--queue",
            starter["dlqUrl"],
            "--function",
            starter["functionName"],
            "--endpoint-url",
            ENDPOINT,
            "--region",
            "us-east-1",
            "--yes",  # (a redrive asks first on a terminal only: none here)
            *more,
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def mine(report: dict[str, Any], tag: str) -> list[dict[str, Any]]:
    return [m for m in report["messages"] if tag in json.dumps(m["event"] or m)]


def alarm_state(name: str) -> str:
    [alarm] = client("cloudwatch").describe_alarms(AlarmNames=[name])["MetricAlarms"]
    return str(alarm["StateValue"])


@pytest.mark.parametrize("component", [*COMPONENTS, "etl"])
def test_each_component_has_its_alarms_and_its_dashboard(
    stack: dict[str, Any], component: str
) -> None:
    out = stack[component]
    if component == "etl":  # one entry per ETL: the first
        out = next(iter(out.values()))
    names = out["alarmNames"]
    assert names, f"{component} has no alarm"
    alarms = client("cloudwatch").describe_alarms(AlarmNames=names)["MetricAlarms"]
    assert sorted(a["AlarmName"] for a in alarms) == sorted(names)
    for alarm in alarms:
        assert alarm["AlarmDescription"], alarm["AlarmName"]
        if "-stopped" in alarm["AlarmName"]:  # no datum of a scheduled run: ALARM
            assert (alarm["Statistic"], alarm["TreatMissingData"]) == ("SampleCount", "breaching")
            continue
        level = alarm["MetricName"] in ("ApproximateNumberOfMessagesVisible", "Overdue", *AUDIT)
        level = level or "-sweep-failed" in alarm["AlarmName"]  # (held while failing)
        missing = "ignore" if level else "notBreaching"  # (components/monitoring.py)
        assert alarm["Period"] == 60 and alarm["TreatMissingData"] == missing
    body = json.loads(
        client("cloudwatch").get_dashboard(DashboardName=out["dashboardName"])["DashboardBody"]
    )
    assert body["widgets"] and all(w["properties"]["metrics"] for w in body["widgets"])


@pytest.mark.exclusive  # redrives the whole DLQ
def test_a_dead_letter_alarms_and_one_redrive_applies_it_once(
    stack: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    starter = stack["nameDedup"]
    [dlq_alarm] = [n for n in starter["alarmNames"] if "dlq-not-empty" in n]
    tag = new_tag()
    first, second = f"in/{tag}/first.csv", f"in/{tag}/second.csv"
    # GIVEN two uploads whose starts are refused for good (a permanent error: dead-lettered)
    # (the uploads bucket also feeds the API starter: only this starter's starts fail)
    mine_only = [tag, starter["stateMachineArn"]]
    with fault("stepfunctions.StartExecution", "InvalidExecutionInput", 2, mine_only) as injected:
        for key in (first, second):
            client("s3").put_object(Bucket=starter["bucket"], Key=key, Body=b"data")
        eventually(lambda: injected() == 2)

        # THEN both wait in the DLQ with the reason (--list receives them to show them,
        # sends nothing)
        def listed() -> list[dict[str, Any]]:
            return mine(redrive_dlq(capsys, starter, "--list"), tag)

        parked = eventually(lambda: len(listed()) == 2 and listed())
    assert all("InvalidExecutionInput" in m["reasons"][-1] for m in parked)
    assert executions(starter["stateMachineArn"], tag) == []
    # AND the DLQ's alarm goes to ALARM
    eventually(lambda: alarm_state(dlq_alarm) == "ALARM", timeout=ALARM_TIMEOUT, interval=5)

    # WHEN the second one's event reaches the starter again by itself, once the cause is gone
    [later] = [m["event"] for m in parked if second in json.dumps(m["event"])]
    assert client("events").put_events(Entries=[events.rebroadcast(later)])["FailedEntryCount"] == 0
    eventually(lambda: len(executions(starter["stateMachineArn"], tag)) == 1)
    # AND the DLQ is redriven
    report = redrive_dlq(capsys, starter)
    outcomes = {
        (first if first in json.dumps(m["event"]) else second): m for m in mine(report, tag)
    }
    # THEN the first starts now, the second is a duplicate: one execution each
    assert {k: v["result"] for k, v in outcomes.items()} == {
        first: "redriven",
        second: "redriven",
    }
    assert outcomes[first]["answer"]["status"] == "STARTED"
    assert outcomes[second]["answer"]["status"] == "DUPLICATE"
    started = executions(starter["stateMachineArn"], tag)
    assert len(started) == 2
    # AND a second redrive finds nothing of theirs and starts nothing
    assert mine(redrive_dlq(capsys, starter), tag) == []
    assert len(executions(starter["stateMachineArn"], tag)) == 2


@pytest.mark.waits  # the sweep's schedule and three alarm periods
def test_an_overdue_message_keeps_the_overdue_alarm_in_alarm_while_it_lasts(
    stack: dict[str, Any],
) -> None:
    out = stack["scheduler"]
    [overdue_alarm] = [n for n in out["alarmNames"] if "messages-overdue" in n]
    ddb = client("dynamodb")
    message_id = f"e2e-overdue-{new_tag()}"
    now = time.time()
    # GIVEN a message delivered two minutes ago whose status could not be written (FIRING,
    # its claimant's lease over, marked `unrecorded` as the sweep marks one whose slot
    # failed StatusNotRecorded): overdue until someone sets it by hand, never fired again
    target = ddb.get_item(TableName=out["table"], Key={"pk": {"S": "INVOKER#demo"}})["Item"]
    item = {
        **message_key(message_id),
        "id": {"S": message_id},
        "status": {"S": Status.FIRING},
        "lane": {"S": lane(Status.FIRING, message_id)},
        "publish_at": {"N": f"{now - 120:.3f}"},
        "channel": {"S": "demo"},
        "target_arn": target["target_arn"],
        "parameters": {"S": "{}"},
        "claimed_by": {"S": "e2e-delivered-unrecorded#0#r"},
        "lease": {"N": f"{now - 100:.3f}"},
        "unrecorded": {"BOOL": True},
    }
    ddb.put_item(TableName=out["table"], Item=item)
    try:
        # WHEN the sweep runs (every minute on this stack), period after period
        # THEN the Overdue alarm goes to ALARM and stays there for two periods and more:
        # each sweep reports the message, and a period without a sweep keeps the state
        # (missing data ignored), where before it went OK after one period
        eventually(lambda: alarm_state(overdue_alarm) == "ALARM", timeout=ALARM_TIMEOUT, interval=5)
        held_since = time.monotonic()
        while time.monotonic() - held_since < 2 * 60 + 10:
            assert alarm_state(overdue_alarm) == "ALARM"
            time.sleep(10)
        # AND the message was never fired again, nor taken over
        stored = ddb.get_item(TableName=out["table"], Key=message_key(message_id))["Item"]
        assert stored["status"]["S"] == Status.FIRING
        assert stored["claimed_by"] == item["claimed_by"]
    finally:
        ddb.delete_item(TableName=out["table"], Key=message_key(message_id))


def test_the_handlers_metrics_reach_cloudwatch(stack: dict[str, Any]) -> None:
    """The embedded-metric lines of the starter (localstack/host_executor: lambda_logs.py
    makes them metrics, as CloudWatch Logs does) under the documented names."""
    component = "name-dedup"  # the component's name in __main__.py

    def total(metric: str) -> float:
        return sum(metric_points(component, "name-dedup", metric, "Sum", 60, period=3600))

    assert eventually(lambda: total("Started")) >= 1
    assert eventually(lambda: total("DuplicateSuppressed")) >= 1
    assert eventually(lambda: total("Rejected")) >= 1


def test_the_platform_options_reach_the_deployed_resources(stack: dict[str, Any]) -> None:
    """Pulumi.local.yaml gives the scheduler every PlatformOptions field (docs/platform.md):
    LocalStack's resources carry them, as deployed by `python -m deploy`."""
    out = stack["scheduler"]
    function = client("lambda").get_function(FunctionName=out["slotFunction"])
    config = function["Configuration"]
    assert config["TracingConfig"]["Mode"] == "Active"
    assert config["LoggingConfig"]["LogFormat"] == "JSON"
    assert config["LoggingConfig"]["SystemLogLevel"] == "WARN"
    assert config["LoggingConfig"]["ApplicationLogLevel"] == "INFO"
    assert config["MemorySize"] == 512  # the slots function's size (docs/scheduler.md)
    assert function["Tags"]["team"] == "e2e"
    [group] = client("logs").describe_log_groups(
        logGroupNamePrefix=config["LoggingConfig"]["LogGroup"]
    )["logGroups"]
    assert group["retentionInDays"] == 7
    machine = out["stateMachineArn"]
    described = client("stepfunctions").describe_state_machine(stateMachineArn=machine)
    # LocalStack's DescribeStateMachine leaves tracingConfiguration out (AWS returns
    # it); the engine sends it with the rest (deploy/localstack_engine.py), and
    # tests/unit/test_platform.py holds the component's inputs to it
    assert described.get("tracingConfiguration", {"enabled": True})["enabled"] is True
    logging = described["loggingConfiguration"]
    assert logging["level"] == "ERROR" and logging["includeExecutionData"] is False
    [destination] = logging["destinations"]
    assert "/aws/vendedlogs/states/" in destination["cloudWatchLogsLogGroup"]["logGroupArn"]
    tags = client("stepfunctions").list_tags_for_resource(resourceArn=machine)["tags"]
    assert {"key": "team", "value": "e2e"} in tags
    table = client("dynamodb").describe_table(TableName=out["table"])["Table"]
    tags = client("dynamodb").list_tags_of_resource(ResourceArn=table["TableArn"])["Tags"]
    assert {"Key": "team", "Value": "e2e"} in tags


def test_one_function_s_platform_settings_reach_it_alone(stack: dict[str, Any]) -> None:
    """Pulumi.local.yaml gives the scheduler a service name and its sweep function its own
    settings (platform.functions: processor, reserved concurrency, log level, environment;
    `demoLayerFunction`: the demo layer): LocalStack's sweep carries them, and the slots
    function the service name alone."""
    out = stack["scheduler"]
    lam = client("lambda")
    sweep = lam.get_function_configuration(FunctionName=out["sweepFunction"])
    assert sweep["Architectures"] == ["arm64"]
    [layer] = sweep["Layers"]
    assert ":layer:scheduler-demo-layer:" in layer["Arn"]
    reserved = lam.get_function_concurrency(FunctionName=out["sweepFunction"])
    assert reserved.get("ReservedConcurrentExecutions") == 5
    variables = sweep["Environment"]["Variables"]
    assert (variables["TEAM_SETTING"], variables["LOG_LEVEL"]) == ("e2e", "DEBUG")
    assert variables["POWERTOOLS_SERVICE_NAME"] == "reminders-e2e"
    assert variables["TABLE"] == out["table"]  # beside the component's own
    assert sweep["LoggingConfig"]["ApplicationLogLevel"] == "DEBUG"  # its DEBUG lines kept
    slots = lam.get_function_configuration(FunctionName=out["slotFunction"])
    assert slots["Architectures"] == ["x86_64"] and not slots.get("Layers")
    reserved = lam.get_function_concurrency(FunctionName=out["slotFunction"])
    assert reserved.get("ReservedConcurrentExecutions") is None
    variables = slots["Environment"]["Variables"]
    assert variables["POWERTOOLS_SERVICE_NAME"] == "reminders-e2e"
    assert {"TEAM_SETTING", "LOG_LEVEL"}.isdisjoint(variables)
