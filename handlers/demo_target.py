"""A demo channel target for the scheduler: records each successful fire (time and count
per message id) in FIRES_TABLE; `parameters.failTimes: N` fails the first N attempts."""

from __future__ import annotations

import os
import time
from typing import Any

from handlers.runtime import client, log

FIRES_TABLE = os.environ.get("FIRES_TABLE", "")


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    message_id = event["id"]
    ddb = client("dynamodb")
    attempts = int(
        ddb.update_item(
            TableName=FIRES_TABLE,
            Key={"pk": {"S": f"attempts#{message_id}"}},
            UpdateExpression="ADD attempts :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="UPDATED_NEW",
        )["Attributes"]["attempts"]["N"]
    )
    if attempts <= int(event.get("parameters", {}).get("failTimes", 0)):
        raise RuntimeError(f"injected failure {attempts} for {message_id}")
    now = time.time()
    ddb.update_item(
        TableName=FIRES_TABLE,
        Key={"pk": {"S": f"fired#{message_id}"}},
        UpdateExpression="ADD fires :one SET fired_at = :now, publish_time = :publish",
        ExpressionAttributeValues={
            ":one": {"N": "1"},
            ":now": {"N": f"{now:.3f}"},
            ":publish": {"N": str(event["publishTime"])},
        },
    )
    log(
        "INFO",
        "fired",
        id=message_id,
        lateness_ms=round((now - float(event["publishTime"])) * 1000),
    )
    return {"id": message_id, "firedAt": now}
