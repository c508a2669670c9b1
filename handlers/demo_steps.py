"""Demo workflow steps for pattern 4: each counts its calls per business key (so a test
can prove a non-idempotent step ran exactly once) and fails on request.

Env: STEP_NAME, COUNTER_TABLE. Input: the workflow state; `failAt: <step>` makes that
step raise, as a flaky external API would.
"""

from __future__ import annotations

import os
from typing import Any

from handlers.errors import Retryable
from handlers.runtime import client, log

STEP_NAME = os.environ.get("STEP_NAME", "step")
COUNTER_TABLE = os.environ.get("COUNTER_TABLE", "")


class StepFailed(Retryable):
    """The injected failure of a flaky step."""


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    key = str(event.get("orderId", "unknown"))
    calls = client("dynamodb").update_item(
        TableName=COUNTER_TABLE,
        Key={"pk": {"S": f"{key}#{STEP_NAME}"}},
        UpdateExpression="ADD calls :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="UPDATED_NEW",
    )["Attributes"]["calls"]["N"]
    log("INFO", "step called", step=STEP_NAME, key=key, calls=int(calls))
    if event.get("failAt") == STEP_NAME:
        raise StepFailed(f"{STEP_NAME} failed for {key} (failAt)")
    earlier = {name: entry.get("output") for name, entry in event.get("results", {}).items()}
    return {
        "step": STEP_NAME,
        "calls": int(calls),
        "saw": sorted(k for k, v in earlier.items() if v),
    }
