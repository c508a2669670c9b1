"""Targets of every kind users name for scheduler channels: told from the ARN, delivered
by the matching Step Functions integration, granted the matching action; others refused."""

from __future__ import annotations

import json

import pytest

from exactly_once.components.scheduler import Scheduler, SchedulerArgs
from exactly_once.components.targets import deliver
from exactly_once.handlers.scheduler_slots import delivery_of
from exactly_once.handlers.targets import TargetKind, address, kind_of
from tests.unit.pulumi_harness import run

P = "arn:aws:{}:us-east-1:123456789012:{}"
FN, QUEUE, TOPIC = P.format("lambda", "function:f"), P.format("sqs", "q"), P.format("sns", "t")
MACHINE, BUS = P.format("states", "stateMachine:m"), P.format("events", "event-bus/b")
WORKERS = P.format("lambda", "function:s-slot-workers")


@pytest.mark.parametrize(
    ("arn", "kind"),
    [
        (FN, "lambda"),
        (f"{FN}:live", "lambda"),
        (QUEUE, "sqs"),
        (f"{QUEUE}.fifo", "sqs-fifo"),
        (TOPIC, "sns"),
        (MACHINE, "states"),
        (BUS, "events"),
    ],
)
def test_the_kind_is_told_from_the_arn(arn: str, kind: str) -> None:
    assert kind_of(arn) == kind


@pytest.mark.parametrize(
    "arn", ["arn:aws:s3:::bucket", P.format("dynamodb", "table/t"), "my-function", ""]
)
def test_anything_else_is_refused_naming_what_is_supported(arn: str) -> None:
    with pytest.raises(ValueError, match="SQS queue, an SNS topic"):
        kind_of(arn)


def test_a_channel_of_an_unsupported_kind_is_refused_where_it_is_written() -> None:
    with pytest.raises(ValueError, match="channel 'files'"):
        SchedulerArgs({"files": "arn:aws:s3:::bucket"})


def test_an_sqs_target_is_sent_to_by_its_queue_url() -> None:
    assert address(QUEUE) == "https://sqs.us-east-1.amazonaws.com/123456789012/q"
    assert address(FN) == FN


def test_each_kind_is_delivered_by_its_integration() -> None:
    resources = {
        kind: deliver(kind, "$.target", "$.delivery", dedup="$.id")["Resource"]
        for kind in TargetKind
    }
    assert resources == {
        "lambda": "arn:aws:states:::lambda:invoke",
        "sqs": "arn:aws:states:::sqs:sendMessage",
        "sqs-fifo": "arn:aws:states:::sqs:sendMessage",
        "sns": "arn:aws:states:::sns:publish",
        "sns-fifo": "arn:aws:states:::sns:publish",
        "states": "arn:aws:states:::states:startExecution",
        "events": "arn:aws:states:::events:putEvents",
    }
    # a state machine target's execution is named by the message id: started once
    assert (
        deliver(TargetKind.STATES, MACHINE, "$.d", dedup="$.id")["Parameters"]["Name.$"] == "$.id"
    )
    # a FIFO queue deduplicates by it; a standard queue takes no such field
    assert kind_of(f"{QUEUE}.fifo") == "sqs-fifo"
    fifo = deliver(TargetKind.SQS_FIFO, "$.target", "$.d", dedup="$.id")["Parameters"]
    assert fifo["MessageDeduplicationId.$"] == fifo["MessageGroupId.$"] == "$.id"
    with pytest.raises(ValueError, match="deduplication id"):
        deliver(TargetKind.SQS_FIFO, "$.target", "$.d")
    # a FIFO topic refuses a publish without a group id (an SNS FIFO target always failed)
    assert kind_of("arn:aws:sns:us-east-1:1:orders.fifo") == "sns-fifo"
    assert kind_of("arn:aws:sns:us-east-1:1:orders") == "sns"
    topic = deliver(TargetKind.SNS_FIFO, "$.target", "$.d", dedup="$.id")
    assert topic["Resource"] == "arn:aws:states:::sns:publish"
    assert topic["Parameters"]["MessageDeduplicationId.$"] == "$.id"
    assert topic["Parameters"]["MessageGroupId.$"] == "$.id"
    with pytest.raises(ValueError, match="FIFO sns target needs a deduplication id"):
        deliver(TargetKind.SNS_FIFO, "$.target", "$.d")
    assert "MessageGroupId.$" not in deliver(TargetKind.SNS, "$.t", "$.d", "$.id")["Parameters"]
    assert (
        "MessageDeduplicationId.$"
        not in deliver(TargetKind.SQS, "https://sqs.x/1/q", "$.d", "$.id")["Parameters"]
    )


def test_the_slot_function_may_deliver_to_each_channel_with_its_own_action() -> None:
    channels = {"fn": FN, "queue": QUEUE, "topic": TOPIC, "machine": MACHINE}
    mocks = run(lambda: Scheduler("s", SchedulerArgs(channels, redeliver=["fn"])))
    policy = json.loads(mocks.named("s-slots-policy").inputs["policy"])
    by_action: dict[str, list[str]] = {}
    for statement in policy["Statement"]:
        for action in statement["Action"]:
            by_action.setdefault(action, []).extend(statement["Resource"])
    assert by_action["sqs:SendMessage"] == [QUEUE]
    assert by_action["sns:Publish"] == [TOPIC]
    # a state machine's type is read before it is started (an EXPRESS one never is)
    assert by_action["states:StartExecution"] == by_action["states:DescribeStateMachine"]
    assert by_action["states:StartExecution"] == [MACHINE]
    # the target, and the workers function it fans a large second out to
    assert sorted(by_action["lambda:InvokeFunction"]) == sorted([FN, WORKERS])
    # AND each channel's item says whether its target may be sent a message again
    items = {
        channel: json.loads(mocks.named(f"s-channel-{channel}").inputs["item"])
        for channel in channels
    }
    assert items["fn"]["redeliver"] == {"BOOL": True}
    assert all("redeliver" not in item for channel, item in items.items() if channel != "fn")


def test_redeliver_names_only_channels_that_exist() -> None:
    with pytest.raises(ValueError, match="redeliver names channels that do not exist: mail"):
        SchedulerArgs({"fn": FN}, redeliver=["mail"])


def test_a_message_is_delivered_with_its_id_and_how_it_was_registered() -> None:
    image = {
        "id": {"S": "m-1"},
        "channel": {"S": "queue"},
        "target_arn": {"S": QUEUE},
        "parameters": {"S": '{"n": 1}'},
        "publish_at": {"N": "1800000000.500"},
    }
    assert delivery_of(image) == {
        "id": "m-1",
        "channel": "queue",
        "parameters": {"n": 1},
        "publishTime": 1800000000.5,
    }
    late = delivery_of({**image, "late_on_arrival": {"N": "3.250"}})
    assert late["lateOnArrival"] == 3.25


@pytest.mark.parametrize(("minutes", "period", "periods"), [(60, 3600, 2), (1440, 86400, 1)])
def test_an_alarm_tells_when_the_sweep_stops_running(
    minutes: int, period: int, periods: int
) -> None:
    args = SchedulerArgs({"fn": FN}, sweep_period_minutes=minutes, window_minutes=minutes + 5)
    mocks = run(lambda: Scheduler("s", args))
    alarm = mocks.named("s-sweep-stopped").inputs
    # every run writes its Overdue datum (0 included): none for two periods is ALARM
    assert (alarm["metricName"], alarm["statistic"]) == ("Overdue", "SampleCount")
    assert (alarm["period"], alarm["evaluationPeriods"]) == (period, periods)
    assert alarm["treatMissingData"] == "breaching"
    # and a failed run's alarm holds until a run succeeds (Lambda writes Errors 0 then)
    assert mocks.named("s-sweep-failed").inputs["treatMissingData"] == "ignore"
