"""Foundation smoke test: the LocalStack pieces every pattern stands on work here."""

from __future__ import annotations

from typing import Any

import pytest

from tooling.clients import client, eventually, executions, new_tag


def test_s3_put_reaches_step_functions_through_eventbridge_and_lambda(
    stack: dict[str, Any],
) -> None:
    # GIVEN the deployed name-dedup starter, WHEN an object is uploaded
    out = stack["nameDedup"]
    tag = new_tag()
    client("s3").put_object(Bucket=out["bucket"], Key=f"smoke/{tag}.txt", Body=b"hello")
    # THEN S3 -> EventBridge -> Lambda (host executor) -> Step Functions ran
    [execution] = eventually(lambda: executions(out["stateMachineArn"], tag))
    assert execution["status"] in {"RUNNING", "SUCCEEDED"}


def test_dynamodb_conditional_put(stack: dict[str, Any]) -> None:
    ddb = client("dynamodb")
    table = f"smoke-{new_tag()}"
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    try:
        item = {"pk": {"S": "once"}}
        ddb.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
            ddb.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(pk)")
    finally:
        ddb.delete_table(TableName=table)
