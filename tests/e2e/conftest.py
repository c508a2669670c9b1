"""E2E fixtures: one deployment of the `local` stack to LocalStack per session.

The stack is deployed through `python -m deploy up --stack local`, the same entry
point users run, so these tests exercise the real components, never a hand-built
copy. Without LocalStack they fail with a clear message; they are never skipped.

LocalStack enforces IAM (tests/e2e/iam.py): the run ends with its report, and fails
on any denial no test declared with `iam.expect_denials`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import iam
from tooling.clients import ENDPOINT

ROOT = Path(__file__).resolve().parents[2]
STACK_DEPLOYED: list[bool] = []  # set once the session deploys: then IAM's report counts


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


def _localstack_healthy() -> bool:
    try:
        with urllib.request.urlopen(f"{ENDPOINT}/_localstack/health", timeout=3) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def stack() -> Iterator[dict[str, Any]]:
    if not _localstack_healthy():
        pytest.fail(
            f"LocalStack is not answering at {ENDPOINT}: start it with `bash localstack/up` "
            "(or run the whole suite with `bash scripts/test`, which does)",
            pytrace=False,
        )
    iam.reset()  # the report covers this session only
    STACK_DEPLOYED.append(True)
    deploy = [sys.executable, "-m", "deploy"]
    result = subprocess.run(
        [*deploy, "up", "--stack", "local"], cwd=ROOT, capture_output=True, text=True
    )
    if result.returncode != 0:
        subprocess.run([*deploy, "destroy", "--stack", "local"], cwd=ROOT, capture_output=True)
        pytest.fail(f"deploy failed:\n{result.stdout}\n{result.stderr}", pytrace=False)
    outputs = json.loads((ROOT / ".pulumi-local" / "local.outputs.json").read_text())
    try:
        yield outputs
    finally:
        if os.environ.get("KEEP_STACK") != "1":
            subprocess.run([*deploy, "destroy", "--stack", "local"], cwd=ROOT, check=True)


@pytest.fixture(scope="session")
def scheduler(stack: dict[str, Any]) -> dict[str, Any]:
    """The scheduler, once its stream starter is live (see `tooling.clients.scheduler_live`)."""
    from tooling.clients import scheduler_live

    scheduler_live(stack["scheduler"])
    return stack["scheduler"]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """An IAM denial no test expected fails the run, whatever the tests said."""
    if not STACK_DEPLOYED or not _localstack_healthy():
        return
    found = iam.report()
    session.config.stash[IAM_REPORT] = found
    if iam.unexpected(found) and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    found = config.stash.get(IAM_REPORT, None)
    if found is None:
        return
    terminalreporter.section("IAM enforcement (LocalStack)")
    for line in iam.summary(found):
        terminalreporter.write_line(line)
    if iam.unexpected(found):
        terminalreporter.write_line("FAILED: IAM denied calls no test expected (above)", red=True)


IAM_REPORT = pytest.StashKey[dict[str, Any]]()
