"""Run the fault explorer: every scenario, every single fault that applies at every AWS call
of a clean run, then seeded random multi-fault schedules; print schedules explored and
violations per scenario, each violation with the schedule that replays it, shrunk to the
fewest faults that still break it.

    python -m tests.explore.explorer N       # N random schedules in all (scripts/explore N)
    python -m tests.explore.explorer N I/K   # every K-th scenario from the I-th
    python -m tests.explore.explorer --replay "<scenario>" "twin@3,timeout@7" [seed [number]]

The test tier runs a bounded count per scenario. A schedule replays exactly from
(scenario, faults, seed) at a commit: its processes take turns only at AWS calls
(tests/explore/interleave.py), its clock and random choices are its own.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import functools
import itertools
import json
import os
import random
import sys
import time
import unittest.mock
from collections.abc import Iterable, Iterator
from typing import Any

from moto import mock_aws

from exactly_once.handlers import name_dedup, runtime
from tests.explore.faults import KINDS, Call, Clock, Fault, Injector, SandboxDied, schedules
from tests.explore.interleave import InlinePool, Interleaver
from tests.explore.lambdas import Lambdas
from tests.explore.scenarios import Scenario, World


@dataclasses.dataclass
class Report:
    scenario: str
    calls: int = 0
    schedules: int = 0
    faults: int = 0
    switches: int = 0
    violations: list[str] = dataclasses.field(default_factory=list)
    found: list[tuple[tuple[Fault, ...], int, int, list[str]]] = dataclasses.field(
        default_factory=list
    )  # (schedule, seed, its number, its violations): what replays it
    seconds: float = 0.0
    apis: set[str] = dataclasses.field(default_factory=set)  # service.Operation[.Parameter]
    clean: list[Call] = dataclasses.field(default_factory=list)

    def line(self) -> str:
        return (
            f"{self.scenario}: {self.schedules} schedules ({self.faults} faults injected, "
            f"{self.switches} switches, {self.calls} AWS calls in a clean run), "
            f"{len(self.violations)} violations, {self.seconds:.1f} s"
        )


def all_scenarios() -> list[Scenario]:
    from tests.explore import scenarios

    return scenarios.every()


BATCH = 100  # schedules per moto world: a world grows with every schedule's work


def explore(
    scenario: Scenario,
    count: int,
    seed: int = 7,
    progress: bool = False,
    stop_at_first: bool = False,
    only: tuple[str, ...] | None = None,
    part: tuple[int, int] = (0, 1),
) -> Report:
    """Every schedule of `scenario` (see faults.schedules), BATCH at a time in a fresh moto
    world (schedules in one world work on keys of their own). `stop_at_first`: end at the
    first schedule that finds a violation (the mutation tier's question is only whether).
    `only`: the kinds of single faults (all that apply, by default). `part` (i, n): only
    every n-th schedule from the i-th (the test tier spreads a long scenario over workers)."""
    report = Report(scenario.name)
    started = time.monotonic()
    with _world(scenario) as clients:
        clean = _one(scenario, report, clients, 0, (), seed)
        report.clean = clean
        report.calls = len(clean)
    kinds = only if only is not None else KINDS
    planned = list(schedules(report.clean, seed, count, scenario.twins, kinds))[1:]
    singles = [s for s in planned if len(s) == 1]
    index, parts = part
    planned = singles[index::parts] + planned[len(singles) :][index::parts]
    singles = singles[index::parts]
    # Grown from the singles' runs, each with the number of the run it grew from: a
    # family names calls of that run (its retry, its later reads), and a schedule's number
    # steers its calls (its names, so its lanes; its budget, its channel), so each runs at
    # its parent's number, in a world without its parent (whose work holds those names).
    families: list[tuple[tuple[Fault, ...], int]] = []
    numbered = itertools.count(1)

    def progressed() -> None:
        if progress:
            print(
                f"  {scenario.name}: {report.schedules} schedules, "
                f"{len(report.violations)} violations",
                file=sys.stderr,
                flush=True,
            )

    def run(schedules: list[tuple[Fault, ...]], learn: bool) -> None:
        for start in range(0, len(schedules), BATCH):
            if stop_at_first and report.violations:
                return
            with _world(scenario) as clients:
                for faults in schedules[start : start + BATCH]:
                    number = next(numbered)
                    calls = _one(scenario, report, clients, number, faults, seed)
                    if learn:
                        grown = stale_reads_after(faults, calls) + outages_after(faults, calls)
                        grown += scenario.after_single(faults, calls)
                        families.extend((family, number) for family in grown)
                    if stop_at_first and report.violations:
                        return
            progressed()

    run(singles, learn=only is None)
    # Worlds shared by families of different parents (one family per number in a world:
    # its parent's names are then its own), as few worlds as the most families of one run.
    rounds: list[list[tuple[tuple[Fault, ...], int]]] = []
    placed: collections.Counter[int] = collections.Counter()
    for faults, number in families:
        if placed[number] == len(rounds):
            rounds.append([])
        rounds[placed[number]].append((faults, number))
        placed[number] += 1
    for batch in (r[i : i + BATCH] for r in rounds for i in range(0, len(r), BATCH)):
        if stop_at_first and report.violations:
            break
        with _world(scenario) as clients:
            for faults, number in batch:
                _one(scenario, report, clients, number, faults, seed)
                if stop_at_first and report.violations:
                    break
    progressed()
    run(planned[len(singles) :], learn=False)
    report.seconds = time.monotonic() - started
    return report


DEATHS = ("crash", "timeout", "orphan", "lostall")


def stale_reads_after(faults: tuple[Fault, ...], calls: list[Call]) -> list[tuple[Fault, ...]]:
    """A death, then a stale read of an index: each index read, after a single fault that
    makes work run again (a retry, a restart), that the lagging index would answer
    otherwise (an item it reads had just moved: claimed, say, by the run that died),
    answered from the lagging index."""
    [fault] = faults
    if fault.kind not in DEATHS:
        return []
    reads = [c.index for c in calls if c.index > fault.call and c.stale_differs]
    return [(fault, Fault(at, "stale")) for at in reads]


def outages_after(faults: tuple[Fault, ...], calls: list[Call]) -> list[tuple[Fault, ...]]:
    """An outage: after a single failed call, the same process's later calls of the same
    operation on the same key in that run (its retry, which succeeded there) failing too:
    what a caller does when a call keeps failing (gives up, says it could not, leaves it
    to another). Two tries is the reach of one schedule: a scenario that explores such a
    loop lets it try twice (the slot's final write)."""
    [fault] = faults
    if fault.kind != "fail" or fault.call >= len(calls):
        return []
    first = calls[fault.call]
    retries = [
        c.index
        for c in calls
        if c.index > fault.call
        and c.process == first.process
        and c.name == first.name
        and c.params.get("Key") == first.params.get("Key")
    ]
    if not retries:
        return []
    return [(fault, *(Fault(at, "fail") for at in retries))]


def replay(
    scenario: Scenario, faults: tuple[Fault, ...], seed: int = 7, number: int = 1
) -> list[str]:
    """One schedule's violations, in a world of its own: a schedule that once found a
    defect, kept as a regression test. (`number` sets its work's names and its clock's
    hour, as the exploration that found it numbered it.)"""
    report = Report(scenario.name)
    with _world(scenario) as clients:
        _one(scenario, report, clients, number, faults, seed)
    return report.violations


def shrink(
    scenario: Scenario, faults: tuple[Fault, ...], seed: int = 7, number: int = 1
) -> tuple[Fault, ...]:
    """The fewest of `faults` that still find a violation (each dropped if the rest do)."""
    kept = list(faults)
    for fault in list(faults):
        trial = tuple(f for f in kept if f != fault)
        if trial != tuple(kept) and replay(scenario, trial, seed, number):
            kept = list(trial)
    return tuple(kept)


@contextlib.contextmanager
def _world(scenario: Scenario) -> Iterator[list[Any]]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    runtime.client.cache_clear()
    name_dedup.unusable.cache_clear()
    try:
        with mock_aws(), _lighter_calls():
            _shared_loader()
            scenario.setup()
            yield scenario.clients()
    finally:
        runtime.client.cache_clear()
        name_dedup.unusable.cache_clear()


@functools.cache
def _loader() -> Any:
    import botocore.loaders

    return botocore.loaders.create_loader()


def _shared_loader() -> None:
    """boto3's default session (moto's mock_aws drops it: a world's clients come from a new
    one) with the one botocore loader of the process, which keeps the service models it
    read: a new session's loader read them again from their JSON, 8% of a scheduler
    schedule's time."""
    import boto3

    boto3.setup_default_session()
    assert boto3.DEFAULT_SESSION is not None
    boto3.DEFAULT_SESSION._session.register_component("data_loader", _loader())


# the services whose moto backends read no signature (moto takes the default account for an
# unsigned request, the one the models here read: dynamo.Table.read)
UNSIGNED = ("dynamodb", "dynamodb-streams", "sfn", "lambda", "sqs", "eventbridge", "sns")


@contextlib.contextmanager
def _lighter_calls() -> Iterator[None]:
    """moto lists its handler class's methods again for each request (3% of a scheduler
    schedule's time): once is enough, they never change. A request to the services in
    UNSIGNED is not signed (SigV4): signing was 5% of a scheduler schedule's time; the
    others are (moto's S3 refuses a request without a signature, 403). A DynamoDB answer
    is moto's result as JSON: it is already the wire's form (DynamoDB JSON), and moto's
    serializer walking the output shape was 9% (checked equal on 10,914 answers of the
    slot clock's schedules; a result JSON cannot hold, a DescribeTable's dates, goes the
    serializer's way)."""
    import botocore.signers
    import moto.core.responses

    listed = functools.cache(moto.core.responses.method_names_from_class)
    sign = botocore.signers.RequestSigner.sign
    serialize = moto.core.responses.ActionResult.execute_result

    def signed_unless_unsigned(
        self: Any, operation_name: str, request: Any, *args: Any, **kwargs: Any
    ) -> None:
        if self._service_id.hyphenize() not in UNSIGNED:
            sign(self, operation_name, request, *args, **kwargs)

    def as_json(self: Any, context: Any) -> Any:
        if context.service_model.service_name == "dynamodb" and isinstance(self.result, dict):
            try:
                return 200, {"Content-Type": "application/x-amz-json-1.0"}, json.dumps(self.result)
            except TypeError:
                pass
        return serialize(self, context)

    with (
        unittest.mock.patch.object(moto.core.responses, "method_names_from_class", listed),
        unittest.mock.patch.object(botocore.signers.RequestSigner, "sign", signed_unless_unsigned),
        unittest.mock.patch.object(moto.core.responses.ActionResult, "execute_result", as_json),
    ):
        yield


@contextlib.contextmanager
def _deterministic(clock: Clock, seed: str) -> Iterator[None]:
    """botocore's retry back-off sleeps by the schedule's clock; handlers' thread pools
    run inline; the jitter they draw from the `random` module (the slot's back-offs,
    botocore's retries) is drawn from `seed`, the schedule's own (the exploration's seed
    and its number: each schedule its own jitter, a family its parent's, as it runs at its
    parent's number), so a schedule replays alike in any process (it was the
    interpreter's, seeded afresh each run: a kept replay found its defect in one run and
    not in the next)."""
    import botocore.endpoint

    from tests.explore.scenarios.base import clocked

    pool = concurrent.futures.ThreadPoolExecutor
    # every name the handlers hold it by: the module's, and theirs (`from ... import`)
    holders = [
        module
        for name, module in list(sys.modules.items())
        if name.startswith("exactly_once.") and getattr(module, "ThreadPoolExecutor", None)
    ]
    concurrent.futures.ThreadPoolExecutor = InlinePool  # type: ignore[misc,assignment]
    for module in holders:
        module.ThreadPoolExecutor = InlinePool
    state = random.getstate()
    random.seed(seed)
    try:
        with clocked(clock, botocore.endpoint):
            yield
    finally:
        random.setstate(state)
        concurrent.futures.ThreadPoolExecutor = pool  # type: ignore[misc]
        for module in holders:
            module.ThreadPoolExecutor = pool


def _one(
    scenario: Scenario,
    report: Report,
    clients: list[Any],
    number: int,
    faults: tuple[Fault, ...],
    seed: int,
) -> list[Call]:
    clock = Clock(1_800_000_000.0 + number * 3600)  # its own hour: no schedule meets another's
    processes = Interleaver(clock)
    clock.sleeper = processes.sleep
    injector = Injector(faults, processes, clock)
    world = World(
        f"s{number}", injector, clock, Lambdas(injector, clock), random.Random(f"{seed}:{number}")
    )
    for client in clients:
        injector.attach(client)
    try:
        with _deterministic(clock, f"{seed}:{number}"), scenario.patched(world):
            verdict = processes.run(lambda: scenario.run(world))
            found = verdict()  # once every process, late ones too, has ended
    except (Exception, SandboxDied) as exc:  # (a crash escaping the source's model)
        found = [f"the schedule itself failed: {exc!r}"]
    finally:
        for client in clients:
            Injector.detach(client)
    report.schedules += 1
    report.faults += len(injector.injected)
    report.switches += processes.switches
    report.apis |= injector.apis
    if found:
        report.found.append((faults, seed, number, found))
    schedule = ",".join(map(str, faults)) or "no fault"
    report.violations += [
        f"[{schedule} #{number}] {v} (injected: {injector.injected})" for v in found
    ]
    return injector.calls


def main(argv: Iterable[str] = sys.argv[1:]) -> int:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(root), str(root / "examples" / "etl")]  # the example transforms
    # a schedule's handlers log every call, its faults too (LOG_LEVEL=ERROR to see them)
    os.environ.setdefault("LOG_LEVEL", "CRITICAL")
    os.environ["METRICS_DISABLED"] = "1"  # and write a metric line per event
    args = list(argv)
    explored = all_scenarios()
    if args and args[0] == "--replay":
        [scenario] = [s for s in explored if s.name == args[1]]
        seed = int(args[3]) if len(args) > 3 else 7
        number = int(args[4]) if len(args) > 4 else 1
        violations = replay(scenario, Fault.parse(args[2]), seed, number)
        print("\n".join(violations) or "no violation")
        return 1 if violations else 0
    count = -(-int(args[0]) // len(explored)) if args else 100  # per scenario, rounded up
    if len(args) > 1:  # "I/N": this process explores every N-th scenario from the I-th
        part, parts = (int(x) for x in args[1].split("/"))
        explored = explored[part - 1 :: parts]
    failed = 0
    total = 0
    for scenario in explored:
        report = explore(scenario, count, progress=True)
        total += report.schedules
        print(report.line(), flush=True)
        for faults, seed, number, found in report.found[:5]:
            minimal = shrink(scenario, faults, seed, number)
            print(f"  {found[0]}")
            print(
                f"    replay: python -m tests.explore.explorer --replay "
                f"'{scenario.name}' '{','.join(map(str, minimal))}' {seed} {number}"
            )
        failed += len(report.violations)
    print(f"explored {total} schedules, {failed} violations")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
