"""How many of one invocation's deliveries a target takes at once (`Pace`).

A burst's deliveries start together. A target that throttles (a Lambda function at its
reserved or account concurrency, an API past its rate) refuses all but a few of them, and
each refused delivery retried on its own back-off keeps it about as busy refusing as
serving: a thousand deliveries to a function of twelve environments made some fifty
thousand throttled invokes on LocalStack, whose CPU then ran the function's own calls so
late that its runs timed out. The AWS SDKs' answer is a client-side rate limiter fed by
throttles ("adaptive" retry mode); a scheduler delivers over many threads and clients,
so it paces them itself: additive increase, multiplicative decrease, as TCP's congestion
window, counted in deliveries under way rather than requests a second (a Lambda target's
limit is a concurrency, and an API's rate is a concurrency over its latency).

An invocation's deliveries to one target take turns: at most `limit` at once. A throttle
halves the limit (once for the sends made before it: their throttles are the same news);
an answer that is no throttle raises it by one for each limit's worth of answers. A
throttled turn past the halved limit is given back, and waits for another. Pacing only
waits: a turn is taken before a send and never changes what is sent, how often, or what
an outcome means (handlers/scheduler_slots.py, `deliver`).
"""

from __future__ import annotations

import random
import threading
import time

# A turn waited for is looked for again after a pause of about this long (jittered): the
# waiting threads of a worker poll rather than wait on a condition, so that a test's clock
# (the fault explorer's) stands in for time here as in the rest of the slot's code.
POLL_SECONDS = 0.1


class Pace:
    """The turns of one invocation's deliveries to one target; `most` at once at first."""

    def __init__(self, most: int) -> None:
        self.most = max(1, most)
        self.limit = self.most
        self.under_way = 0
        self._answers = 0  # answers since the limit last rose
        self._cut_at = float("-inf")  # a throttle of a send made before it is old news
        self._lock = threading.Lock()

    def take(self, until: float | None) -> bool:
        """A turn, waited for until `until` (by the wall clock) at most: False if none came
        by then."""
        while True:
            with self._lock:
                if self.under_way < self.limit:
                    self.under_way += 1
                    return True
            if until is not None and time.time() >= until:
                return False
            pause = random.uniform(0.5, 1.5) * POLL_SECONDS
            if until is not None:
                pause = min(pause, max(0.0, until - time.time()))
            time.sleep(pause)

    def answer(self, sent_at: float, throttled: bool) -> bool:
        """The target answered a send made (under a turn) at `sent_at`: whether the turn
        keeps its place (a throttled turn past the halved limit is given back: the caller
        takes another before it sends again)."""
        with self._lock:
            if not throttled:
                self._answers += 1
                if self._answers >= self.limit:
                    self.limit, self._answers = min(self.most, self.limit + 1), 0
                return True
            if sent_at > self._cut_at:
                self.limit, self._answers = max(1, min(self.limit, self.under_way) // 2), 0
                self._cut_at = time.time()
            if self.under_way <= self.limit:
                return True
            self.under_way -= 1
            return False

    def give_back(self) -> None:
        with self._lock:
            self.under_way -= 1
