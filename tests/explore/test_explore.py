"""The fault explorer as a test tier (marker `explore`, no LocalStack): every scenario,
every single fault that applies at every AWS call, and EXPLORE_COUNT seeded random
multi-fault schedules each (CI: 150); `bash scripts/explore N` runs more. With
EXPLORE_STOP_AT_FIRST=1 (the mutation tier) a scenario stops at its first violation."""

from __future__ import annotations

import os
import random
import re
from typing import Any

import pytest

from exactly_once.handlers.etl import Strategy
from tests.explore import explorer, scenarios
from tests.explore.faults import Fault
from tests.explore.mutants import CATALOGUE

pytestmark = pytest.mark.explore
COUNT = int(os.environ.get("EXPLORE_COUNT", "150"))
STOP_AT_FIRST = os.environ.get("EXPLORE_STOP_AT_FIRST") == "1"


@pytest.fixture(autouse=True)
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    # (the schedules' own ERROR lines, a failed sweep's among them, are the faults injected:
    # thousands a run in CI's log; the verdicts say what matters, and a replay shows them)
    monkeypatch.setenv("LOG_LEVEL", "CRITICAL")
    monkeypatch.setenv("METRICS_DISABLED", "1")


# A part's seconds on a quiet core at CI's count (measured at the commit that wrote them):
# the tier's order, heaviest first (tests/conftest.py), and nothing else.
SECONDS = {
    "3 scheduler": 52,
    "4 resumable (step-functions)": 45,
    "3 scheduler, slot clock": 35,
    "3 scheduler, cancelled anywhere": 20,
    "4 resumable (durable-function)": 19,
    "5 ETL (control-record)": 15,
    "5 ETL (powertools)": 12,
}
PARTS = [
    pytest.param(
        scenario,
        (index, scenario.parts),
        id=f"{scenario.name} [{index + 1}/{scenario.parts}]",
        marks=pytest.mark.heavy(SECONDS.get(scenario.name, 8)),
    )
    for scenario in explorer.all_scenarios()
    for index in range(scenario.parts)
]


@pytest.mark.parametrize(("scenario", "part"), PARTS)
def test_no_schedule_of_faults_breaks_exactly_once(
    scenario: scenarios.Scenario, part: tuple[int, int]
) -> None:
    report = explorer.explore(scenario, COUNT, stop_at_first=STOP_AT_FIRST, part=part)
    print(report.line())
    assert report.violations == [], "\n".join(report.violations[:20])
    parts = part[1]
    # every single fault that applies at every call, in one part or another, and the rest
    assert report.calls > 0 and report.schedules * parts > report.calls * 5 + COUNT
    assert report.faults * parts >= report.calls * 5


# Schedules that found a defect once (the mutation tier's, or scripts/explore's), kept:
# (scenario, faults, the schedule's number, the defect). Each replays exactly at its number;
# each slot one finds its defect re-planted (the mutant named in it).
def slots() -> scenarios.Scenario:
    return scenarios.SchedulerScenario(slots=True, messages=2)


FOUND: list[tuple[Any, str, int, str]] = [
    (
        lambda: scenarios.SchedulerScenario(cancel=True),
        "fail@8,fail@9",
        1,
        "MarkDone and RecordDone both failed once: the message stayed FIRING after it fired",
    ),
    (
        slots,
        "lost@5",
        48,
        "slot defect 1: a retried Fire claimed as its first attempt and took over live claims",
    ),
    (
        slots,
        "orphan@14,stale@24",
        175,
        "slot defect 2: a message the lagging index listed twice was delivered twice",
    ),
    (
        slots,
        "lostall@11,stale@25",
        597,
        "slot defect 3: max_attempts 1 is two sends: the SDK sent a target invoke again",
    ),
    (
        slots,
        "lostall@10",
        24,
        "slot defect 4 (slot-claim-error-ends-invocation): a failed claim failed the "
        "invocation, its other claims left FIRING",
    ),
    (
        lambda: scenarios.ResumableScenario(),
        "dup@13,dup@20,switch@30,switch@32",
        1719,
        "explorer: a second start of a running execution's name ran the machine again "
        "(AWS starts no second run of a name)",
    ),
    (
        lambda: scenarios.ResumableScenario(),
        "twin@12,switch@16",
        1935,
        "resumable (step-functions, resumable-takeover-unfenced): a failed holder redriven "
        "while a re-run took its key over saved s2 between the re-run's read and its claim; "
        "both ran s3",
    ),
    (
        lambda: scenarios.ResumableScenario(),
        "twin@9,switch@12",
        1,
        "resumable (step-functions, resumable-redriven-holder-ended): a redriven holder that "
        "saved s2 after its stopDate was taken for ended (DescribeExecution still FAILED); "
        "both ran s3",
    ),
    (
        lambda: scenarios.ResumableScenario(),
        "timeout@1,twin@4,switch@7",
        1,
        "resumable (step-functions, resumable-load-unstamped): a run failed at its Load and "
        "redriven there took its own lease again unseen (the AWS review); a re-run took the "
        "key over: both ran s1",
    ),
    (
        lambda: scenarios.Etl(Strategy.DETERMINISTIC),
        "twin@0,twin@2",
        1348,
        "explorer: a twin's own twin ran under the twin's process name (its concurrent "
        "rewrite was judged a sequential one)",
    ),
    (
        slots,
        "fail@15,fail@18",
        786,
        "slot defect 5 (sweep-restarts-unrecorded): both tries of a final write failed "
        "(StatusNotRecorded); the sweep restarted it",
    ),
    (
        slots,
        "lost@14,timeout@16",
        3703,
        "explorer: a timeout of a worker nobody waited for (its answer lost) moved the "
        "clock to its deadline, no fault recorded: the slot's retry fired 846 s late",
    ),
    (
        slots,
        "dup@15,timeout@24,switch@28",
        940,
        "explorer: a timeout elsewhere moved the one clock past a slot restart's deadline; "
        "its ClaimsFailed (claims given back in time) was judged a failure with no fault",
    ),
    (
        slots,
        "timeout@12,stale@15",
        151,
        "slot defect 6 (slot-resends-blind): a Fire's retry took over a claim whose "
        "claimant timed out after sending, and sent again to a target that drops no "
        "redelivery",
    ),
    (
        slots,
        "lost@11",
        26,
        "slot defect 7 (slot-budget-unbounded): a send whose answer was lost was resent "
        "past the send budget",
    ),
    (
        lambda: scenarios.SchedulerScenario(),
        "crash@7",
        5,
        "slot defect 8: a claimant died after its FIFO send; the restart 16 minutes on sent "
        "it again, past SQS's deduplication interval (since leases last a minute, its retry "
        "takes it up inside the interval: the planted defect is held by unit tests now)",
    ),
    (
        slots,
        "crash@16",
        1,
        "slot defect 9 (slot-claims-held-to-invocation-end, finding 4 of the targets "
        "issue): a worker died after its claims; they were held to its end, its slot's "
        "retry could not wait that long, and the message fired 1,033 s late",
    ),
    (
        slots,
        "dup@15",
        12,
        "slot defect 10 (slot-lease-not-renewed): a restart took over the claim of a live "
        "claimant waiting 100 s for its target, its lease never renewed: the message ended "
        "UNKNOWN though its target answered",
    ),
    (
        lambda: scenarios.SchedulerScenario(),
        "timeout@9,stale@19",
        220,
        "slot defect 11 (found by the Step Functions target model): a claimant timed out "
        "reading an EXPRESS target's type; its retry took the counted send for one that "
        "may have run and ended the message UNKNOWN, where none reaches an EXPRESS machine",
    ),
    (
        lambda: scenarios.SchedulerScenario(),
        "lost@9,switch@11,switch@16,dup@127",
        346,
        "slot defect 12 (the review of defect 11): an EXPRESS target's DescribeStateMachine "
        "answer lost was classified as a send that may have run, spending the budget: the "
        "message ended UNKNOWN, nothing ever sent",
    ),
    (
        lambda: scenarios.SchedulerScenario(),
        "fail@10,fail@11",
        229,
        "explorer: a slow target's UNKNOWN, its final write failing both tries, was judged "
        "left FIRING (an unrecorded final write of any status is the sweep's to alarm)",
    ),
    (
        lambda: scenarios.SchedulerScenario(reserved=True),
        ",".join(f"fail@{n}" for n in (24, 25, *range(29, 46), *range(47, 64, 2))),
        599,
        "explorer (scripts/explore 24000): a slot that could not count its send gave the "
        "message back to STANDBY, and every sweep after that failed; the excuse for sweeps "
        "that all failed counted the first one, which ran before",
    ),
    (
        lambda: scenarios.SchedulerScenario(reserved=True),
        "fail@10,fail@11",
        444,
        "explorer (scripts/explore 8000): an EXPRESS target's refusal, its final write "
        "failing both tries, was judged a violation (left FIRING for the Overdue alarm, as "
        "any final write that cannot be recorded)",
    ),
]


# ...and, for the slot mutants whose kept replay no longer finds them once the slot's first
# read and its workers ran side by side (84b4bbb), the first schedule the exploration now
# finds each by
FOUND += [
    (slots, "twin@5", 13, "slot-claim-any-firing: ended UNKNOWN with no send lost"),
    (slots, "lostall@13", 31, "slot-claim-error-ends-invocation: fired 64 s late"),
    (slots, "fail@15", 35, "slot-record-once: ended FIRING, not DONE"),
    (slots, "crash@3", 9, "slot-resends-blind: fired twice to a target dropping none"),
    (slots, "timeout@16", 38, "slot-takeover-ignores-earlier-sends: fired twice"),
    (slots, "crash@3", 9, "slot-budget-unbounded: fired 3 times (allowed 2)"),
    (slots, "twin@5,crash@19", 115, "slot-claims-held-to-invocation-end: 1031 s late"),
    (slots, "twin@5,crash@18", 114, "sweep-leaves-dead-claims: ended FIRING, not DONE"),
]
FOUND += [
    (
        lambda: scenarios.Etl(Strategy.CONTROL_RECORD),
        "fail@8,lost@9",
        1268,
        "etl-own-lock-is-anothers (scripts/explore 100000): the newer version's retry took the "
        "lock, lost the answer; the SDK's resend found its own lock and it failed InProgress",
    ),
]


def plain() -> scenarios.Scenario:
    return scenarios.SchedulerScenario(reserved=True)  # (as scenarios.every() has it)


def cancelled() -> scenarios.Scenario:
    return scenarios.SchedulerScenario(cancel=True)


# ...and, for each mutant of the catalogue that no clean run finds, the first schedule the
# exploration found it by (scripts/mutate, at the commit that added the line): CI's share of
# the catalogue replays these first, in seconds, where the exploration takes minutes
# (tests/explore/mutate.py: judge). Each is the mutant's name, then what it did.
FOUND += [
    (
        lambda: scenarios.StarterSteps("REJECT_DUPLICATE"),
        "throttle@1",
        11,
        "starter-error-is-duplicate: a throttled start was answered DUPLICATE of a run "
        "that never ran",
    ),
    *[
        (
            lambda strategy=strategy: scenarios.Etl(strategy),
            "twin@1",
            17,
            f"{name}: a twin delivery's second output (or its 412 taken for a failure)",
        )
        for strategy, name in (
            (Strategy.CONDITIONAL_WRITE, "etl-put-without-if-none-match"),
            (Strategy.CONDITIONAL_WRITE, "etl-412-is-failure"),
            (Strategy.CONTROL_RECORD, "etl-lock-unconditional"),
            (Strategy.CONTROL_RECORD, "etl-lock-outlives-nothing"),
        )
    ],
    (cancelled, "dup@4", 23, "claim-unconditional: cancelled (200) yet ended DONE, fired"),
    (cancelled, "twin@7", 33, "cancel-after-claim: cancelled (200) yet fired"),
    (plain, "twin@9", 42, "register-overwrites: fired twice to a target dropping none"),
    (slots, "twin@10", 25, "slot-claim-any-firing: ended UNKNOWN with no send lost"),
    (slots, "crash@3", 9, "slot-claimant-without-attempt: fired 3 times (allowed 2)"),
    (slots, "orphan@14,stale@21", 161, "slot-members-twice: one worker sent it twice"),
    (slots, "crash@3", 9, "slot-sdk-resends-deliveries: fired twice to a target dropping none"),
    (slots, "throttle@18,twin@44,twin@60", 227, "slot-record-once: ended FIRING, not DONE"),
    (slots, "lostall@4,stale@12", 93, "slot-no-second-read: fired 71 s late, none excused"),
    (slots, "", 0, "stream-own-execution-for-joined: a late stream record started its own"),
    (slots, "orphan@16", 39, "slot-retry-reads-standby-only: ended FIRING, not DONE"),
    (slots, "timeout@12,stale@81", 144, "slot-takeover-ignores-earlier-sends: fired twice"),
    (plain, "error@2", 10, "slot-express-target-started: an EXPRESS target ended DONE"),
    (plain, "lostall@10", 45, "slot-execution-exists-is-failure: ended FAILED, not DONE"),
    (plain, "error@6", 28, "slot-bus-internal-failure-refused: put on the bus twice"),
    (slots, "twin@5,crash@15", 114, "sweep-leaves-dead-claims: ended FIRING, not DONE"),
    (plain, "crash@9,stale@32", 227, "sweep-moves-any-status: a stale RESERVED entry revived it"),
    (
        slots,
        "stale@6",
        109,
        "slot-second-read-behind-first (finding 5 of the targets issue, 94d2084's reads): the "
        "first read missed a message, its slow delivery held up the second: 810 s late",
    ),
    (
        plain,
        "stale@16,fail@18",
        276,
        "sweep-firing-pass-unisolated (finding 6 of the targets issue, 94d2084's FIRING "
        "pass): a look failing after a stale FIRING entry ended the run with no Overdue datum",
    ),
    (plain, "throttle@12", 53, "sweep-overdue-only-when-finished: a run reported no Overdue"),
    (
        lambda: scenarios.ResumableScenario(),
        "twin@14",
        74,
        "resumable-save-without-lease: step s3 ran twice",
    ),
    (
        lambda: scenarios.ResumableScenario(),
        "dup@2",
        19,
        "resumable-holder-always-ended: step s1 ran twice",
    ),
    (
        lambda: scenarios.ResumableDurableScenario(),
        "lostall@1",
        12,
        "durable-step-client-resends: step s1 ran 5 times (allowed 2)",
    ),
    (
        lambda: scenarios.ApiStarter(),
        "lost@1",
        8,
        "template-long-name-cut: a key too long to name (27 é, encoded) was started: its "
        "retry answered 409",
    ),
    (
        lambda: scenarios.ApiStarter(),
        "",
        0,
        "template-exists-is-started: a redelivery was answered 200 (started), no execution",
    ),
    (
        lambda: scenarios.ApiStarter(),
        "throttle@0",
        2,
        "template-retry-suffix-verbatim: attempt 1 of s2-a was 409, s2-a-r1's execution",
    ),
    (
        lambda: scenarios.ApiStarter(),
        "dup@0",
        5,
        "template-input-without-request-id: a request and its dup were both answered 200",
    ),
    (
        lambda: scenarios.ApiStarter(),
        "error@1",
        6,
        "template-refusal-under-the-keys-name: a bad X-Attempt answered the key's 409",
    ),
    (
        lambda: scenarios.Etl(Strategy.CONTROL_RECORD),
        "lost@7",
        60,
        "etl-release-any-owner: the newer version's release, resent (its answer lost), "
        "dropped the lock its duplicate took meanwhile; the retry transformed beside it",
    ),
    (
        lambda: scenarios.Etl(Strategy.CONTROL_RECORD),
        "lostall@7",
        62,
        "etl-owner-is-request-id: a release resent (its answers lost) under the request id "
        "its retry shares dropped the retry's lock; the duplicate transformed beside it",
    ),
    (
        lambda: scenarios.ResumableScenario(),
        "throttle@6",
        44,
        "resumable-describe-error-is-ended: the arriving run's DescribeExecution throttled, "
        "it took the key over from the holder in s1: step s1 ran twice",
    ),
    (
        lambda: scenarios.ResumableDurableScenario(),
        "throttle@4",
        28,
        "durable-describe-error-is-ended: the arriving run's GetDurableExecution throttled, "
        "it took the key over from the holder in s1: step s1 ran twice",
    ),
]
NAMES = [mutant.name for mutant in CATALOGUE]


def named(defect: str) -> str:
    """A kept schedule's test id: the mutant whose defect it finds, where its words before
    the first colon name one (`-k "once_found and <name>"` selects it), else its defect's
    first words."""
    words = re.findall(r"[a-z0-9-]+", defect.split(":")[0])
    return next((word for word in words if word in NAMES), defect[:40])


@pytest.mark.parametrize(
    ("scenario", "faults", "number", "defect"), FOUND, ids=[named(f[3]) for f in FOUND]
)
def test_a_schedule_that_once_found_a_defect_finds_none(
    scenario: Any, faults: str, number: int, defect: str
) -> None:
    assert explorer.replay(scenario(), Fault.parse(faults), number=number) == [], defect


def test_a_schedule_replays_alike_whatever_the_interpreters_random_state() -> None:
    """The handlers' jitter (the slot's back-offs, botocore's retries) is the schedule's
    own: a kept replay meets the same calls in any process (it once found its defect in
    one run and not in the next, the interpreter's `random` seeded afresh each run)."""
    scenario = scenarios.SchedulerScenario(slots=True, messages=2)
    faults = Fault.parse("fail@15,fail@18")  # (a final write and its retry: back-offs)
    runs = []
    for state in (1, 2):
        random.seed(state)
        with explorer._world(scenario) as clients:
            report = explorer.Report(scenario.name)
            calls = explorer._one(scenario, report, clients, 786, faults, 7)
        runs.append([(c.index, c.process, c.operation, c.kind) for c in calls])
    assert runs[0] == runs[1]
