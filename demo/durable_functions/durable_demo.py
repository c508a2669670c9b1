"""A demo durable function (a user's own, for the durable-function backend): one step per
execution that counts the executions of its key in the runs table, so a test sees
every key's runs (exactly once: 1) and every execution's name."""

from __future__ import annotations

import os
from typing import Any

from aws_durable_execution_sdk_python.context import DurableContext, StepContext, durable_step
from aws_durable_execution_sdk_python.execution import durable_execution


@durable_step
def count_run(step: StepContext, key: str) -> int:
    import boto3

    answer = boto3.client("dynamodb").update_item(
        TableName=os.environ["RUNS_TABLE"],
        Key={"pk": {"S": f"runs#{key}"}},
        UpdateExpression="ADD runs :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
        ReturnValues="UPDATED_NEW",
    )
    return int(answer["Attributes"]["runs"]["N"])


@durable_execution
def handler(event: dict[str, Any], context: DurableContext) -> dict[str, Any]:
    runs = context.step(count_run(event["key"]))
    return {"key": event["key"], "runs": runs}
