"""Metrics in CloudWatch's embedded metric format (EMF): one JSON log line per event.

CloudWatch Logs turns such a line into metrics as it ingests it (CloudWatch user guide,
"Embedded metric format specification"): no PutMetricData call, no permission beyond the
log writes every function already has, no dependency in the zip. Each line carries the
metrics of one event under one namespace with two dimensions, the component's name and
the pattern, so a dashboard or alarm selects one component's metrics without a metric
per message. What each pattern may emit is `CATALOGUE`, the one list docs and tests read
(docs/operations.md). A component sets `METRICS_NAMESPACE` and `METRICS_COMPONENT`; a
function of your own that calls the library (`transform_once`) gets the defaults.
`METRICS_DISABLED=1` writes none.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Mapping, Sequence

DEFAULT_NAMESPACE = "ExactlyOnce"
DIMENSIONS = ("Component", "Pattern")

COUNT, MILLISECONDS, BYTES = "Count", "Milliseconds", "Bytes"
# A metric's datum, or several of one event (EMF takes up to 100 values a metric a line:
# CloudWatch user guide, "Embedded metric format specification")
Value = float | Sequence[float]
MAX_VALUES = 100
# Values that mean something at 0: a lateness, and a level the sweep reports every period
# (so an alarm on it sees a datum each period and returns to OK).
GAUGES = frozenset({"LatenessMs", "Overdue", "Lost", "Doubled", "Pending"})

# pattern -> metric -> unit. A metric not listed here is a programming error (ValueError).
CATALOGUE: dict[str, dict[str, str]] = {
    "name-dedup": {
        "Started": COUNT,  # a new execution for a key
        "DuplicateSuppressed": COUNT,  # a redelivered event that started nothing
        "Redriven": COUNT,  # a failed execution of the key redriven
        "Rejected": COUNT,  # dead-lettered with the reason
        "Failed": COUNT,  # raised for Lambda to retry (throttle, 5xx, unknown)
    },
    "scheduler": {
        "Registered": COUNT,  # a new message (201)
        "DuplicateSuppressed": COUNT,  # a registration replayed by its Idempotency-Key
        "Rejected": COUNT,  # a request refused (400, 409)
        "Cancelled": COUNT,
        "Fired": COUNT,  # the target took it (the message is DONE)
        "Late": COUNT,  # fired, but registered after its publish time
        "LatenessMs": MILLISECONDS,  # fired minus publish time
        "Failed": COUNT,  # the target refused it for good (the message is FAILED)
        "Unknown": COUNT,  # sent, its outcome unseen, not resent (the message is UNKNOWN)
        "Overdue": COUNT,  # RESERVED or STANDBY 60 s, FIRING 20 min past publish time (each sweep)
    },
    "receiver": {
        "DuplicateDropped": COUNT,  # a message sent again after it was applied: not run
    },
    "resumable": {
        "RunsStarted": COUNT,  # a run that took the key's lease
        "RunsSucceeded": COUNT,
        "RunsFailed": COUNT,  # a step failed: the next run resumes from it
        "KeysCompleted": COUNT,  # a run for a key already complete: nothing ran
        "StepsRun": COUNT,
        "StepsSkipped": COUNT,  # already checkpointed by an earlier run
    },
    "audit": {  # each scheduled audit run (handlers/audit.py), 0 included
        "Lost": COUNT,  # inputs past their grace with no effect, nothing at work on them
        "Doubled": COUNT,  # inputs with more than one effect
        "Pending": COUNT,  # inputs past their grace whose effect is still to come
    },
    "etl": {
        "Written": COUNT,  # one output published
        "Duplicate": COUNT,  # the input version was already processed
        "Rejected": COUNT,  # dead-lettered (FAILED record) with the reason
        "Bytes": BYTES,  # output bytes written
    },
}


def line(
    pattern: str,
    values: Mapping[str, Value],
    properties: Mapping[str, object] | None = None,
    *,
    now: float | None = None,
) -> str:
    """The EMF document for `values` (metric -> value) of `pattern`, as one line."""
    known = CATALOGUE.get(pattern)
    if known is None:
        raise ValueError(f"no metrics for pattern {pattern!r}")
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"{pattern}: metrics {unknown} are not in metrics.CATALOGUE")
    stamp = time.time() if now is None else now
    component = os.environ.get("METRICS_COMPONENT") or os.environ.get(
        "AWS_LAMBDA_FUNCTION_NAME", "local"
    )
    document: dict[str, object] = {
        # properties first: a metric or dimension of the same name wins
        **(properties or {}),
        "_aws": {
            "Timestamp": int(stamp * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": os.environ.get("METRICS_NAMESPACE") or DEFAULT_NAMESPACE,
                    "Dimensions": [list(DIMENSIONS)],
                    "Metrics": [{"Name": name, "Unit": known[name]} for name in values],
                }
            ],
        },
        "Component": component,
        "Pattern": pattern,
        **values,
    }
    return json.dumps(document, separators=(",", ":"), default=str)


def kept(values: Mapping[str, Value]) -> dict[str, Value]:
    """The values an EMF line carries: a count or size of 0 left out, a gauge's kept."""
    return {name: value for name, value in values.items() if value or name in GAUGES}


def emit(pattern: str, properties: Mapping[str, object] | None = None, /, **values: Value) -> None:
    """Write one EMF line for this event's `values` (a list: that many data, at most
    MAX_VALUES). A count or size of 0 is left out: it tells a Sum nothing a missing datum
    does not (a gauge's 0 is kept)."""
    for name, value in values.items():
        if not isinstance(value, int | float) and len(value) > MAX_VALUES:
            raise ValueError(f"{name}: {len(value)} values, EMF takes {MAX_VALUES} a line")
    if os.environ.get("METRICS_DISABLED", "").lower() in ("1", "true"):
        return  # as POWERTOOLS_METRICS_DISABLED: tests and tools that run handlers in bulk
    present = kept(values)
    if not present:
        return
    sys.stdout.write(line(pattern, present, properties) + "\n")
    sys.stdout.flush()
