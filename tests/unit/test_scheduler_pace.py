"""A target's pace (handlers/scheduler_pace.py): an invocation's deliveries to a target that
throttles take turns, and throttle it a few times rather than thousands."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import Any

import pytest

from exactly_once.handlers import scheduler_pace, scheduler_slots
from exactly_once.handlers.errors import ClientError
from exactly_once.handlers.scheduler_pace import Pace

TARGET = "arn:aws:lambda:us-east-1:1:function:t"


def test_turns_are_given_up_to_the_limit_and_none_past_the_time_waited() -> None:
    pace = Pace(2)
    assert pace.take(None) and pace.take(None)
    assert not pace.take(time.time())  # both under way: none by then
    pace.give_back()
    assert pace.take(time.time())


def test_a_throttle_halves_the_limit_once_for_the_sends_made_before_it() -> None:
    pace = Pace(8)
    sent_at = time.time()
    assert all(pace.take(None) for _ in range(8))
    assert pace.answer(sent_at, throttled=True) is False  # 8 under way, past the new 4
    assert pace.limit == 4 and pace.under_way == 7
    # the other sends' throttles are the same news: no second cut; each turn past the
    # limit is given back
    for _ in range(3):
        assert pace.answer(sent_at, throttled=True) is False
    assert pace.limit == 4 and pace.under_way == 4
    assert pace.answer(sent_at, throttled=True) is True  # within the limit: kept
    # a throttle of a send made after the cut is news: halved again, from what is under
    # way (2), not from the limit (4)
    for _ in range(3):
        pace.give_back()
    assert pace.take(None)
    assert pace.answer(time.time() + 1, throttled=True) is False
    assert pace.limit == 1 and pace.under_way == 1


def test_answers_raise_the_limit_by_one_a_limits_worth_never_past_the_most() -> None:
    pace = Pace(4)
    assert pace.take(None)
    pace.answer(time.time(), throttled=True)  # 1 under way: the limit is cut to 1
    assert pace.limit == 1
    pace.answer(time.time(), throttled=False)
    assert pace.limit == 2  # one answer at a limit of 1: one more
    pace.answer(time.time(), throttled=False)
    pace.answer(time.time(), throttled=False)
    assert pace.limit == 3  # two answers at a limit of 2
    for _ in range(100):
        pace.answer(time.time(), throttled=False)
    assert pace.limit == 4


class Throttling:
    """A target of `concurrency` environments: a send past them is throttled, as Lambda
    throttles an invoke past a function's reserved concurrency."""

    def __init__(self, concurrency: int, seconds: float) -> None:
        self.free = threading.Semaphore(concurrency)
        self.seconds = seconds
        self.delivered: list[str] = []
        self.throttles = 0
        self.lock = threading.Lock()

    def send(self, target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
        if not self.free.acquire(blocking=False):
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
    """`messages` delivered at once, a thread each, as a worker's share is."""

    def one(n: int) -> None:
        scheduler_slots.deliver(
            TARGET,
            {"id": f"m{n}"},
            sleep=lambda s: time.sleep(s / 100),  # (the back-offs, a hundredth as long)
            deadline=time.time() + 600,
            pace=pace,
        )

    with concurrent.futures.ThreadPoolExecutor(messages) as pool:
        list(pool.map(one, range(messages)))


def test_a_burst_at_its_pace_throttles_a_target_a_few_times_each_delivered_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a target that takes 5 at once, and 200 deliveries to it at once
    monkeypatch.setattr(scheduler_pace, "POLL_SECONDS", 0.001)
    paced, unpaced = Throttling(5, 0.005), Throttling(5, 0.005)
    # WHEN they are delivered at their pace, and (in the same run) each on its own back-off
    with monkeypatch.context() as patch:
        patch.setattr(scheduler_slots, "send", paced.send)
        burst(paced, 200, Pace(200))
    with monkeypatch.context() as patch:
        patch.setattr(scheduler_slots, "send", unpaced.send)
        burst(unpaced, 200, None)
    # THEN each is delivered once either way, and the paced burst throttled the target a
    # few times for each window of its limit (a probe past it), not for every retry
    assert (
        sorted(paced.delivered) == sorted(unpaced.delivered) == sorted(f"m{n}" for n in range(200))
    )
    assert paced.throttles < 200 / 4, (paced.throttles, unpaced.throttles)
    assert unpaced.throttles > 4 * paced.throttles, (paced.throttles, unpaced.throttles)
