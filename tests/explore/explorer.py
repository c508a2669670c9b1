"""Run the fault explorer: every scenario, every single fault at every AWS call of a clean
run, then seeded random multi-fault schedules; print schedules explored and violations
per scenario. `python -m tests.explore.explorer N` (or `bash scripts/explore N`) runs N
random schedules in all, shared evenly by the scenarios; the test tier runs a bounded
count per scenario."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from moto import mock_aws

from exactly_once.handlers import runtime, starter
from tests.explore.faults import Clock, Fault, Injector, schedules
from tests.explore.scenarios import Scenario


@dataclasses.dataclass
class Report:
    scenario: str
    calls: int = 0
    schedules: int = 0
    faults: int = 0
    violations: list[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    apis: set[str] = dataclasses.field(default_factory=set)  # service.Operation[.Parameter]

    def line(self) -> str:
        return (
            f"{self.scenario}: {self.schedules} schedules ({self.faults} faults injected, "
            f"{self.calls} AWS calls in a clean run), {len(self.violations)} violations, "
            f"{self.seconds:.1f} s"
        )


def all_scenarios() -> list[Scenario]:
    from exactly_once.handlers import etl
    from tests.explore import scenarios

    return [
        scenarios.StarterSteps("REJECT_DUPLICATE"),
        scenarios.StarterSteps("ALLOW_DUPLICATE_FAILED_ONLY"),
        scenarios.StarterDurable(),
        *[scenarios.Etl(strategy) for strategy in etl.STRATEGIES],
        *scenarios.more(),
    ]


BATCH = 400  # schedules per moto world: a world grows with every schedule's work


def explore(scenario: Scenario, count: int, seed: int = 7, progress: bool = False) -> Report:
    """Every schedule of `scenario` (see faults.schedules), BATCH at a time in a fresh moto
    world (schedules in one world work on keys of their own)."""
    report = Report(scenario.name)
    started = time.monotonic()
    with _world(scenario) as (clients, clock):
        probe = Injector()
        for client in clients:
            probe.attach(client)
        clean = scenario.run("clean", probe, clock)
        report.calls = len(probe.calls)
        report.apis |= probe.apis
        report.violations += [f"clean run: {v}" for v in clean]
        for client in clients:
            Injector.detach(client)
    planned = iter(enumerate(schedules(report.calls, seed, count)))
    while True:
        batch = list(itertools.islice(planned, BATCH))
        if not batch:
            break
        with _world(scenario) as (clients, clock):
            for number, faults in batch:
                _one(scenario, report, clients, clock, number, faults)
        if progress:
            print(
                f"  {scenario.name}: {report.schedules} schedules, "
                f"{len(report.violations)} violations",
                file=sys.stderr,
                flush=True,
            )
    report.seconds = time.monotonic() - started
    return report


def replay(scenario: Scenario, faults: tuple[Fault, ...]) -> list[str]:
    """One schedule's violations, in a world of its own: a schedule that once found a
    defect, kept as a regression test."""
    report = Report(scenario.name)
    with _world(scenario) as (clients, clock):
        _one(scenario, report, clients, clock, 0, faults)
    return report.violations


@contextlib.contextmanager
def _world(scenario: Scenario) -> Iterator[tuple[list[Any], Clock]]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    runtime.client.cache_clear()
    starter.unusable.cache_clear()
    try:
        with mock_aws():
            clients = [runtime.client(service) for service in scenario.services]
            scenario.setup()
            yield clients, Clock()
    finally:
        runtime.client.cache_clear()
        starter.unusable.cache_clear()


def _one(
    scenario: Scenario,
    report: Report,
    clients: list[Any],
    clock: Clock,
    number: int,
    faults: tuple[Fault, ...],
) -> None:
    injector = Injector(faults)
    for client in clients:
        injector.attach(client)
    try:
        found = scenario.run(f"s{number}", injector, clock)
    except BaseException as exc:  # (a crash escaping the source's model)
        found = [f"the schedule itself failed: {exc!r}"]
    finally:
        for client in clients:
            Injector.detach(client)
    report.schedules += 1
    report.faults += len(injector.injected)
    report.apis |= injector.apis
    report.violations += [
        f"[{', '.join(map(str, faults)) or 'no fault'}] {v} (injected: {injector.injected})"
        for v in found
    ]


def main(argv: Iterable[str] = sys.argv[1:]) -> int:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path[:0] = [str(root), str(root / "examples" / "etl")]  # the example transforms
    os.environ["LOG_LEVEL"] = "ERROR"  # a schedule's handlers log every call: keep quiet
    os.environ["METRICS_DISABLED"] = "1"  # and write a metric line per event
    args = list(argv)
    explored = all_scenarios()
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
        for violation in report.violations[:10]:
            print(f"  {violation}")
        failed += len(report.violations)
    print(f"explored {total} schedules, {failed} violations")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
