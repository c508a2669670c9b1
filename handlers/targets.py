"""The kinds of target a scheduler channel or a workflow step can name, told from the ARN
(pure Python: the scheduler's handlers and the components both read it). How each kind is
delivered to: components/targets.py."""

from __future__ import annotations

import enum


class TargetKind(enum.StrEnum):
    LAMBDA = "lambda"
    SQS = "sqs"
    SQS_FIFO = "sqs-fifo"  # a FIFO queue: every message needs a group and a deduplication id
    SNS = "sns"
    SNS_FIFO = "sns-fifo"  # a FIFO topic: every publish needs a group and a deduplication id
    STATES = "states"
    EVENTS = "events"


SUPPORTED = (
    "a Lambda function, an SQS queue, an SNS topic, a Step Functions state machine or an "
    "EventBridge event bus"
)


def kind_of(arn: str, what: str = "target") -> TargetKind:
    """The kind of target `arn` names; ValueError (naming what is supported) otherwise."""
    parts = arn.split(":")
    if len(parts) >= 6 and parts[0] == "arn":
        service, resource = parts[2], ":".join(parts[5:])
        if service == "lambda" and resource.startswith("function:"):
            return TargetKind.LAMBDA
        if service == "sqs" and resource and "/" not in resource:
            return TargetKind.SQS_FIFO if resource.endswith(".fifo") else TargetKind.SQS
        if service == "sns" and resource:
            return TargetKind.SNS_FIFO if resource.endswith(".fifo") else TargetKind.SNS
        if service == "states" and resource.startswith("stateMachine:"):
            return TargetKind.STATES
        if service == "events" and resource.startswith("event-bus/"):
            return TargetKind.EVENTS
    raise ValueError(f"{what} {arn!r} is not {SUPPORTED} ARN: that is what it can deliver to")


def machine_of(arn: str) -> str:
    """A state machine's ARN, from its own, a version's or an alias's (`...:NAME[:QUALIFIER]`)."""
    return ":".join(arn.split(":")[:7])


def queue_url(arn: str) -> str:
    """The URL SQS's API takes for a queue ARN (the documented https://sqs.REGION... form)."""
    _, partition, _, region, account, name = arn.split(":", 5)
    domain = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
    return f"https://sqs.{region}.{domain}/{account}/{name}"


FIFO = frozenset({TargetKind.SQS_FIFO, TargetKind.SNS_FIFO})
"""The kinds that refuse a delivery without a message group and a deduplication id."""


def address(arn: str) -> str:
    """What the delivering API takes: an SQS queue's URL, every other kind's ARN."""
    return queue_url(arn) if kind_of(arn) in (TargetKind.SQS, TargetKind.SQS_FIFO) else arn


# -- the delivery contract: what the scheduler does after a send it cannot call delivered ---
class Outcome(enum.StrEnum):
    """What a send's answer says of its effect."""

    DELIVERED = "delivered"
    REFUSED = "refused"  # never ran: a throttle, or a 4xx before anything was done
    FAILED = "failed"  # ran and answered an error (a Lambda function's own)
    UNKNOWN = "unknown"  # may have taken effect: a timeout, a lost answer, a 5xx, a crash


class Resend(enum.StrEnum):
    """When a send whose outcome is FAILED or UNKNOWN may be sent again."""

    ALWAYS = "always"  # the target drops a redelivery by its id, or at least once is its contract
    WINDOW = "window"  # a FIFO queue or topic: within its deduplication interval only
    NEVER = "never"  # a Lambda function that does not drop redeliveries: never a blind resend


# SQS and SNS FIFO drop a repeated MessageDeduplicationId only within 5 minutes of the
# first (SQS Developer Guide, "Exactly-once processing in Amazon SQS"; SNS: "Message
# deduplication for FIFO topics"). Measured from before the first send, less the clocks'
# skew and a send's time in flight: a resend inside it is dropped by the service.
FIFO_WINDOW_SECONDS = 300
# The errors a receiver (handlers/receiver.py) answers when another run of the same message
# is still applying it, or ended without saying whether it did: the outcome is not known.
IN_PROGRESS_ERROR = "MessageInProgress"
OUTCOME_UNKNOWN_ERROR = "MessageOutcomeUnknown"
UNKNOWN_ERRORS = frozenset({IN_PROGRESS_ERROR, OUTCOME_UNKNOWN_ERROR})
FIFO_MARGIN_SECONDS = 20


def resend_policy(kind: TargetKind, redeliver: bool = False) -> Resend:
    """A channel's resend rule: `redeliver` says its target drops a redelivery by the
    message id (exactly_once.receiver does) or accepts at least once."""
    if kind == TargetKind.LAMBDA:
        return Resend.ALWAYS if redeliver else Resend.NEVER
    if kind in FIFO:
        return Resend.ALWAYS if redeliver else Resend.WINDOW
    # A STANDARD state machine's execution name is taken for 90 days (a second start
    # returns the first or fails ExecutionAlreadyExists); a standard queue, topic or bus
    # delivers at least once anyway, and its consumers key the effect by the id.
    return Resend.ALWAYS
