"""`ops redrive-dlq` (ops/dead_letters.py) against moto's SQS and a function of our own: each
shape of dead letter is sent back once, a rejected one returns with every reason, a dry
run moves nothing, a second redrive finds nothing."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from exactly_once.handlers.runtime import REDRIVE
from exactly_once.ops.dead_letters import DeadLetters


class Function:
    """A Lambda client whose one function is `handler`; it records each invoke."""

    def __init__(self, handler: Callable[[Any], Any]) -> None:
        self.handler, self.calls = handler, []  # type: list[Any]

    def invoke(self, **request: Any) -> dict[str, Any]:
        context = json.loads(base64.b64decode(request["ClientContext"]))
        assert request["InvocationType"] == "RequestResponse"
        assert context["custom"][REDRIVE] is True  # the handler leaves a rejection to us
        event = json.loads(request["Payload"])
        self.calls.append(event)
        try:
            answer, error = self.handler(event), None
        except RuntimeError as exc:
            answer, error = {"errorType": "RuntimeError", "errorMessage": str(exc)}, "Unhandled"
        reply: dict[str, Any] = {"Payload": io.BytesIO(json.dumps(answer).encode())}
        if error:
            reply["FunctionError"] = error
        return reply


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def queue(sqs: Any) -> str:
    return str(sqs.create_queue(QueueName="orders-dlq")["QueueUrl"])


def dead_letters(sqs: Any, url: str, function: Function) -> DeadLetters:
    def clients(service: str, config: Any = None) -> Any:
        return {"sqs": sqs, "lambda": function}[service]

    return DeadLetters(url, "orders-starter", clients)


def bodies(sqs: Any, url: str) -> list[dict[str, Any]]:
    found = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return [json.loads(m["Body"]) for m in found.get("Messages", [])]


def starter(done: set[str]) -> Callable[[Any], Any]:
    """A name-dedup starter in small: a key starts once, then is a duplicate; 'bad' keys
    are rejected."""

    def handle(event: Any) -> Any:
        key = event["detail"]["key"]
        if key.startswith("bad"):
            return {"status": "REJECTED", "reason": f"no usable key in {key}"}
        if key.startswith("boom"):
            raise RuntimeError("the target is gone")
        status = "DUPLICATE" if key in done else "STARTED"
        done.add(key)
        return {"status": status}

    return handle


def test_each_shape_is_sent_back_once_and_a_second_redrive_does_nothing(sqs: Any) -> None:
    url = queue(sqs)
    # GIVEN a handler's own dead letter, and one Lambda's async DLQ parked (the event as
    # the body, the error in attributes), whose work meanwhile succeeded
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps(
            {"reason": "throttled for good", "event": {"detail": {"key": "a"}}, "event_id": "e1"}
        ),
    )
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps({"detail": {"key": "b"}}),
        MessageAttributes={"ErrorMessage": {"DataType": "String", "StringValue": "timeout"}},
    )
    done = {"b"}
    function = Function(starter(done))
    # WHEN the DLQ is redriven
    report = dead_letters(sqs, url, function).redrive()
    # THEN a starts, b is a duplicate, the queue is empty
    answers = {m["event"]["detail"]["key"]: m for m in report["messages"]}
    assert answers["a"]["answer"] == {"status": "STARTED"}
    assert answers["a"]["reasons"] == ["throttled for good"]
    assert answers["b"]["answer"] == {"status": "DUPLICATE"}
    assert answers["b"]["reasons"] == ["timeout"] and answers["b"]["shape"] != "handler"
    assert report["counts"] == {"redriven": 2} and report["complete"] is True
    assert bodies(sqs, url) == []
    # AND a second redrive sends nothing
    again = dead_letters(sqs, url, function).redrive()
    assert again["counts"] == {} and len(function.calls) == 2


def test_one_that_fails_again_returns_once_with_every_reason(sqs: Any) -> None:
    url = queue(sqs)
    for key, reason in (("bad-1", "first reason"), ("boom-2", "first outage")):
        sqs.send_message(
            QueueUrl=url,
            MessageBody=json.dumps(
                {"reason": reason, "event": {"detail": {"key": key}}, "event_id": key}
            ),
        )
    function = Function(starter(set()))
    report = dead_letters(sqs, url, function).redrive()
    # each was tried once (its copy sent back is not taken again in the same run)
    assert sorted(e["detail"]["key"] for e in function.calls) == ["bad-1", "boom-2"]
    assert report["counts"] == {"failed-again": 2}
    back = {b["event"]["detail"]["key"]: b for b in bodies(sqs, url)}
    assert back["bad-1"]["previous_reasons"] == ["first reason"]
    assert back["bad-1"]["reason"] == "no usable key in bad-1"
    assert back["bad-1"]["event_id"] == "bad-1"  # the handler's fields kept
    assert back["boom-2"]["reason"] == "RuntimeError: the target is gone"
    # AND a later redrive carries both reasons on
    later = dead_letters(sqs, url, function).redrive()
    reasons = {m["event"]["detail"]["key"]: m["reasons"] for m in later["messages"]}
    assert reasons["bad-1"] == ["first reason", "no usable key in bad-1", "no usable key in bad-1"]


def test_a_listing_shows_each_reason_and_sends_nothing(sqs: Any) -> None:
    url = queue(sqs)
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps({"reason": "why", "event": {"detail": {"key": "a"}}}),
    )
    function = Function(starter(set()))
    report = dead_letters(sqs, url, function).list_letters()
    assert [(m["reasons"], m["result"]) for m in report["messages"]] == [(["why"], "listed")]
    assert function.calls == []
    assert len(bodies(sqs, url)) == 1  # still there, visible again (received once: listed)


def test_a_stream_batch_is_read_back_from_the_stream_and_sent_as_the_batch_it_was(
    sqs: Any,
) -> None:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    table = ddb.create_table(
        TableName="messages",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]
    for n in range(3):
        ddb.put_item(TableName="messages", Item={"pk": {"S": f"m{n}"}, "status": {"S": "STANDBY"}})
    arn = table["LatestStreamArn"]
    [shard] = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    # GIVEN the on-failure record of a batch of the first two (what Lambda sends the DLQ)
    url = queue(sqs)
    sqs.send_message(
        QueueUrl=url,
        MessageBody=json.dumps(
            {
                "requestContext": {"condition": "RetryAttemptsExhausted"},
                "responseContext": {"functionError": "Unhandled"},
                "DDBStreamBatchInfo": {
                    "shardId": shard["ShardId"],
                    "startSequenceNumber": records[0]["dynamodb"]["SequenceNumber"],
                    "endSequenceNumber": records[1]["dynamodb"]["SequenceNumber"],
                    "streamArn": arn,
                    "batchSize": 2,
                },
            }
        ),
    )
    function = Function(lambda event: {"outcomes": ["STARTED"] * len(event["Records"])})

    class Paged:
        """The stream as GetRecords may answer it: empty pages before the records ("it
        might take multiple calls to get to a portion of the shard that contains records")."""

        def __init__(self, empty: int) -> None:
            self.empty = empty

        def __getattr__(self, name: str) -> Any:
            return getattr(streams, name)

        def get_records(self, ShardIterator: str, **kwargs: Any) -> dict[str, Any]:
            if self.empty:
                self.empty -= 1
                return {"Records": [], "NextShardIterator": ShardIterator}
            return dict(streams.get_records(ShardIterator=ShardIterator, **kwargs))

    def clients(service: str, config: Any = None) -> Any:
        return {"sqs": sqs, "lambda": function, "dynamodbstreams": Paged(2)}[service]

    report = DeadLetters(url, "scheduler-starter", clients).redrive()
    # THEN the starter got exactly those two records, in the form a mapping delivers them
    [sent] = function.calls
    assert [r["dynamodb"]["NewImage"]["pk"]["S"] for r in sent["Records"]] == ["m0", "m1"]
    assert all(r["eventSourceARN"] == arn for r in sent["Records"])
    assert report["counts"] == {"redriven": 1}
    assert report["messages"][0]["reasons"] == ["RetryAttemptsExhausted Unhandled"]
    assert bodies(sqs, url) == []


def test_an_event_goes_to_the_function_once_and_is_waited_for_as_long_as_it_may_run() -> None:
    """botocore's defaults (a 60 s read timeout, then retries) sent a slow function's event
    again while the first invocation ran on: the redrive's Lambda client sends once and
    waits past Lambda's longest timeout (900 s)."""
    import http.server
    import threading

    from exactly_once.ops.dead_letters import INVOKE, VISIBILITY_SECONDS
    from exactly_once.ops.session import clients

    # GIVEN a Lambda endpoint that fails every invoke with a retryable 5xx
    sent: list[str] = []

    class Failing(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            sent.append(self.path)
            body = b'{"Type": "Service", "message": "busy"}'
            self.send_response(500)
            self.send_header("x-amzn-ErrorType", "ServiceException")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        built: dict[str, Any] = {}
        real = clients(f"http://127.0.0.1:{server.server_port}", "us-east-1")

        def recording(service: str, config: Any = None) -> Any:
            built[service] = config
            return real(service, config)

        letters = DeadLetters("https://sqs.us-east-1.amazonaws.com/1/q", "f", recording)
        # WHEN the redrive's client invokes
        with pytest.raises(Exception, match="ServiceException"):
            letters.lam.invoke(FunctionName="f", Payload=b"{}")
    finally:
        server.shutdown()
    # THEN the event was sent once, by a client that waits past any function's timeout
    assert sent == ["/2015-03-31/functions/f/invocations"]
    assert built["lambda"] is INVOKE
    config = letters.lam.meta.config
    assert 900 < config.read_timeout < VISIBILITY_SECONDS
    assert config.retries["total_max_attempts"] == 1 and config.tcp_keepalive is True


class Queue:
    """moto's SQS, with what a real queue may do that moto does not: time passing during
    a receive, a receive that returns messages already taken, a window that ended."""

    def __init__(self, sqs: Any) -> None:
        self.sqs, self.now = sqs, 0.0
        self.receive_takes = 0.0  # seconds each receive moves the clock on
        self.repeat_first = False  # the second receive returns the first one's messages
        self.expired: str | None = None  # every ChangeMessageVisibility answers this code
        self.answers: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sqs, name)

    def receive_message(self, **request: Any) -> dict[str, Any]:
        self.now += self.receive_takes
        if self.repeat_first and len(self.answers) == 1:
            self.answers.append(self.answers[0])
            return self.answers[0]
        answer = dict(self.sqs.receive_message(**request))
        self.answers.append(answer)
        return answer

    def change_message_visibility(self, **request: Any) -> Any:
        if self.expired:
            error = {"Error": {"Code": self.expired, "Message": "The receipt handle has expired"}}
            raise ClientError(error, "ChangeMessageVisibility")  # type: ignore[arg-type]
        return self.sqs.change_message_visibility(**request)


def listing(sqs: Any, messages: int) -> tuple[Queue, DeadLetters]:
    url = queue(sqs)
    for n in range(messages):
        body = {"reason": f"why {n}", "event": {"detail": {"key": f"k{n}"}}}
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    wrapped = Queue(sqs)
    letters = dead_letters(wrapped, url, Function(starter(set())))
    letters.clock = lambda: wrapped.now
    return wrapped, letters


def visible(sqs: Any) -> int:
    url = sqs.get_queue_url(QueueName="orders-dlq")["QueueUrl"]
    found = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(found["Attributes"]["ApproximateNumberOfMessages"])


def test_a_listing_stops_before_what_it_hid_shows_again_and_says_it_is_incomplete(
    sqs: Any,
) -> None:
    from exactly_once.ops.dead_letters import LIST_MARGIN_SECONDS, LIST_VISIBILITY_SECONDS

    # GIVEN 15 dead letters, and a first receive (of ten) that took 55 s: the ten it hid
    # show again 60 s after it, so another receive could return them in place of the rest
    wrapped, letters = listing(sqs, 15)
    wrapped.receive_takes = 55.0
    assert LIST_VISIBILITY_SECONDS - LIST_MARGIN_SECONDS < 55
    # WHEN they are listed
    report = letters.list_letters()
    # THEN it stopped receiving, listed the ten, and says so, with the count still waiting
    assert len(report["messages"]) == 10 and len(wrapped.answers) == 1
    assert report["complete"] is False
    assert report["incomplete"].startswith("stopped receiving after 55 s")
    assert "the queue counts about 5 more visible" in report["incomplete"]
    assert visible(sqs) == 15  # (the ten put back)
    # AND a quick listing takes the whole queue
    wrapped.receive_takes = 1.0
    again = letters.list_letters()
    assert (again["complete"], len(again["messages"])) == (True, 15) and "incomplete" not in again


@pytest.mark.parametrize(("messages", "complete"), [(12, False), (3, True)])
def test_a_receive_of_only_messages_taken_is_the_end_only_if_the_queue_counts_no_more(
    sqs: Any, messages: int, complete: bool
) -> None:
    # GIVEN a second receive that returns the first one's messages again (a receive
    # returns up to ten of the visible messages: ten taken may stand for the rest)
    wrapped, letters = listing(sqs, messages)
    wrapped.repeat_first = True
    report = letters.list_letters()
    # THEN it is the end when the queue counts no more visible than those (put back at
    # once), else the report says others may wait
    assert len(report["messages"]) == min(messages, 10)
    assert report["complete"] is complete
    if not complete:
        assert report["incomplete"] == (
            "a receive returned only messages this run had taken (10) while the queue counts "
            "about 12 visible, 10 of them left visible by this run: others may not have been "
            "received; run it again"
        )


@pytest.mark.parametrize(
    "code",
    [
        "InvalidParameterValue",  # (what SQS answers an expired receipt handle)
        "ReceiptHandleIsInvalid",
        "AWS.SimpleQueueService.MessageNotInflight",
    ],
)
def test_putting_back_a_message_whose_window_ended_keeps_the_listing(
    sqs: Any, code: str, caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN listed messages whose windows ended before they were put back
    wrapped, letters = listing(sqs, 2)
    wrapped.expired = code
    # THEN the listing is reported (not an error, exit 1, that loses it), the skip logged
    report = letters.list_letters()
    assert (report["complete"], len(report["messages"])) == (True, 2)
    assert "2 of 2 messages listed were visible again before they were put back" in caplog.text
    # AND any other refusal is an error (a message of its own: those two are still hidden)
    url = sqs.get_queue_url(QueueName="orders-dlq")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"reason": "r", "event": {}}))
    wrapped.expired = "AccessDenied"
    with pytest.raises(ClientError, match="AccessDenied"):
        letters.list_letters()
