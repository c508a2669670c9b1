"""Where a scheduler channel or a workflow step delivers: the kinds of target users use,
each with its Step Functions integration and its IAM, and a clear refusal for anything else.

    kind     ARN                                   integration (optimized)  IAM
    lambda   arn:aws:lambda:...:function:NAME[:Q]  lambda:invoke            lambda:InvokeFunction
    sqs      arn:aws:sqs:REGION:ACCOUNT:NAME       sqs:sendMessage          sqs:SendMessage
    (.fifo)  a FIFO queue: deduplicated by id      sqs:sendMessage          sqs:SendMessage
    sns      arn:aws:sns:REGION:ACCOUNT:NAME       sns:publish              sns:Publish
    (.fifo)  a FIFO topic: deduplicated by id      sns:publish              sns:Publish
    states   arn:aws:states:...:stateMachine:NAME  states:startExecution    states:StartExecution
    events   arn:aws:events:...:event-bus/NAME     events:putEvents         events:PutEvents

Only Lambda answers with a result; the others deliver (a message id, an execution ARN).
Deliveries carry an idempotency key (`dedup`, e.g. a message id) where the service takes
one: a FIFO queue's or topic's MessageDeduplicationId and a state machine's execution name, so a
retried delivery is dropped by the service itself; a standard queue, a topic and a bus
deliver at least once, and their consumers key the effect by the id in the payload.
"""

from __future__ import annotations

from typing import Any

from exactly_once.components.asl import LAMBDA_RETRY
from exactly_once.handlers.targets import FIFO, TargetKind


def _at(field: str, value: str) -> dict[str, str]:
    """`field` set to `value`, or read from the state when `value` is a path ($.x)."""
    return {f"{field}.$": value} if value.startswith("$") else {field: value}


def deliver(
    kind: TargetKind, target: str, payload: str, dedup: str | None = None
) -> dict[str, Any]:
    """A Task state (the caller adds Next/End, Retry, Catch, ResultPath) delivering the
    JSON at path `payload` to `target` (an ARN, or a path to one in the state; for SQS a
    queue URL); `dedup`, a path to an idempotency key. Its result: {"response": ...}."""
    text = f"States.JsonToString({payload})"
    parameters: dict[str, Any]
    if kind == TargetKind.LAMBDA:
        resource = "lambda:invoke"
        parameters = {**_at("FunctionName", target), "Payload.$": payload}
        result = {"response.$": "$.Payload"}
    elif kind in (TargetKind.SQS, TargetKind.SQS_FIFO):
        resource = "sqs:sendMessage"
        parameters = {**_at("QueueUrl", target), "MessageBody.$": text}
        result = {"response.$": "$.MessageId"}
    elif kind in (TargetKind.SNS, TargetKind.SNS_FIFO):
        resource = "sns:publish"
        parameters = {**_at("TopicArn", target), "Message.$": text}
        result = {"response.$": "$.MessageId"}
    elif kind == TargetKind.STATES:
        resource = "states:startExecution"
        parameters = {**_at("StateMachineArn", target), "Input.$": text}
        if dedup:  # the execution name: a second start of the same delivery is refused
            parameters["Name.$"] = dedup
        result = {"response.$": "$.ExecutionArn"}
    else:
        resource = "events:putEvents"
        entry = {
            **_at("EventBusName", target),
            "Source": "exactly-once",
            "DetailType": "delivery",
            "Detail.$": text,
        }
        parameters = {"Entries": [entry]}
        result = {"response.$": "$.Entries[0].EventId"}
    if kind in FIFO:
        # A FIFO queue or topic refuses a message without both (a standard one refuses
        # them); the service itself drops one whose deduplication id it saw in the last
        # 5 minutes. One group per id: deliveries are independent, never held in order.
        if dedup is None:
            raise ValueError(f"a FIFO {kind.removesuffix('-fifo')} target needs a deduplication id")
        parameters |= {"MessageDeduplicationId.$": dedup, "MessageGroupId.$": dedup}
    return {
        "Type": "Task",
        "Resource": f"arn:aws:states:::{resource}",
        "Parameters": parameters,
        "ResultSelector": result,
    }


ACTIONS = {
    TargetKind.LAMBDA: "lambda:InvokeFunction",
    TargetKind.SQS: "sqs:SendMessage",
    TargetKind.SQS_FIFO: "sqs:SendMessage",
    TargetKind.SNS: "sns:Publish",
    TargetKind.SNS_FIFO: "sns:Publish",
    TargetKind.STATES: "states:StartExecution",
    TargetKind.EVENTS: "events:PutEvents",
}


def retries(kind: TargetKind) -> list[dict[str, Any]]:
    """The transient errors worth retrying for a delivery of this kind."""
    return [LAMBDA_RETRY] if kind == TargetKind.LAMBDA else []
