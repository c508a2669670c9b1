"""Send a component's dead-lettered events back through the function that first took them.

Every DLQ of ours holds one of three shapes, all handled:
- a handler's own (`handlers/runtime.dead_letter`): `{"reason", "event", ...}`;
- what Lambda (async invocation) or EventBridge (a target's DLQ) parks: the event itself
  as the body, the error in message attributes (Lambda developer guide, "Dead-letter
  queues"; EventBridge user guide, "Using dead-letter queues");
- a DynamoDB stream batch the scheduler's starter could not take (an event source
  mapping's on-failure destination): where in the stream it was; its records are read
  back from the stream (kept 24 hours) and sent as the batch they were.

Each event is invoked synchronously on the function, with a ClientContext marking it as
redriven, so the handler's own dedup decides: an event whose work succeeded meanwhile is
a duplicate and does nothing again. A message is deleted only once its event is through;
one rejected again goes back to the queue with every reason it has met (the handler
leaves that to this tool), and a crash part-way leaves the message to a later redrive,
which finds the work done.

SQS shows a message only by receiving it: a receive hides it for its visibility timeout
and counts it (`ApproximateReceiveCount`), whatever the receiver then does (SQS API
reference, ChangeMessageVisibility: a message is "in flight after it is received from a
queue by a consumer, but not yet deleted"; GetQueueAttributes: until deleted or "the end
of their visibility window"). So `check` (the dry run's read) receives nothing: it asks
the queue's approximate counts (GetQueueAttributes: they "may not achieve consistency
until at least 1 minute after the producers stop sending messages") and whether the
function is one whose DLQ this is. `list` receives each message to show it and its
reasons, hidden `LIST_VISIBILITY_SECONDS` at most, and puts each back: its receive count
rises.

Receiving ends on an empty receive (long polling: every server of the queue asked), or
says why not (the report's `complete`, `incomplete`): a listing stops receiving
`LIST_MARGIN_SECONDS` before what it hid first shows again (a later receive would return
those instead of the rest); a receive that returns only messages this run already took,
while the queue counts more visible than it left visible, may have hidden others behind
them.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import datetime
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from exactly_once.handlers.errors import aws_code
from exactly_once.handlers.runtime import REDRIVE

logger = logging.getLogger(__name__)

# Long enough for the function to answer before the message shows again (a function's
# timeout is at most 900 s); a crash leaves the message hidden for this long only.
VISIBILITY_SECONDS = 960
# Each event is sent once, and waited for as long as the function may run: botocore's
# defaults (a 60 s read timeout, then retries) sent a slow function's event again while
# the first invocation still ran. TCP keepalive, for a NAT gateway or load balancer that
# drops a TCP flow idle 350 s (AWS Knowledge Center, "lambda-vpc-timeout"): botocore only
# turns SO_KEEPALIVE on, so the first probe comes after the OS's idle time (Linux: 7,200 s
# unless net.ipv4.tcp_keepalive_time is lower): behind such a device, run this where it is
# under 350 s (docs/operations.md).
INVOKE = Config(
    # past Lambda's longest timeout (900 s) plus a cold start's Init (10 s, then retried
    # within the invocation's own timeout), within VISIBILITY_SECONDS
    read_timeout=940,
    connect_timeout=10,
    tcp_keepalive=True,
    retries={"total_max_attempts": 1, "mode": "standard"},
)


EMPTY_PAGES = 10  # empty GetRecords pages in a row taken for the shard's tip
# How long `list` hides what it received: long enough to list a queue without seeing a
# message twice, short enough that an interrupted listing hides nothing for long (the
# DLQ's alarm reads the visible count).
LIST_VISIBILITY_SECONDS = 60
# A listing receives no more this long before the first message it hid shows again: a
# receive (long polling 1 s, then the answer) fits well within it, so no message it listed
# shows again while it still receives, standing in for one it has not listed yet; and
# putting them back finds their receipt handles still valid.
LIST_MARGIN_SECONDS = 10
# ChangeMessageVisibility's answers for a receipt handle whose visibility window ended
# (API reference: a change after the timeout "might result in an error"; its errors
# MessageNotInflight, ReceiptHandleIsInvalid; SQS answers an expired handle
# InvalidParameterValue, "Reason: The receipt handle has expired", as seen in
# aws/aws-sdk-java#1628). Such a message is visible already: putting it back has nothing
# left to do (our VisibilityTimeout, 0, is never the invalid parameter). A query-style
# code (AWS.SimpleQueueService.X) is compared by its last part.
EXPIRED = frozenset({"MessageNotInflight", "ReceiptHandleIsInvalid", "InvalidParameterValue"})

# The functions whose DLQ holds events to send back (each component's `functionName`, a
# scheduler's `starterFunction`): by handler, the component that deploys it. Each has
# that DLQ as its DeadLetterConfig (components/functions.py).
REDRIVABLE = {
    "exactly_once.handlers.starter.handler": "NameDedupStarter",
    "exactly_once.handlers.etl.handler": "IdempotentEtl",
    "exactly_once.handlers.scheduler.stream_handler": "Scheduler",
}
COUNTS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)


class WrongTarget(ValueError):
    """The function is not one whose events a DLQ of ours holds, or the queue is not its
    DLQ: nothing is received or sent."""


@dataclasses.dataclass
class Letter:
    """One dead-lettered message: what to send, and why it was parked."""

    message_id: str
    receipt: str
    payload: Any  # what the function is invoked with (None: nothing to send, it stays)
    reasons: list[str]
    shape: str  # "handler", "lambda-or-eventbridge" or "stream-batch"
    fields: dict[str, Any] = dataclasses.field(default_factory=dict)  # the handler's others

    def summary(self) -> dict[str, Any]:
        return {"messageId": self.message_id, "shape": self.shape, "reasons": self.reasons}


class DeadLetters:
    """A DLQ and the function its events go back through."""

    def __init__(self, queue_url: str, function: str, clients: Any) -> None:
        self.queue_url, self.function = queue_url, function
        self.sqs = clients("sqs")
        self.lam = clients("lambda", INVOKE)
        self.clients = clients
        self.seen: set[str] = set()  # message ids taken, or sent back, by this run
        # Of those, the ones this run left visible (copies sent back, ones put back at
        # once): what the queue's visible count may hold of this run's own.
        self.left_visible: set[str] = set()
        # Why the last receiving ended before the queue's end (None: an empty receive)
        self.incomplete: str | None = None
        self.clock: Callable[[], float] = time.monotonic  # (tests move it on)

    def check(self) -> dict[str, Any]:
        """Read only (nothing received): the function is one of ours that takes redriven
        events, and this queue is its DLQ (WrongTarget otherwise); the queue's approximate
        counts."""
        config = self.lam.get_function_configuration(FunctionName=self.function)
        handler = str(config.get("Handler", ""))
        if handler not in REDRIVABLE:
            raise WrongTarget(
                f"function {self.function!r} runs {handler or 'no handler of ours'}, not a "
                "starter, an ETL transform or a scheduler's stream starter: its events are "
                "not what a DLQ of ours holds"
            )
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["QueueArn", *COUNTS]
        )["Attributes"]
        dead_letters = (config.get("DeadLetterConfig") or {}).get("TargetArn")
        if dead_letters != attributes["QueueArn"]:
            raise WrongTarget(
                f"queue {attributes['QueueArn']} is not the DLQ of {self.function} "
                f"(a {REDRIVABLE[handler]}'s function; its DLQ: {dead_letters or 'none'})"
            )
        return {name: int(attributes.get(name, 0)) for name in COUNTS}

    def letters(
        self, visibility: int = VISIBILITY_SECONDS, within: float | None = None
    ) -> Iterator[Letter]:
        """Every message once, hidden `visibility` seconds while it is handled. One this
        run sent back (failed again) is shown again at once and not taken twice. `within`:
        no receive once that many seconds have passed since the first began (a listing's
        messages are hidden for a while only). Afterwards `incomplete` says why it ended
        before the queue's end, or is None (an empty receive)."""
        self.incomplete = None
        started = self.clock()
        while True:
            elapsed = self.clock() - started
            if within is not None and elapsed >= within:
                self.incomplete = (
                    f"stopped receiving after {elapsed:.0f} s, before the first messages it "
                    f"hid show again ({visibility} s after they were received); the queue "
                    f"counts about {self._visible()} more visible, not received"
                )
                return
            answer = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=visibility,
                MessageAttributeNames=["All"],
                WaitTimeSeconds=1,  # long polling: every server of the queue is asked
            )
            returned = answer.get("Messages", [])
            fresh = []
            for message in returned:
                if message["MessageId"] in self.seen:
                    self._release(message["ReceiptHandle"])
                    self.left_visible.add(message["MessageId"])
                else:
                    fresh.append(message)
            if not fresh:
                if returned:  # only messages taken before: others may wait behind them
                    self.incomplete = self._behind(len(returned))
                return
            for message in fresh:
                self.seen.add(message["MessageId"])
                yield self._letter(message)

    def _visible(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes.get("ApproximateNumberOfMessages", 0))

    def _behind(self, returned: int) -> str | None:
        """After a receive of only messages this run took: why others may remain (the
        queue counts more visible than this run left visible), or None. A receive returns
        up to ten of the visible messages, so ten of ours may stand for the rest."""
        visible = self._visible()
        if visible <= len(self.left_visible):
            return None
        return (
            f"a receive returned only messages this run had taken ({returned}) while the "
            f"queue counts about {visible} visible, {len(self.left_visible)} of them left "
            "visible by this run: others may not have been received; run it again"
        )

    def _release(self, receipt: str, expired_ok: bool = False) -> bool:
        """The message visible again at once. `expired_ok`: a handle whose window already
        ended (EXPIRED) is taken for done, False (that message is visible already)."""
        try:
            self.sqs.change_message_visibility(
                QueueUrl=self.queue_url, ReceiptHandle=receipt, VisibilityTimeout=0
            )
        except ClientError as exc:
            if not expired_ok or aws_code(exc).rsplit(".", 1)[-1] not in EXPIRED:
                raise
            return False
        return True

    def _letter(self, message: dict[str, Any]) -> Letter:
        body_text = message.get("Body", "")
        try:
            body = json.loads(body_text)
        except json.JSONDecodeError:
            body = body_text
        attributes = {
            name: value.get("StringValue", "")
            for name, value in (message.get("MessageAttributes") or {}).items()
        }
        common = {"message_id": message["MessageId"], "receipt": message["ReceiptHandle"]}
        if isinstance(body, dict) and {"reason", "event"} <= body.keys():
            reasons = [*body.get("previous_reasons", []), str(body["reason"])]
            fields = {
                k: v for k, v in body.items() if k not in ("reason", "event", "previous_reasons")
            }
            return Letter(
                payload=body["event"], reasons=reasons, shape="handler", fields=fields, **common
            )
        if isinstance(body, dict) and "DDBStreamBatchInfo" in body:
            info = body["DDBStreamBatchInfo"]
            reason = str(body.get("responseContext", {}).get("functionError") or "")
            condition = str(body.get("requestContext", {}).get("condition") or "")
            reasons = [f"{condition} {reason}".strip() or "stream batch failed"]
            try:
                payload: Any = {"Records": self._stream_records(info)}
            except ClientError as exc:  # trimmed (24 h) or the stream is gone: kept, listed
                payload = None
                reasons.append(f"its records cannot be read back: {exc}")
            return Letter(payload=payload, reasons=reasons, shape="stream-batch", **common)
        error = " ".join(
            attributes[name]
            for name in ("ErrorCode", "ErrorMessage", "ERROR_CODE", "ERROR_MESSAGE")
            if attributes.get(name)
        )
        return Letter(
            payload=body,
            reasons=[error or "no reason recorded"],
            shape="lambda-or-eventbridge",
            **common,
        )

    def _stream_records(self, info: dict[str, Any]) -> list[dict[str, Any]]:
        """The batch's records, from its first to its last sequence number, in the form
        an event source mapping delivers them."""
        streams = self.clients("dynamodbstreams")
        iterator = streams.get_shard_iterator(
            StreamArn=info["streamArn"],
            ShardId=info["shardId"],
            ShardIteratorType="AT_SEQUENCE_NUMBER",
            SequenceNumber=info["startSequenceNumber"],
        ).get("ShardIterator")
        last = int(info["endSequenceNumber"])
        records: list[dict[str, Any]] = []
        empty = 0
        # An empty page is not the end: "it might take multiple calls to get to a portion of
        # the shard that contains records" (DynamoDB Streams API, GetRecords). Read on to the
        # batch's last record; at an open shard's tip every page is empty: stop after a few.
        while iterator and empty < EMPTY_PAGES:
            page = streams.get_records(ShardIterator=iterator, Limit=100)
            for record in page.get("Records", []):
                if int(record["dynamodb"]["SequenceNumber"]) > last:
                    return records
                records.append(_as_delivered(record, info["streamArn"]))
                if int(record["dynamodb"]["SequenceNumber"]) == last:
                    return records
            empty = 0 if page.get("Records") else empty + 1
            iterator = page.get("NextShardIterator")
        return records

    def redrive(self) -> dict[str, Any]:
        """Send every message's event back; what happened to each, and the counts."""
        return self._each(listing=False)

    def list_letters(self) -> dict[str, Any]:
        """Every message with its reasons, sent nowhere: each received (its receive count
        rises), hidden LIST_VISIBILITY_SECONDS at most, and visible again once all are
        listed. Receiving stops LIST_MARGIN_SECONDS before the first shows again: the
        report says whether it listed the whole queue (`complete`)."""
        return self._each(listing=True)

    def _each(self, listing: bool) -> dict[str, Any]:
        self.seen, self.left_visible = set(), set()  # (a run of its own, each call)
        done: list[dict[str, Any]] = []
        held: list[str] = []  # messages listed, shown again once all are
        if listing:
            letters = self.letters(
                LIST_VISIBILITY_SECONDS, within=LIST_VISIBILITY_SECONDS - LIST_MARGIN_SECONDS
            )
        else:
            letters = self.letters(VISIBILITY_SECONDS)
        for letter in letters:
            if listing or letter.payload is None:
                done.append({**letter.summary(), "event": letter.payload, "result": "listed"})
                held.append(letter.receipt)
                continue
            done.append(self._send(letter))
        # A window that ended first (a listing slowed down, a redrive longer than 960 s)
        # left its message visible already: nothing to put back, and the report of what
        # was done is kept (an error here would lose it, exit 1).
        late = sum(not self._release(receipt, expired_ok=True) for receipt in held)
        if late:
            logger.warning(
                "%d of %d messages listed were visible again before they were put back "
                "(their visibility window had ended): nothing lost",
                late,
                len(held),
            )
        counts = collections.Counter(entry["result"] for entry in done)
        ending = {"incomplete": self.incomplete} if self.incomplete else {}
        return {
            "queue": self.queue_url,
            "function": self.function,
            "complete": self.incomplete is None,
            **ending,
            "counts": dict(counts),
            "messages": done,
        }

    def _send(self, letter: Letter) -> dict[str, Any]:
        # Hidden for as long as this invoke may take, from now: a batch of ten is received
        # at once and sent one after another, so the clock of the receive has run on.
        self.sqs.change_message_visibility(
            QueueUrl=self.queue_url,
            ReceiptHandle=letter.receipt,
            VisibilityTimeout=VISIBILITY_SECONDS,
        )
        context = base64.b64encode(json.dumps({"custom": {REDRIVE: True}}).encode()).decode()
        answer = self.lam.invoke(
            FunctionName=self.function,
            InvocationType="RequestResponse",
            Payload=json.dumps(letter.payload).encode(),
            ClientContext=context,
        )
        text = answer["Payload"].read().decode() or "null"
        failure = _failure(answer.get("FunctionError"), text)
        if failure is None:
            self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=letter.receipt)
            answer_body = json.loads(text)
            return {
                **letter.summary(),
                "event": letter.payload,
                "result": "redriven",
                "answer": answer_body,
            }
        # Back in the queue with every reason, then the old message goes: a crash between
        # leaves two copies of one event, and its handler's dedup makes the second nothing.
        reasons = [*letter.reasons, failure]
        event = letter.payload
        sent = self.sqs.send_message(
            QueueUrl=self.queue_url,
            MessageBody=json.dumps(
                {
                    **letter.fields,
                    "reason": failure,
                    "event": event,
                    "previous_reasons": letter.reasons,
                }
            ),
        )
        self.seen.add(sent["MessageId"])
        self.left_visible.add(sent["MessageId"])
        self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=letter.receipt)
        return {**letter.summary(), "event": event, "reasons": reasons, "result": "failed-again"}


def _as_delivered(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A GetRecords record as an event source mapping delivers it: the stream's ARN as
    eventSourceARN, the creation time in epoch seconds (boto3 parses it to a datetime)."""
    change = dict(record["dynamodb"])
    created = change.get("ApproximateCreationDateTime")
    if isinstance(created, datetime.datetime):
        change["ApproximateCreationDateTime"] = int(created.timestamp())
    return {**record, "dynamodb": change, "eventSourceARN": stream_arn}


def _failure(function_error: str | None, text: str) -> str | None:
    """Why the function did not take the event, or None: its error, or the reasons of
    what it rejected (`{"status": "REJECTED"}`, or such entries in `results`)."""
    try:
        answer = json.loads(text)
    except json.JSONDecodeError:
        answer = text
    if function_error:
        if isinstance(answer, dict):
            return f"{answer.get('errorType', function_error)}: {answer.get('errorMessage', '')}"
        return f"{function_error}: {text[:500]}"
    if not isinstance(answer, dict):
        return None
    found = answer.get("results")
    results: list[Any] = found if isinstance(found, list) else [answer]
    rejected = [
        str(result.get("reason", "rejected"))
        for result in results
        if isinstance(result, dict) and result.get("status") == "REJECTED"
    ]
    return "; ".join(rejected) or None
