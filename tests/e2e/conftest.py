"""E2E fixtures: one deployment of the `local` stack to LocalStack per run.

The stack is deployed through `python -m deploy up --stack local`, the same entry
point users run, so these tests exercise the real components, never a hand-built
copy. Without LocalStack they fail with a clear message; they are never skipped.
Tests run side by side (pytest-xdist) over the one deployment; tests/e2e/session.py
says how, and which run alone (`exclusive`).

LocalStack enforces IAM (tests/e2e/iam.py): the run ends with its report, and fails
on any denial no test declared with `iam.expect_denials` (tests/conftest.py).
"""

from __future__ import annotations

import itertools
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import iam, session
from tooling.clients import ENDPOINT


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> Iterator[None]:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
    # The scheduler's tests last: its stream starter goes live a while after the deploy
    # (`scheduler_live`), and the others need not wait for it.
    items.sort(key=lambda item: "scheduler" in getattr(item, "fixturenames", ()))
    yield  # `-m` and `-k` deselect what does not run
    # Then, of what runs, those that wait minutes on AWS's clocks (`waits`) first, each on a
    # worker of its own: started at once they end with the run, not after it. scripts/test
    # hands tests out in this order (`--dist load --maxschedchunk 1`: two to each worker,
    # then one at a time as workers free up), so each of them comes with one other test.
    waits = [item for item in items if item.get_closest_marker("waits")]
    others = [item for item in items if not item.get_closest_marker("waits")]
    items[:] = [test for pair in itertools.zip_longest(waits, others) for test in pair if test]


def localstack_healthy() -> bool:
    try:
        with urllib.request.urlopen(f"{ENDPOINT}/_localstack/health", timeout=3) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def stack() -> dict[str, Any]:
    if not localstack_healthy():
        pytest.fail(
            f"LocalStack is not answering at {ENDPOINT}: start it with `bash localstack/up` "
            "(or run the whole suite with `bash scripts/test`, which does)",
            pytrace=False,
        )
    outputs, failure = session.stack(iam.reset)
    if outputs is None:
        pytest.fail(f"deploy failed:\n{failure}", pytrace=False)
    return outputs


@pytest.fixture(autouse=True)
def turn(request: pytest.FixtureRequest) -> Iterator[None]:
    """Beside the other tests, or alone when marked `exclusive` (session.turn)."""
    with session.turn(alone=request.node.get_closest_marker("exclusive") is not None):
        yield


@pytest.fixture(scope="session")
def scheduler(stack: dict[str, Any]) -> dict[str, Any]:
    """The scheduler, once its stream starter is live (see `tooling.clients.scheduler_live`)."""
    from tooling.clients import scheduler_live

    scheduler_live(stack["scheduler"])
    return stack["scheduler"]
