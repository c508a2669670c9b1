"""Hooks of the whole run, loaded by every test process (pytest-xdist's controller, which
collects nothing, included): the e2e run's start and end (tests/e2e/session.py), the
tier's order (heaviest first), and the fault explorer's figures, printed at the end
whichever process explored."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e import session as e2e

IAM_REPORT = pytest.StashKey[dict[str, Any]]()
EXPLORED: list[str] = []  # the explorer's figures, in the order its tests ended


def _starts_the_run(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput")  # an xdist worker has its controller's input


def pytest_configure(config: pytest.Config) -> None:
    if _starts_the_run(config):
        e2e.begin()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The heaviest tests first (`heavy(seconds)`), the rest as collected. pytest-xdist's
    worksteal hands each worker a contiguous share and lets an idle one take the end of
    another's: with the long explorer parts at the front, the tier ends on short tests,
    both workers busy to the end, not one waiting on the other's last long part."""

    def weight(item: pytest.Item) -> float:
        marker = item.get_closest_marker("heavy")
        return float(marker.args[0]) if marker else 0.0

    items.sort(key=weight, reverse=True)  # (stable: the rest keep their order)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The explorer's figures (what its tests print), kept for the summary: a worker's
    output reaches the controller only inside its reports."""
    if report.when == "call" and "explore" in report.keywords:
        for name, text in report.sections:
            if "stdout" in name:
                EXPLORED.extend(line for line in text.splitlines() if line.strip())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The e2e run's end: an IAM denial no test expected fails the run, whatever the tests
    said; then the stack is destroyed."""
    from tests.e2e import iam
    from tests.e2e.conftest import localstack_healthy

    config = session.config
    if not _starts_the_run(config) or not e2e.deployed_by_this_run():
        return
    if localstack_healthy():
        found = iam.report()
        config.stash[IAM_REPORT] = found
        if iam.unexpected(found) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    try:
        e2e.finish()
    except RuntimeError as exc:
        print(exc)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if EXPLORED:
        terminalreporter.section("fault explorer")
        for line in EXPLORED:
            terminalreporter.write_line(line)
    found = config.stash.get(IAM_REPORT, None)
    if found is None:
        return
    from tests.e2e import iam

    terminalreporter.section("IAM enforcement (LocalStack)")
    for line in iam.summary(found):
        terminalreporter.write_line(line)
    if iam.unexpected(found):
        terminalreporter.write_line("FAILED: IAM denied calls no test expected (above)", red=True)
