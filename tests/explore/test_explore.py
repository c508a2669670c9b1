"""The fault explorer as a test tier (marker `explore`, no LocalStack): every scenario,
every single fault at every AWS call, and EXPLORE_COUNT seeded random multi-fault
schedules each (CI: 150); `bash scripts/explore N` runs more."""

from __future__ import annotations

import os
from typing import Any

import pytest

from exactly_once.handlers import backends, executions
from tests.explore import explorer, scenarios
from tests.explore.faults import Fault, Injector, schedules

pytestmark = pytest.mark.explore
COUNT = int(os.environ.get("EXPLORE_COUNT", "150"))


@pytest.fixture(autouse=True)
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOG_LEVEL", "ERROR")
    monkeypatch.setenv("METRICS_DISABLED", "1")


@pytest.mark.parametrize("scenario", explorer.all_scenarios(), ids=lambda s: s.name)
def test_no_schedule_of_faults_breaks_exactly_once(scenario: scenarios.Scenario) -> None:
    report = explorer.explore(scenario, COUNT)
    print(report.line())
    assert report.calls > 0 and report.schedules == 1 + report.calls * 5 + COUNT
    assert report.faults >= report.calls * 4  # every single fault was injected somewhere
    assert report.violations == [], "\n".join(report.violations[:20])


def test_the_explorer_finds_a_planted_defect(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a starter that takes a failed start for a duplicate (the defect the starter's
    # design rules out: throttles and unknown errors must be retried)
    real = executions.start_once

    def careless(*args: Any, **kwargs: Any) -> executions.Outcome:
        try:
            return real(*args, **kwargs)
        except executions.ClientError:
            return executions.Outcome(executions.DUPLICATE, "?", "?", 0)

    monkeypatch.setattr(backends, "start_once", careless)  # the Step Functions backend's
    report = explorer.explore(scenarios.StarterSteps(), count=0)
    # THEN the error at the start is found: a DUPLICATE answered for a start that never was
    assert any("[error@" in v and "never ran" in v for v in report.violations), report.violations


def test_the_explorer_finds_a_slot_clock_that_claims_without_its_condition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from exactly_once.handlers import scheduler_slots

    # GIVEN a slot clock whose claim takes any message, claimed or not (as if the claim
    # were written without its condition)
    real = scheduler_slots.claim

    def unconditional(table: str, message_id: str, me: str) -> dict[str, Any] | None:
        found = real(table, message_id, me)
        if found is None:
            key = {"pk": {"S": f"MESSAGE#{message_id}"}}
            found = scheduler_slots._client("dynamodb").get_item(TableName=table, Key=key)
            found = found["Item"]
        return found

    monkeypatch.setattr(scheduler_slots, "claim", unconditional)
    report = explorer.explore(scenarios.SlotScenario(), count=0)
    # THEN the duplicated clock is found firing the message a second time
    assert any("[twin@" in v and "fired 2 times" in v for v in report.violations), report.violations


def test_every_single_fault_comes_before_the_random_ones() -> None:
    listed = list(schedules(calls=2, seed=1, count=3))
    assert listed[0] == ()
    assert listed[1 : 1 + 2 * 5] == [
        (Fault(call, kind),)
        for call in range(2)
        for kind in ("error", "lost", "resent", "crash", "twin")
    ]
    assert all(2 <= len(s) <= 3 for s in listed[11:]) and len(listed) == 14


def test_a_lost_answer_takes_effect_and_a_resent_one_is_sent_twice() -> None:
    import boto3
    from botocore.exceptions import ReadTimeoutError
    from moto import mock_aws

    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue = sqs.create_queue(QueueName="q")["QueueUrl"]
        injector = Injector([Fault(0, "lost"), Fault(1, "resent")])
        injector.attach(sqs)
        with pytest.raises(ReadTimeoutError):
            sqs.send_message(QueueUrl=queue, MessageBody="one")
        sqs.send_message(QueueUrl=queue, MessageBody="two")
        Injector.detach(sqs)
        attributes = sqs.get_queue_attributes(
            QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "3"  # one, two, two again
    assert injector.injected == ["lost@0:SendMessage", "resent@1:SendMessage"]


def test_a_cancel_anywhere_is_in_time_and_nothing_fires_or_refused_and_it_fires_once() -> None:
    scenario = scenarios.SchedulerScenario(cancel=True)
    report = explorer.explore(scenario, count=20)
    assert report.violations == [], "\n".join(report.violations[:20])
    # both answers were met: a cancel before the claim, and one after it
    assert scenario.cancel_answers[200] > 0 and scenario.cancel_answers[409] > 0


# Schedules that found a defect once (scripts/explore), kept: (scenario, faults, the defect)
FOUND = [
    (
        lambda: scenarios.SchedulerScenario(cancel=True),
        (Fault(10, "error"), Fault(11, "error"), Fault(28, "error")),
        "MarkDone and RecordDone both failed once: the message stayed FIRING after it fired",
    ),
]


@pytest.mark.parametrize(("scenario", "faults", "defect"), FOUND, ids=[f[2][:30] for f in FOUND])
def test_a_schedule_that_once_found_a_defect_finds_none(
    scenario: Any, faults: tuple[Fault, ...], defect: str
) -> None:
    assert explorer.replay(scenario(), faults) == [], defect
