"""A component's scheduled audit (handlers/audit.py): a function that reads, every period,
what came in against what took effect, and writes Lost, Doubled and Pending, each alarmed.
Its role reads only what the audit reads (the component passes those statements)."""

# No `from __future__ import annotations`: the Pulumi package analyzer reads AuditOptions'
# annotations as types (docs/pulumi-package.md).
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from exactly_once.components.component import Component
from exactly_once.components.functions import handler_function, on_schedule
from exactly_once.components.monitoring import Metric, MonitoringOptions, Watch, metrics_environment
from exactly_once.handlers.audit import PATTERN, READS, AuditSettings
from exactly_once.handlers.settings import encode

AUDIT_TIMEOUT_SECONDS = 900  # a run lists every input of the window: give it Lambda's most
AUDIT_MEMORY_MB = 512  # (the listings go through a SQLite file in /tmp, not memory)


@dataclasses.dataclass
class AuditOptions:
    """Audit the component every `period_minutes`: each input of the last `window_hours`
    older than `grace_minutes` must have taken effect exactly once (docs/operations.md,
    "The audit")."""

    period_minutes: int = 60
    """How often the audit runs."""
    grace_minutes: int = 15
    """An input younger than this is not judged yet (its work may still be running)."""
    window_hours: int = 24
    """How far back each run looks, before the grace (an input older is not judged)."""
    receipt_channels: list[str] = dataclasses.field(default_factory=list)
    """A Scheduler's only: the channels whose target records each message in the
    scheduler's `receiver_table` (a function wrapped in `exactly_once.receiver.receiver`):
    each DONE message of theirs must have its receipt."""
    receipts: dict[str, pulumi.Input[str]] = dataclasses.field(default_factory=dict)
    """A Scheduler's only: channel -> a table of yours its target's receiver records
    messages in (as `receipt_channels`, for a receiver table the scheduler did not make)."""
    receipt_days: int = 30
    """How long the receivers keep their records (the receiver's `ttl_days`): an older
    message is not checked against its receipt."""

    def validate(self) -> None:
        if self.period_minutes < 1 or self.grace_minutes < 0 or self.window_hours < 1:
            raise ValueError(
                "audit: period_minutes and window_hours must be at least 1, grace_minutes "
                f"at least 0 (given {self.period_minutes}, {self.window_hours}, "
                f"{self.grace_minutes})"
            )
        if self.period_minutes > 1440 or self.window_hours * 60 < self.period_minutes:
            raise ValueError(
                f"audit: period_minutes {self.period_minutes} must be at most a day (its "
                "stopped alarm's period) and within window_hours, or inputs would go unjudged"
            )
        if self.receipt_days < 1:
            raise ValueError(f"audit: receipt_days must be at least 1 (given {self.receipt_days})")


FINDINGS = {
    "Lost": "inputs past their grace with no effect and nothing at work on them",
    "Doubled": "inputs with more than one effect",
    "Pending": "inputs past their grace whose effect has not come",
}


def scheduled_audit(
    component: Component,
    name: str,
    outputs: Mapping[str, Any],
    statements: Sequence[Mapping[str, Any]],
    options: AuditOptions,
    monitoring: MonitoringOptions | None,
    watch: Watch,
) -> aws.lambda_.Function:
    """The audit's function, its schedule, and an alarm per finding and for runs that
    stopped. `outputs`: the component's; the audit is given those it reads (READS), and
    its role `statements`, the reads they need."""
    options.validate()
    kind = component._kind
    if (options.receipts or options.receipt_channels) and kind != "Scheduler":
        raise ValueError(f"audit receipts are a Scheduler's option, not {kind}'s")
    audited = {"kind": kind, **{key: outputs[key] for key in READS[kind]}}
    parent, platform = component, component._platform
    function = handler_function(
        f"{name}-audit",
        handler="exactly_once.handlers.audit.handler",
        statements=statements,
        environment={
            **AuditSettings.environment(
                audited=pulumi.Output.json_dumps(audited),
                grace_seconds=encode(options.grace_minutes * 60),
                window_seconds=encode(options.window_hours * 3600),
            ),
            **metrics_environment(name, monitoring),
        },
        timeout=AUDIT_TIMEOUT_SECONDS,
        memory_size=AUDIT_MEMORY_MB,
        parent=parent,
        platform=platform,
    ).function
    on_schedule(f"{name}-audit", options.period_minutes, function, parent)
    dimensions = {"Component": name, "Pattern": PATTERN}
    for metric, what in FINDINGS.items():
        watch.alarm(
            f"audit-{metric.lower()}",
            Metric(watch.options.namespace, metric, dimensions),
            f"the audit found {what} (its log lines 'audit finding' name each; "
            "docs/runbook.md says what to do)",
            statistic="Maximum",
            level=True,  # (each run writes it, 0 included: OK again once a run finds none)
        )
    watch.stopped(
        "audit-stopped",
        Metric(watch.options.namespace, "Lost", dimensions),
        options.period_minutes * 60,
        "no audit has run for two periods (its schedule rule disabled, its function or its "
        "permission gone, or each run failed: its log says why)",
    )
    return function
