"""The alternative the starter benchmark measures ours against: Powertools idempotency (a
DynamoDB lock record per event key) in front of an unnamed StartExecution. Deployed by
`benchmarks/on_localstack.py` beside the real name-dedup starter, from the same asset."""

from __future__ import annotations

import json
import os
from typing import Any

import boto3
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)

persistence = DynamoDBPersistenceLayer(table_name=os.environ["LOCK_TABLE"])
# The same key as the name-dedup starter's bucket-key-version strategy.
config = IdempotencyConfig(
    event_key_jmespath='[detail.bucket.name, detail.object.key, detail.object."version-id"]'
)
sfn = boto3.client("stepfunctions")


@idempotent(persistence_store=persistence, config=config)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    response = sfn.start_execution(
        stateMachineArn=os.environ["STATE_MACHINE_ARN"], input=json.dumps(event)
    )
    return {"executionArn": response["executionArn"]}
