"""A demo channel target for the scheduler: records its one effect per message id (time)
in its fires table, and counts repeat invokes (`repeats`) that reached it;
`parameters.failTimes: N` fails the first N attempts; `parameters.runSeconds: S` runs S
seconds after its effect (a slow target). Wrapped in the receiver
(exactly_once.handlers.receiver, its records in the same table): a message the scheduler
sends again after it was applied is answered the first result and never reaches `fire`,
so `repeats` stays 0 (the stacks list its channel in `redeliver`)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from exactly_once.handlers.receiver import receive
from exactly_once.handlers.runtime import client, log
from exactly_once.handlers.settings import Settings


@dataclasses.dataclass(frozen=True)
class TargetSettings(Settings):
    fires_table: str


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    # when the scheduler's send arrived: lateness is measured by the target's clock, before
    # the receiver's write (its DynamoDB call is the target's time, not the scheduler's)
    arrived = time.time()
    config = TargetSettings.current()
    result: dict[str, Any] = receive(
        config.fires_table, event["id"], lambda: fire(config, event, arrived), context
    )
    return result


def fire(config: TargetSettings, event: dict[str, Any], now: float) -> dict[str, Any]:
    message_id = event["id"]
    ddb = client("dynamodb")
    attempts = int(
        ddb.update_item(
            TableName=config.fires_table,
            Key={"pk": {"S": f"attempts#{message_id}"}},
            UpdateExpression="ADD attempts :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
            ReturnValues="UPDATED_NEW",
        )["Attributes"]["attempts"]["N"]
    )
    if attempts <= int(event.get("parameters", {}).get("failTimes", 0)):
        raise RuntimeError(f"injected failure {attempts} for {message_id}")
    try:
        # The effect is keyed by the message id, as the scheduler asks of targets: an
        # invoke retried after it ran (seen under load on LocalStack) changes nothing.
        ddb.update_item(
            TableName=config.fires_table,
            Key={"pk": {"S": f"fired#{message_id}"}},
            UpdateExpression="SET fires = :one, fired_at = :now, publish_time = :publish, "
            "late_on_arrival = :late",
            ConditionExpression="attribute_not_exists(pk)",
            ExpressionAttributeValues={
                ":one": {"N": "1"},
                ":now": {"N": f"{now:.3f}"},
                ":publish": {"N": str(event["publishTime"])},
                # > 0: registered after its publish time had passed (accepted, fired at once)
                ":late": {"N": str(event.get("lateOnArrival", 0))},
            },
        )
    except ddb.exceptions.ConditionalCheckFailedException:
        ddb.update_item(
            TableName=config.fires_table,
            Key={"pk": {"S": f"fired#{message_id}"}},
            UpdateExpression="ADD repeats :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
        log("WARNING", "repeat invoke suppressed", id=message_id)
        return {"id": message_id, "repeat": True}
    log(
        "INFO",
        "fired",
        id=message_id,
        lateness_ms=round((now - float(event["publishTime"])) * 1000),
    )
    time.sleep(float(event.get("parameters", {}).get("runSeconds", 0)))
    return {"id": message_id, "firedAt": now}
