"""A demo durable function (a user's own, for the durable-function backend): one step per
execution that counts the executions of its key in the runs table, so a test sees
every key's runs (exactly once: 1) and every execution's name. A key containing
'crash-once' kills the sandbox after its step, on its first invocation only: the runtime's
retry replays the execution from its checkpoint."""

from __future__ import annotations

import os
from typing import Any

import boto3
from aws_durable_execution_sdk_python.context import DurableContext, StepContext, durable_step
from aws_durable_execution_sdk_python.execution import durable_execution

CRASH_MARK = "crash-once"


@durable_step
def count_run(step: StepContext, key: str) -> int:
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
    key = event["key"]
    runs = context.step(count_run(key))
    if CRASH_MARK in key and _first_crash(key):
        os._exit(137)  # as if the sandbox were killed after the step's checkpoint
    return {"key": key, "runs": runs}


def _first_crash(key: str) -> bool:
    ddb = boto3.client("dynamodb")
    try:
        ddb.update_item(
            TableName=os.environ["RUNS_TABLE"],
            Key={"pk": {"S": f"crashed#{key}"}},
            UpdateExpression="SET crashed = :yes",
            ConditionExpression="attribute_not_exists(pk)",
            ExpressionAttributeValues={":yes": {"BOOL": True}},
        )
    except ddb.exceptions.ConditionalCheckFailedException:
        return False
    return True
