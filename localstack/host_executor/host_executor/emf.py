"""Embedded-metric-format lines as CloudWatch's PutMetricData takes them (no LocalStack
import: unit-tested on its own)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any


def emf_metric_data(line: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """(namespace, MetricData) of one log line in CloudWatch's embedded metric format, or []
    (CloudWatch user guide, "Specification: Embedded metric format"). AWS extracts these
    metrics as it ingests the log; LocalStack's community edition does not."""
    if '"_aws"' not in line:
        return []
    try:
        document = json.loads(line)
        directives = document["_aws"]["CloudWatchMetrics"]
        stamp = datetime.fromtimestamp(document["_aws"]["Timestamp"] / 1000, UTC)
    except (ValueError, KeyError, TypeError):
        return []
    found = []
    for directive in directives:
        for dimension_set in directive.get("Dimensions") or [[]]:
            dimensions = [{"Name": d, "Value": str(document[d])} for d in dimension_set]
            data = [
                {
                    "MetricName": metric["Name"],
                    "Dimensions": dimensions,
                    **_values(document[metric["Name"]]),
                    "Unit": metric.get("Unit", "None"),
                    "Timestamp": stamp,
                }
                for metric in directive.get("Metrics", [])
                if metric.get("Name") in document
            ]
            if data:
                found.append((directive["Namespace"], data))
    return found


def _values(value: Any) -> dict[str, Any]:
    """A metric's member as PutMetricData takes it: a number, or an array of up to 100
    ("Values": the EMF specification lets a member be either)."""
    if isinstance(value, list):
        return {"Values": [float(v) for v in value]}
    return {"Value": float(value)}
