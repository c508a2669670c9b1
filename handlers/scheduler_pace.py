"""How many of one invocation's deliveries a target takes at once (`Pace`).

A burst's deliveries start together. A target that throttles (a Lambda function at its
reserved or account concurrency, an API past its rate) refuses all but a few of them, and
each refused delivery retried on its own back-off keeps it about as busy refusing as
serving: a thousand deliveries to a function of twelve environments made some fifty
thousand throttled invokes on LocalStack, whose CPU then ran the function's own calls so
late that its runs timed out. The AWS SDKs' `adaptive` retry mode answers this with
"automatic client-side rate limiting" fed by throttles ("Retry behavior", AWS SDKs and
Tools reference guide), one client's; a slot delivers to many targets over many threads,
so it paces each target itself, in the same spirit though not the SDKs' algorithm:
TCP's congestion window, counted in deliveries under way rather than requests a second
(a Lambda target's limit is a concurrency, an API's rate a concurrency over its latency).

An invocation's deliveries to one target (`key`: where AWS counts its throttles) take
turns, free ones going to those that asked first: at most `limit` at once. The limit
starts at as many as the invocation delivers at once (no slow start: a slow target's
deliveries are each under way for as long as it runs, and one must never queue behind
another that merely takes its time, so a burst's first round to a target that takes a
few is throttled for the rest); a throttle halves it (once for the sends made before it:
their throttles are the same news); each limit's worth of deliveries raises it by one. A
throttled delivery past the halved limit gives its turn back and asks again; one within
it keeps it for a pause, then gives it to the longest waiting, if any (the turns go
round). Pacing only waits: what is sent, and how each send is counted and its outcome
read, are `deliver`'s (scheduler_slots.py).
"""

from __future__ import annotations

import bisect
import itertools
import random
import threading
import time

from exactly_once.handlers.targets import TargetKind, kind_of

# A turn waited for is looked for again after a pause of about this long (jittered): the
# waiting threads poll rather than wait on a condition, so that a test's clock (the fault
# explorer's) stands in for time here as in the rest of the slot's code.
POLL_SECONDS = 0.05


def key(target_arn: str) -> str:
    """Where AWS counts a target's throttles, which its deliveries share a pace for: a
    Lambda function's reserved concurrency "appl[ies] to the function as a whole,
    including all published versions and the unpublished version" (PutFunctionConcurrency;
    a function without it draws on the account's unreserved concurrency in its Region,
    shared with every such function: paced per function all the same, each throttle its
    own news); an SQS queue's rate is the queue's; SNS's, EventBridge's PutEvents' and Step
    Functions' StartExecution's are the account's in its Region (their quotas pages; an SNS
    FIFO topic's own quota is within it)."""
    try:
        kind, parts = kind_of(target_arn), target_arn.split(":")
    except ValueError:  # (not a target: its send fails as before, paced on its own)
        return target_arn
    if kind == TargetKind.LAMBDA:
        return ":".join(parts[:7])  # arn:aws:lambda:REGION:ACCOUNT:function:NAME
    if kind in (TargetKind.SQS, TargetKind.SQS_FIFO):
        return target_arn
    return ":".join(parts[:5])  # arn:PARTITION:SERVICE:REGION:ACCOUNT


class Pace:
    """The turns of one invocation's deliveries to one target, `most` at once at most."""

    def __init__(self, most: int) -> None:
        self.most = max(1, most)
        self.limit = self.most
        self.under_way = 0
        self._delivered = 0  # deliveries since the limit last rose
        self._cut_at = float("-inf")  # a throttle of a send made before it is old news
        self._tickets = itertools.count()
        self._waiting: list[int] = []  # the tickets of those asking, in the order they asked
        self._lock = threading.Lock()

    def take(self, until: float | None) -> bool:
        """A turn, the free ones going to those that asked first: False if none came by
        `until` (by the wall clock)."""
        with self._lock:
            ticket = next(self._tickets)
            self._waiting.append(ticket)  # (tickets rise: the list stays in order)
        try:
            while True:
                with self._lock:
                    ahead = bisect.bisect_left(self._waiting, ticket)
                    if ahead < self.limit - self.under_way:
                        del self._waiting[ahead]
                        self.under_way += 1
                        return True
                    if until is not None and time.time() >= until:
                        self._waiting.remove(ticket)
                        return False
                pause = random.uniform(0.5, 1.5) * POLL_SECONDS
                if until is not None:
                    pause = min(pause, max(0.0, until - time.time()))
                time.sleep(pause)
        except BaseException:  # (a waiter that dies asks no more)
            with self._lock:
                if ticket in self._waiting:
                    self._waiting.remove(ticket)
            raise

    def delivered(self) -> None:
        """A send under a turn was delivered."""
        with self._lock:
            self._delivered += 1
            if self._delivered >= self.limit:
                self.limit, self._delivered = min(self.most, self.limit + 1), 0

    def throttled(self, sent_at: float) -> bool:
        """A send made under a turn at `sent_at` was throttled: whether the turn keeps its
        place (one past the halved limit is given back: the caller asks again before it
        sends again)."""
        with self._lock:
            if sent_at > self._cut_at:
                self.limit = max(1, min(self.limit, self.under_way) // 2)
                self._delivered, self._cut_at = 0, time.time()
            if self.under_way <= self.limit:
                return True
            self.under_way -= 1
            return False

    def keep(self) -> bool:
        """After a throttled send's pause: whether the turn is kept for the next send, or
        given back (False) to a delivery waiting for one: the turns go round, so that no
        delivery holds one through a throttled target's every refusal while others wait."""
        with self._lock:
            if not self._waiting:  # (nobody else asking)
                return True
            self.under_way -= 1
            return False

    def give_back(self) -> None:
        with self._lock:
            self.under_way -= 1
