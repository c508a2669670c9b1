"""The explorer's scenarios: each pattern's handlers, run the way their sources run them,
under a schedule of faults, then checked against what the pattern promises
(tests/explore/scenarios/base.py says how)."""

from __future__ import annotations

from tests.explore.scenarios.api_starter import ApiStarter
from tests.explore.scenarios.base import Delivery, Scenario, World
from tests.explore.scenarios.etl import Etl
from tests.explore.scenarios.resumable import ResumableDurableScenario, ResumableScenario
from tests.explore.scenarios.scheduler import SchedulerScenario
from tests.explore.scenarios.starter import StarterDurable, StarterSteps

__all__ = [
    "ApiStarter",
    "Delivery",
    "Etl",
    "ResumableDurableScenario",
    "ResumableScenario",
    "Scenario",
    "SchedulerScenario",
    "StarterDurable",
    "StarterSteps",
    "World",
    "every",
]


def every() -> list[Scenario]:
    from exactly_once.handlers import etl

    return [
        StarterSteps("REJECT_DUPLICATE"),
        StarterSteps("ALLOW_DUPLICATE_FAILED_ONLY"),
        StarterDurable(),
        *[Etl(strategy) for strategy in etl.STRATEGIES],
        SchedulerScenario(reserved=True),
        SchedulerScenario(cancel=True),
        SchedulerScenario(slots=True, messages=2),
        ResumableScenario(),
        ResumableDurableScenario(),
        ApiStarter(),
    ]
