"""What each component watches: its alarms and its dashboard, from one set of metric names.

The handlers write their metrics in CloudWatch's embedded metric format
(handlers/metrics.py: the catalogue, one namespace, dimensions Component and Pattern);
AWS's own metrics cover what no handler of ours sees (a DLQ's depth, a state machine's
failed executions, an API's 5xx answers). Every alarm is on one metric, with a period of
60 s (SQS sends its metrics once a minute: CloudWatch user guide, "Available CloudWatch
metrics for Amazon SQS"). An alarm on a count of events (failures, 5xx answers) treats
missing data as not breaching: no event is nothing wrong. An alarm on a level that stays
until someone acts (a DLQ's depth, messages overdue) keeps its state while data is
missing (`ignore`: "The current alarm state is maintained", CloudWatch user guide,
"Configuring how CloudWatch alarms treat missing data"): SQS reports a queue's metrics
only while it is active ("CloudWatch considers a queue to be active for up to six hours if
it contains any messages or if any action accesses it", SQS developer guide), and the
sweep reports Overdue once per run, so either went OK (and told the OK action) while the
messages still waited.
docs/operations.md lists every metric and alarm.
"""

# No `from __future__ import annotations`: the Pulumi package analyzer reads
# MonitoringOptions' annotations as types (docs/pulumi-package.md).
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from exactly_once.handlers.metrics import CATALOGUE, DEFAULT_NAMESPACE

PERIOD_SECONDS = 60


@dataclasses.dataclass
class MonitoringOptions:
    """Metrics, alarms and the dashboard of one component."""

    namespace: str = DEFAULT_NAMESPACE
    """The CloudWatch namespace of the handlers' metrics."""
    alarms: bool = True
    """Create the component's alarms."""
    alarm_actions: list[pulumi.Input[str]] = dataclasses.field(default_factory=list)
    """ARNs told when an alarm goes to ALARM and back to OK (e.g. your SNS topic)."""
    dashboard: bool = True
    """Create the component's CloudWatch dashboard."""

    def validate(self) -> None:
        if not self.namespace or self.namespace.startswith("AWS/"):
            raise ValueError(
                f"monitoring.namespace {self.namespace!r}: give a namespace of your own "
                "(AWS/ is reserved for AWS's metrics)"
            )


def metrics_environment(name: str, options: MonitoringOptions | None) -> dict[str, str]:
    """What a handler function needs to label its metrics with this component."""
    return {
        "METRICS_NAMESPACE": (options or MonitoringOptions()).namespace,
        "METRICS_COMPONENT": name,
    }


@dataclasses.dataclass(frozen=True)
class Metric:
    """One CloudWatch metric: its namespace, name and dimensions."""

    namespace: str
    name: str
    dimensions: Mapping[str, pulumi.Input[str]]


class Watch:
    """A component's alarms and dashboard widgets, built as it adds what to watch."""

    def __init__(
        self, name: str, pattern: str, options: MonitoringOptions | None, parent: pulumi.Resource
    ) -> None:
        self.name, self.pattern, self.parent = name, pattern, parent
        self.options = options or MonitoringOptions()
        self.options.validate()
        self.alarms: list[aws.cloudwatch.MetricAlarm] = []
        self.widgets: list[pulumi.Output[dict[str, Any]]] = []

    def own(self, metric: str) -> Metric:
        """One of this component's handler metrics (it must be in the catalogue)."""
        if metric not in CATALOGUE[self.pattern]:
            raise ValueError(f"{self.pattern} has no metric {metric!r} (handlers/metrics.py)")
        return Metric(
            self.options.namespace, metric, {"Component": self.name, "Pattern": self.pattern}
        )

    # -- alarms ---------------------------------------------------------------------------
    def alarm(
        self,
        what: str,
        metric: Metric,
        description: str,
        statistic: str = "Sum",
        evaluation_periods: int = 1,
        level: bool = False,
    ) -> None:
        """ALARM when `metric` is 1 or more in `evaluation_periods` minutes in a row.
        `level`: the metric is a level reported now and then, not a count of events: the
        alarm keeps its state while no data comes (see the module)."""
        self._alarm(
            what,
            metric,
            description,
            statistic=statistic,
            period=PERIOD_SECONDS,
            evaluation_periods=evaluation_periods,
            comparison_operator="GreaterThanOrEqualToThreshold",
            treat_missing_data="ignore" if level else "notBreaching",
        )

    def stopped(self, what: str, metric: Metric, every_seconds: int, description: str) -> None:
        """ALARM when `metric`, written every `every_seconds` by a scheduled run, has no
        datum for two such periods (one when two would pass a day, CloudWatch's most):
        the runs stopped (a disabled rule, a deleted function, a permission taken away)."""
        period = min(every_seconds, 86400)
        self._alarm(
            what,
            metric,
            description,
            statistic="SampleCount",
            period=period,
            evaluation_periods=2 if 2 * period <= 86400 else 1,
            comparison_operator="LessThanThreshold",
            treat_missing_data="breaching",
        )

    def _alarm(self, what: str, metric: Metric, description: str, **settings: Any) -> None:
        """One alarm on `metric` against a threshold of 1, telling this component's
        alarm actions of ALARM and OK."""
        if not self.options.alarms:
            return
        actions = list(self.options.alarm_actions)
        self.alarms.append(
            aws.cloudwatch.MetricAlarm(
                f"{self.name}-{what}",
                alarm_description=f"{self.name}: {description}",
                namespace=metric.namespace,
                metric_name=metric.name,
                dimensions=dict(metric.dimensions),
                threshold=1,
                alarm_actions=actions,
                ok_actions=actions,
                opts=pulumi.ResourceOptions(parent=self.parent),
                **settings,
            )
        )

    def dead_letters(self, queue: aws.sqs.Queue) -> None:
        """An alarm while the DLQ holds anything, and its depth on the dashboard."""
        depth = Metric("AWS/SQS", "ApproximateNumberOfMessagesVisible", {"QueueName": queue.name})
        self.alarm(
            "dlq-not-empty",
            depth,
            "events wait in the dead-letter queue; fix the cause (each message says it), "
            "then `python -m exactly_once.ops redrive-dlq`",
            statistic="Maximum",
            level=True,
        )
        self.graph("Dead-letter queue depth", [(depth, "Maximum")])

    def failed_executions(
        self,
        state_machine_arn: pulumi.Input[str],
        description: str,
        what: str = "executions",
    ) -> None:
        metric = Metric("AWS/States", "ExecutionsFailed", {"StateMachineArn": state_machine_arn})
        self.alarm(f"{what}-failed", metric, description)
        self.graph(f"Failed {what.replace('-', ' ')}", [(metric, "Sum")])

    # -- the dashboard --------------------------------------------------------------------
    def graph(self, title: str, lines: Sequence[tuple[Metric, str]]) -> None:
        """A time series widget: each (metric, statistic) a line."""

        def body(resolved: list[Any]) -> dict[str, Any]:
            region, *dimension_values = resolved
            rows: list[list[Any]] = []
            values = iter(dimension_values)
            for metric, statistic in lines:
                row: list[Any] = [metric.namespace, metric.name]
                for dimension in metric.dimensions:
                    row += [dimension, next(values)]
                rows.append([*row, {"stat": statistic, "label": f"{metric.name} {statistic}"}])
            return {
                "type": "metric",
                "width": 12,
                "height": 6,
                "properties": {
                    "title": title,
                    "view": "timeSeries",
                    "region": region,
                    "period": PERIOD_SECONDS,
                    "metrics": rows,
                },
            }

        region = aws.get_region_output(opts=pulumi.InvokeOptions(parent=self.parent)).region
        inputs = [value for metric, _ in lines for value in metric.dimensions.values()]
        self.widgets.append(pulumi.Output.all(region, *inputs).apply(body))

    def counts(self, title: str, metrics: Sequence[str]) -> None:
        """A widget of this component's own counts (Sum per minute)."""
        self.graph(title, [(self.own(metric), "Sum") for metric in metrics])

    def finish(self) -> aws.cloudwatch.Dashboard | None:
        """The dashboard of every widget added (None when turned off)."""
        if not self.options.dashboard or not self.widgets:
            return None
        stack = pulumi.get_stack()
        return aws.cloudwatch.Dashboard(
            f"{self.name}-dashboard",
            # dashboard names: letters, digits, - and _ (one per stack and component)
            dashboard_name=_dashboard_name(f"{stack}-{self.name}"),
            dashboard_body=pulumi.Output.all(*self.widgets).apply(
                lambda widgets: json.dumps({"widgets": widgets})
            ),
            opts=pulumi.ResourceOptions(parent=self.parent),
        )


def _dashboard_name(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in text)[:255]
