"""What every scenario shares: the world of one schedule, the sources that deliver work,
and the rules every pattern's verdict applies.

A scenario sets up its world once (moto, in-process), then runs each schedule on work of
its own (a fresh key), so schedules share the world and still cannot see each other.
Its `run` is the schedule's first process (tests/explore/interleave.py); the work it
delivers runs as invocations of the Lambda model (tests/explore/lambdas.py), twins and
timed-out runs beside it. `run` returns its verdict: a function that, called once every
process has ended (a timed-out run's late call included), returns the violations of the
pattern's invariants, each a line; the invariants count work (starts, transforms,
writes, deliveries, step runs), not only what is left behind.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import random
import types
from collections.abc import Callable, Iterator
from typing import Any

from tests.explore.faults import Call, Clock, Fault, Injector
from tests.explore.lambdas import Function, Lambdas

ARN = "arn:aws:{}:us-east-1:123456789012:{}"
Verdict = Callable[[], list[str]]
WAIT = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}


@dataclasses.dataclass
class World:
    """One schedule's world: its network, clock, functions and random choices."""

    tag: str
    injector: Injector
    clock: Clock
    lambdas: Lambdas
    rng: random.Random  # the schedule's own draws (keys): seeded by the seed and its number

    def quietly(self, call: Callable[[], Any]) -> Any:
        """A look at the world (the check's, or a source's own read), never faulted or counted."""
        was = self.injector.paused
        self.injector.paused = True
        try:
            return call()
        finally:
            self.injector.paused = was


@dataclasses.dataclass
class Delivery:
    """One delivery of the work by its source, and how it ended."""

    who: str  # main | twin | dup | again
    outcome: str  # ok | dlq
    answer: Any
    attempts: list[str]  # its invocations' process names

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


class Scenario:
    """One pattern (and backend or strategy) to explore."""

    name = ""
    twins = True  # the source may deliver the work twice at once (`twin`, `dup`)
    parts = 1  # the test tier explores it in this many parts side by side (a long one)

    def clients(self) -> list[Any]:
        """Every client the handlers call AWS through (the explorer attaches them)."""
        raise NotImplementedError

    def after_single(self, faults: tuple[Fault, ...], calls: list[Call]) -> list[tuple[Fault, ...]]:
        """Schedules of the scenario's own, grown from a single fault's run (`calls`):
        where its guards need two faults that the random schedules seldom pair."""
        return []

    def setup(self) -> None:
        raise NotImplementedError

    def patched(self, world: World) -> contextlib.AbstractContextManager[None]:
        """What the scenario changes in the handlers' modules while a schedule runs (its
        processes, late ones too, and its verdict): their clock, at least."""
        return contextlib.nullcontext()

    def run(self, world: World) -> Verdict:
        raise NotImplementedError

    # -- the source: Lambda's asynchronous invoke --------------------------------------
    def deliveries(
        self,
        world: World,
        function: Function,
        event: Any,
        cold: Callable[[], None] = lambda: None,
        again: bool = True,
        before_again: Callable[[], None] = lambda: None,
    ) -> list[Delivery]:
        """The main delivery; a twin (another delivery of the event) or a dup (the same
        invocation delivered twice: the same request id) wherever the schedule says; and,
        with `again`, a redelivery once all that ended (at-least-once sources deliver
        again later)."""
        found: list[Delivery] = []
        started: collections.Counter[str] = collections.Counter()

        def deliver(who: str, request_id: str) -> Callable[[], None]:
            def run() -> None:
                # each its own process: a twin's own twin is `twin2` (the verdicts tell
                # runs apart by their process, a concurrent one's span included)
                started[who] += 1
                label = who if started[who] == 1 else f"{who}{started[who]}"
                found.append(self.deliver(world, label, function, event, request_id, cold))

            return run

        world.injector.twin = deliver("twin", "r-twin")
        world.injector.dup = deliver("dup", "r-main")
        found.append(self.deliver(world, "main", function, event, "r-main", cold))
        world.injector.twin = world.injector.dup = None
        if again:
            world.clock.sleep(300)
            before_again()
            found.append(self.deliver(world, "again", function, event, "r-again", cold))
        return found

    @staticmethod
    def deliver(
        world: World,
        who: str,
        function: Function,
        event: Any,
        request_id: str,
        cold: Callable[[], None] = lambda: None,
    ) -> Delivery:
        attempts: list[str] = []
        outcome, answer = world.lambdas.deliver_async(
            function, event, request_id, cold, label=who, attempts=attempts
        )
        return Delivery(who, outcome, answer, attempts)


# -- the rules every verdict applies ----------------------------------------------------
CONCURRENCY = ("twin", "dup", "switch")


def faulted(world: World, process: str, kinds: tuple[str, ...] = ()) -> list[Call]:
    """The faults that hit calls of `process` (or of the invocations it started): every
    kind that changes a call, or only `kinds`."""
    return [
        call
        for call in world.injector.calls
        if call.kind is not None
        and (call.kind in kinds if kinds else call.kind not in CONCURRENCY)
        and world.injector.hit(call)
        and process in call.lineage
    ]


def unexcused_failures(
    world: World,
    deliveries: list[Delivery],
    waits: tuple[str, ...] = (),
    out_of_time: tuple[str, ...] = (),
) -> list[str]:
    """Good work fails only for a reason: every failed attempt of every delivery had a
    fault in it; or it reached its timeout while others ran (a twin, a switch, a timeout
    elsewhere moved the clock on), or gave up short of it (`out_of_time`: the error the
    design fails with when too little of its time is left); or it failed with an error
    the design makes a concurrent duplicate wait with (`waits`, e.g. a lock held), while
    another run overlapped it or one before it failed with a fault (its lock left to
    expire). (The explorer has one clock: a timeout anywhere moves it
    to that invocation's deadline, and every process alive then loses that time.)"""
    from tests.explore.lambdas import DIED

    # Time jumps only where something ran beside (a twin, a switch) or a timeout came: an
    # invocation that then reached its timeout while it waited died of that.
    paused = any(
        c.kind in (*CONCURRENCY, "timeout", "orphan") and world.injector.hit(c)
        for c in world.injector.calls
    )
    found = []
    for delivery in deliveries:
        for attempt in delivery.attempts:
            failure = world.lambdas.failures.get(attempt)
            if failure is None or faulted(world, attempt):
                continue
            if paused and DIED in (
                getattr(world.lambdas.failures.get(process), "error_type", "")
                for process in descendants(world, attempt)
            ):
                continue  # it, or an invocation it waited for, reached its timeout
            if paused and failure.error_type in out_of_time:
                continue  # it gave up as its time ran short, the clock moved on under it
            if failure.error_type in waits and (
                overlapped(world, attempt) or left_behind(world, attempt)
            ):
                continue
            found.append(
                f"the {delivery.who} delivery's attempt {attempt} failed with no fault: "
                f"{failure.error_type}: {failure.message[:200]}"
            )
    return found


def descendants(world: World, process: str) -> set[str]:
    """`process` and the invocations it started (by the calls they made)."""
    return {process} | {c.process for c in world.injector.calls if process in c.lineage}


def left_behind(world: World, process: str) -> bool:
    """Whether an invocation that started before `process` failed with a fault in it, or
    died: what it held (a lock) may be left to its expiry."""
    from tests.explore.lambdas import DIED, TIMED_OUT

    start = world.lambdas.spans.get(process, (0, 0.0))[0]
    failures = world.lambdas.failures
    return any(
        other != process
        and span[0] < start
        and other in failures
        and (failures[other].error_type in (DIED, TIMED_OUT) or bool(faulted(world, other)))
        for other, span in world.lambdas.spans.items()
    )


def overlapped(world: World, process: str) -> bool:
    """Whether another invocation ran while `process` did."""
    spans = world.lambdas.spans
    mine = spans.get(process)
    if mine is None:
        return False
    return any(
        other != process and span[0] < mine[1] and mine[0] < span[1]
        for other, span in spans.items()
    )


@contextlib.contextmanager
def clocked(clock: Clock, *modules: types.ModuleType) -> Iterator[None]:
    """`modules` read `clock` wherever they call time.time() or time.sleep()."""
    import time as real

    fake = types.SimpleNamespace(
        time=clock.time,
        sleep=clock.sleep,
        monotonic=clock.time,
        strftime=real.strftime,
        gmtime=real.gmtime,
        perf_counter=clock.time,
    )
    saved = [module.time for module in modules]  # type: ignore[attr-defined]
    for module in modules:
        module.time = fake  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, original in zip(modules, saved, strict=True):
            module.time = original  # type: ignore[attr-defined]
