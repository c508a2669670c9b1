"""A target's pace (handlers/scheduler_pace.py): an invocation's deliveries to a target that
throttles take turns, and throttle it for their first rounds, not for every retry."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

import pytest

from exactly_once.handlers import scheduler_slots
from exactly_once.handlers.errors import ClientError
from exactly_once.handlers.scheduler_pace import Pace, key
from exactly_once.handlers.scheduler_slots import OutOfTime, TargetFailed

TARGET = "arn:aws:lambda:us-east-1:1:function:t"


def test_turns_are_given_up_to_the_limit_and_none_past_the_time_waited() -> None:
    pace = Pace(2)
    assert pace.take(None) and pace.take(None)
    assert not pace.take(time.time())  # both under way: none by then
    pace.give_back()
    assert pace.take(time.time())


def asking(pace: Pace, count: int) -> None:
    """Until `count` deliveries are waiting for a turn (each asks after the one before)."""
    deadline = time.time() + 30
    while len(pace._waiting) < count and time.time() < deadline:
        time.sleep(0.005)
    assert len(pace._waiting) == count


def test_turns_come_in_the_order_asked() -> None:
    pace = Pace(1)
    assert pace.take(None)
    order: list[int] = []

    def ask(n: int) -> None:
        assert pace.take(time.time() + 30)
        order.append(n)
        pace.give_back()

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(5)]
    for n, thread in enumerate(threads):
        thread.start()
        asking(pace, n + 1)
    pace.give_back()
    for thread in threads:
        thread.join()
    assert order == [0, 1, 2, 3, 4]


def test_turns_freed_together_go_to_as_many_of_the_first_asking_at_once() -> None:
    pace = Pace(3)
    assert all(pace.take(None) for _ in range(3))
    got: list[int] = []

    def ask(n: int) -> None:
        if pace.take(None):
            got.append(n)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(5)]
    for n, thread in enumerate(threads):
        thread.start()
        asking(pace, n + 1)
    for _ in range(3):
        pace.give_back()
    for thread in threads[:3]:
        thread.join(timeout=30)
    assert sorted(got) == [0, 1, 2] and len(pace._waiting) == 2  # the two that asked last wait
    for _ in range(2):
        pace.give_back()
    for thread in threads[3:]:
        thread.join(timeout=30)
    assert sorted(got) == [0, 1, 2, 3, 4] and pace.under_way == 3


def test_a_throttle_halves_the_limit_once_for_the_sends_made_before_it() -> None:
    pace = Pace(8)
    sent_at = time.time()
    assert all(pace.take(None) for _ in range(8))
    assert pace.throttled(sent_at) is False  # 8 under way, past the new 4
    assert pace.limit == 4 and pace.under_way == 7
    # the other sends' throttles are the same news: no second cut; each turn past the
    # limit is given back
    for _ in range(3):
        assert pace.throttled(sent_at) is False
    assert pace.limit == 4 and pace.under_way == 4
    assert pace.throttled(sent_at) is True  # within the limit: kept
    # a throttle of a send made after the cut is news: halved again, from what is under
    # way (2), not from the limit (4)
    for _ in range(3):
        pace.give_back()
    assert pace.take(None)
    assert pace.throttled(time.time() + 1) is False
    assert pace.limit == 1 and pace.under_way == 1


def test_after_a_throttle_the_limit_rises_by_one_a_round() -> None:
    pace = Pace(4)
    assert pace.take(None)
    pace.throttled(time.time())  # 1 under way: the limit is cut to 1
    assert pace.limit == 1
    pace.delivered()
    assert pace.limit == 2  # one delivery at a limit of 1: one more
    pace.delivered()
    pace.delivered()
    assert pace.limit == 3  # two deliveries at a limit of 2
    for _ in range(100):
        pace.delivered()
    assert pace.limit == 4


def test_a_targets_deliveries_share_a_pace_where_aws_counts_its_throttles() -> None:
    function = "arn:aws:lambda:us-east-1:1:function:f"
    # a function's concurrency is the function's, all its versions and aliases
    assert key(function) == key(f"{function}:prod") == key(f"{function}:3") == function
    assert key("arn:aws:lambda:us-east-1:1:function:g") != key(function)
    # a queue's rate is the queue's
    assert key("arn:aws:sqs:us-east-1:1:a") != key("arn:aws:sqs:us-east-1:1:b")
    # SNS's, EventBridge's and Step Functions' are the account's in its Region
    assert key("arn:aws:sns:us-east-1:1:a") == key("arn:aws:sns:us-east-1:1:b")
    assert key("arn:aws:sns:us-east-1:1:a") != key("arn:aws:sns:us-east-1:2:a")
    bus = "arn:aws:events:us-east-1:1:event-bus/"
    assert key(f"{bus}a") == key(f"{bus}b") != key("arn:aws:events:eu-west-1:1:event-bus/a")
    machine = "arn:aws:states:us-east-1:1:stateMachine:"
    assert key(f"{machine}a") == key(f"{machine}b:prod")


class Throttling:
    """A target of `concurrency` environments: a send past them is throttled, as Lambda
    throttles an invoke past a function's reserved concurrency; each answer (a throttle's
    too) takes `seconds`, a round trip."""

    def __init__(self, concurrency: int, seconds: float) -> None:
        self.free = threading.Semaphore(concurrency)
        self.seconds = seconds
        self.delivered: list[str] = []
        self.throttles = 0
        self.lock = threading.Lock()

    def send(self, target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        if not self.free.acquire(blocking=False):
            time.sleep(self.seconds)
            with self.lock:
                self.throttles += 1
            raise ClientError({"Error": {"Code": "TooManyRequestsException"}}, "Invoke")
        try:
            time.sleep(self.seconds)
            with self.lock:
                self.delivered.append(delivery["id"])
        finally:
            self.free.release()


def burst(target: Throttling, messages: int, pace: Pace | None) -> None:
    """`messages` delivered at once (a thread each, all let go together), as a worker's
    share is at its second."""
    start = threading.Barrier(messages)

    def one(n: int) -> None:
        start.wait()
        scheduler_slots.deliver(
            TARGET,
            {"id": f"m{n}"},
            sleep=lambda s: time.sleep(s / 100),  # (the back-offs, a hundredth as long)
            deadline=time.time() + 600,
            pace=pace,
        )

    with concurrent.futures.ThreadPoolExecutor(messages) as pool:
        list(pool.map(one, range(messages)))


def test_a_burst_at_its_pace_throttles_a_target_for_its_first_rounds_each_delivered_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a target that takes 5 at once, each answer 10 ms away, and 200 deliveries to
    # it at once
    paced, unpaced = Throttling(5, 0.01), Throttling(5, 0.01)
    pace = Pace(200)
    # WHEN they are delivered at their pace, and (in the same run) each on its own back-off
    with monkeypatch.context() as patch:
        patch.setattr(scheduler_slots, "send", paced.send)
        burst(paced, 200, pace)
    with monkeypatch.context() as patch:
        patch.setattr(scheduler_slots, "send", unpaced.send)
        burst(unpaced, 200, None)
    # THEN each is delivered once either way, every turn was given back, and the paced
    # burst throttled the target for its first rounds (200 at once, then 100, 50, ...:
    # fewer than twice the burst in all), not for every retry
    everyone = sorted(f"m{n}" for n in range(200))
    assert sorted(paced.delivered) == sorted(unpaced.delivered) == everyone
    assert pace.under_way == 0
    assert paced.throttles < 2 * 200 + 50, (paced.throttles, unpaced.throttles)
    assert unpaced.throttles > 2 * paced.throttles, (paced.throttles, unpaced.throttles)


def test_a_function_that_ran_and_answered_a_throttle_error_leaves_the_pace_be(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # its own downstream call throttled: it ran, and failed (not refused unrun)
    def send(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        raise TargetFailed("ThrottlingException", '{"errorType": "ThrottlingException"}')

    monkeypatch.setattr(scheduler_slots, "send", send)
    pace = Pace(8)
    with pytest.raises(TargetFailed):
        scheduler_slots.deliver(TARGET, {"id": "m"}, sleep=lambda s: None, pace=pace)
    assert pace.limit == 8 and pace.under_way == 0


def test_a_delivery_that_never_gets_its_turn_is_out_of_time_and_sends_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[str] = []
    monkeypatch.setattr(scheduler_slots, "send", lambda *args: sent.append("sent"))
    pace = Pace(1)
    assert pace.take(None)  # another delivery's, under way to the end
    deadline = time.time() + scheduler_slots.MIN_SEND_SECONDS + 0.2
    with pytest.raises(OutOfTime):
        scheduler_slots.deliver(TARGET, {"id": "m"}, deadline=deadline, pace=pace)
    assert sent == [] and pace.under_way == 1


def test_a_throttled_turn_goes_round_to_one_waiting_after_its_pause() -> None:
    pace = Pace(1)
    assert pace.take(None)
    assert pace.keep()  # nobody else asking: kept
    got: list[bool] = []
    asked = threading.Thread(target=lambda: got.append(pace.take(time.time() + 30)))
    asked.start()
    asking(pace, 1)  # (it waits: the one turn is under way)
    assert not pace.keep()  # given to it
    asked.join(timeout=30)
    assert got == [True] and pace.under_way == 1
