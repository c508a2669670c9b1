"""Amazon States Language building blocks the generated state machines share (JSONPath only:
LocalStack's host mode runs neither Variables nor JSONata)."""

from __future__ import annotations

from typing import Any

# The transient errors of a Lambda invoke task (AWS's recommended retry set): the
# function never ran, or its result was lost, so trying again is safe.
LAMBDA_RETRY: dict[str, Any] = {
    "ErrorEquals": [
        "Lambda.ServiceException",
        "Lambda.AWSLambdaException",
        "Lambda.SdkClientException",
        "Lambda.TooManyRequestsException",
    ],
    "IntervalSeconds": 1,
    "MaxAttempts": 3,
    "BackoffRate": 2,
}
# DynamoDB throttles and 5xx; a failed condition is an answer, not an error to retry.
DYNAMODB_RETRY: dict[str, Any] = {
    "ErrorEquals": [
        "DynamoDB.ProvisionedThroughputExceededException",
        "DynamoDB.ThrottlingException",
        "DynamoDB.InternalServerErrorException",
        "DynamoDB.RequestLimitExceeded",
    ],
    "IntervalSeconds": 1,
    "MaxAttempts": 5,
    "BackoffRate": 2,
}
CONDITION_FAILED = "DynamoDB.ConditionalCheckFailedException"


def dynamodb_update(
    table_name: str,
    key: dict[str, Any],
    update: str,
    values: dict[str, Any],
    condition: str | None = None,
    names: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Task state running UpdateItem (the caller adds Next/End, Catch, or a ResultPath
    other than discarding the result), with the DynamoDB retries."""
    parameters: dict[str, Any] = {
        "TableName": table_name,
        "Key": key,
        "UpdateExpression": update,
        "ExpressionAttributeValues": values,
    }
    if condition:
        parameters["ConditionExpression"] = condition
    if names:
        parameters["ExpressionAttributeNames"] = names
    return {
        "Type": "Task",
        "Resource": "arn:aws:states:::dynamodb:updateItem",
        "Parameters": parameters,
        "ResultPath": None,
        "Retry": [DYNAMODB_RETRY],
    }
