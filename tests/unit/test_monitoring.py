"""Metrics, alarms and dashboards (#36): every metric line is valid EMF under a documented
name; every component of the local stack gets its alarms and one dashboard built from the
same names; monitoring can be turned off and told whom to alarm."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from exactly_once.components.monitoring import MonitoringOptions
from exactly_once.handlers import metrics
from tests.unit.pulumi_harness import RecordingMocks, run, run_stack

ROOT = Path(__file__).resolve().parents[2]
UNITS = {"Count", "Milliseconds", "Bytes"}
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
DASHBOARD = "aws:cloudwatch/dashboard:Dashboard"


def emitted(pattern: str, properties: dict[str, Any] | None = None, **values: float) -> list[Any]:
    out = io.StringIO()
    with redirect_stdout(out):
        metrics.emit(pattern, properties, **values)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def assert_valid_emf(document: dict[str, Any]) -> None:
    """CloudWatch user guide, "Specification: Embedded metric format"."""
    meta = document["_aws"]
    assert isinstance(meta["Timestamp"], int) and meta["Timestamp"] > 1_700_000_000_000
    [directive] = meta["CloudWatchMetrics"]
    assert directive["Namespace"] and not directive["Namespace"].startswith("AWS/")
    assert directive["Dimensions"] == [["Component", "Pattern"]]
    for dimension in directive["Dimensions"][0]:
        assert isinstance(document[dimension], str) and document[dimension]
    assert 1 <= len(directive["Metrics"]) <= 100
    pattern = document["Pattern"]
    for metric in directive["Metrics"]:
        assert metric["Name"] in metrics.CATALOGUE[pattern], metric
        assert metric["Unit"] == metrics.CATALOGUE[pattern][metric["Name"]] in UNITS
        assert isinstance(document[metric["Name"]], int | float)


@pytest.mark.parametrize("pattern", sorted(metrics.CATALOGUE))
def test_every_metric_of_every_pattern_is_valid_emf(
    pattern: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("METRICS_NAMESPACE", "Shop")
    monkeypatch.setenv("METRICS_COMPONENT", "orders")
    values = {name: 1 for name in metrics.CATALOGUE[pattern]}
    [document] = emitted(pattern, {"key": "k-1"}, **values)
    assert_valid_emf(document)
    assert document["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Shop"
    assert (document["Component"], document["Pattern"], document["key"]) == (
        "orders",
        pattern,
        "k-1",
    )


def test_a_metric_not_in_the_catalogue_is_refused() -> None:
    with pytest.raises(ValueError, match=r"not in metrics\.CATALOGUE"):
        metrics.line("etl", {"Writen": 1})
    with pytest.raises(ValueError, match="no metrics for pattern"):
        metrics.line("etc", {"Written": 1})


def test_a_zero_count_is_left_out_and_a_gauges_zero_kept() -> None:
    assert emitted("etl", Written=0, Duplicate=0) == []  # nothing: no line at all
    [line] = emitted("etl", Written=1, Duplicate=0)
    assert "Duplicate" not in line and line["Written"] == 1
    [line] = emitted("scheduler", Overdue=0, LatenessMs=0)
    assert (line["Overdue"], line["LatenessMs"]) == (0, 0)


def test_a_property_never_overrides_a_dimension_or_a_metric() -> None:
    [line] = emitted("etl", {"Pattern": "x", "Written": 9}, Written=1)
    assert (line["Pattern"], line["Written"]) == ("etl", 1)


def test_the_docs_table_lists_every_metric_and_no_other() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    rows = re.findall(r"^\| `([a-z-]+)` \| `([A-Za-z]+)` \|", text, re.M)
    documented = {(pattern, name) for pattern, name in rows}
    catalogued = {(p, name) for p, names in metrics.CATALOGUE.items() for name in names}
    assert documented == catalogued


# -- the components ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def local() -> RecordingMocks:
    return run_stack("local")


PRODUCT = {
    f"exactly-once:index:{kind}"
    for kind in (
        "NameDedupStarter",
        "ApiGatewayStarter",
        "Scheduler",
        "ResumableWorkflow",
        "IdempotentEtl",
    )
}


LEVELS = {"ApproximateNumberOfMessagesVisible", "Overdue", "Lost", "Doubled", "Pending"}


def components(mocks: RecordingMocks) -> list[Any]:
    return [r for r in mocks.resources if r.typ in PRODUCT]


def alarms_of(mocks: RecordingMocks, component: Any) -> list[Any]:
    """Its alarms: each description starts with the component's name."""
    return [
        a
        for a in mocks.of_type(ALARM)
        if a.inputs["alarmDescription"].startswith(f"{component.name}: ")
    ]


def test_every_component_has_alarms_and_one_dashboard(local: RecordingMocks) -> None:
    found = components(local)
    assert len(found) >= 5
    names = set()
    for component in found:
        alarms = alarms_of(local, component)
        assert alarms, component.name
        for alarm in alarms:
            i = alarm.inputs
            assert alarm.name.startswith(f"{component.name}-")
            if alarm.name.endswith("-stopped"):  # a scheduled run's datum missing: ALARM
                assert (i["statistic"], i["comparisonOperator"]) == (
                    "SampleCount",
                    "LessThanThreshold",
                )
                assert i["treatMissingData"] == "breaching" and i["threshold"] == 1
                assert i["period"] * i["evaluationPeriods"] <= 86400  # CloudWatch's most
            else:
                assert (i["period"], i["threshold"]) == (60, 1)
                assert i["comparisonOperator"] == "GreaterThanOrEqualToThreshold"
                # a level (a DLQ's depth, Overdue) keeps its state while no data comes: SQS
                # stops an idle queue's metrics, the sweep reports once a run; so does a
                # run's failure that only a later run's success clears; a count does not
                level = i["metricName"] in LEVELS or alarm.name.endswith("-sweep-failed")
                assert i["treatMissingData"] == ("ignore" if level else "notBreaching"), alarm.name
            if i["namespace"] == metrics.DEFAULT_NAMESPACE:  # our own: this component's
                assert i["dimensions"]["Component"] == component.name
                pattern = i["dimensions"]["Pattern"]
                assert i["metricName"] in metrics.CATALOGUE[pattern]
            else:
                assert i["namespace"].startswith("AWS/")
            names.add(alarm.name)
        [dashboard] = [
            d for d in local.of_type(DASHBOARD) if d.name == f"{component.name}-dashboard"
        ]
        assert_dashboard(json.loads(dashboard.inputs["dashboardBody"]))
    assert len(names) == len(local.of_type(ALARM))  # each alarm is one component's


def assert_dashboard(body: dict[str, Any]) -> None:
    assert body["widgets"]
    for widget in body["widgets"]:
        properties = widget["properties"]
        assert properties["region"] == "us-east-1" and properties["period"] == 60
        for row in properties["metrics"]:
            namespace, name, *rest, options = row
            assert "stat" in options
            dimensions = dict(zip(rest[::2], rest[1::2], strict=True))
            if namespace == metrics.DEFAULT_NAMESPACE:
                assert name in metrics.CATALOGUE[dimensions["Pattern"]]
            else:
                assert namespace.startswith("AWS/") and all(dimensions.values())


def test_every_dlq_has_its_alarm(local: RecordingMocks) -> None:
    queues = [q for q in local.of_type("aws:sqs/queue:Queue") if q.name.endswith("-dlq")]
    watched = {
        a.inputs["dimensions"]["QueueName"]
        for a in local.of_type(ALARM)
        if a.inputs["namespace"] == "AWS/SQS"
    }
    assert queues and {q.name for q in queues} <= watched  # the mocks name a queue by itself


def test_monitoring_off_creates_no_alarm_and_no_dashboard_and_actions_are_set() -> None:
    from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs

    def starter(monitoring: MonitoringOptions) -> RecordingMocks:
        args = NameDedupStarterArgs(
            bucket_name="uploads",
            state_machine_arn="arn:aws:states:us-east-1:123456789012:stateMachine:orders",
            monitoring=monitoring,
        )
        return run(lambda: NameDedupStarter("orders", args))

    off = starter(MonitoringOptions(alarms=False, dashboard=False))
    assert off.of_type(ALARM) == [] and off.of_type(DASHBOARD) == []
    topic = "arn:aws:sns:us-east-1:123456789012:oncall"
    on = starter(MonitoringOptions(namespace="Shop", alarm_actions=[topic]))
    [alarm] = on.of_type(ALARM)
    assert alarm.inputs["alarmActions"] == [topic] == alarm.inputs["okActions"]
    environment = on.named("orders-starter").inputs["environment"]["variables"]
    assert environment["METRICS_NAMESPACE"] == "Shop"
    assert environment["METRICS_COMPONENT"] == "orders"
    body = json.loads(on.of_type(DASHBOARD)[0].inputs["dashboardBody"])
    assert {row[0] for w in body["widgets"] for row in w["properties"]["metrics"]} == {
        "Shop",
        "AWS/SQS",
    }


def test_an_aws_namespace_is_refused() -> None:
    with pytest.raises(ValueError, match="AWS/ is reserved"):
        MonitoringOptions(namespace="AWS/Lambda").validate()


def test_no_role_may_put_metric_data(local: RecordingMocks) -> None:
    """EMF needs only the log writes a function already has (docs/operations.md)."""
    policies = [p.inputs["policy"] for p in local.of_type("aws:iam/rolePolicy:RolePolicy")]
    assert policies
    for policy in policies:
        for statement in json.loads(policy)["Statement"]:
            actions = statement["Action"]
            actions = [actions] if isinstance(actions, str) else actions
            assert not any(a.lower().startswith("cloudwatch:") for a in actions), statement


def test_metrics_disabled_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METRICS_DISABLED", "1")
    assert emitted("etl", Written=1) == []
