"""Demo workflow steps for pattern 4: each counts its calls per business key (so a test
can prove a non-idempotent step ran exactly once) and fails on request.

Settings: `StepSettings`. Input: the workflow state; `failAt: <step>` makes that
step raise, as a flaky external API would; `pauseAt: {<step>: seconds}` makes it slow
(a run still in flight, for the concurrency tests).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from exactly_once.handlers.errors import Retryable
from exactly_once.handlers.runtime import client, log
from exactly_once.handlers.settings import Settings


@dataclasses.dataclass(frozen=True)
class StepSettings(Settings):
    step_name: str
    counter_table: str


class StepFailed(Retryable):
    """The injected failure of a flaky step."""


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return run(StepSettings.current(), event)


def run(config: StepSettings, event: dict[str, Any]) -> dict[str, Any]:
    key, step = str(event.get("orderId", "unknown")), config.step_name
    calls = client("dynamodb").update_item(
        TableName=config.counter_table,
        Key={"pk": {"S": f"{key}#{step}"}},
        UpdateExpression="ADD calls :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="UPDATED_NEW",
    )["Attributes"]["calls"]["N"]
    log("INFO", "step called", step=step, key=key, calls=int(calls))
    if pause := event.get("pauseAt", {}).get(step):
        time.sleep(float(pause))
    if event.get("failAt") == step:
        raise StepFailed(f"{step} failed for {key} (failAt)")
    earlier = {name: entry.get("output") for name, entry in event.get("results", {}).items()}
    return {
        "step": step,
        "calls": int(calls),
        "saw": sorted(k for k, v in earlier.items() if v),
    }
