"""One e2e run over one deployment, whether its tests run in one process or side by side in
several (pytest-xdist's workers, `bash scripts/test` runs them so).

- The run has an id, made by the process that starts it (the xdist controller, or pytest
  alone) and inherited by its workers (`EXACTLY_ONCE_TEST_RUN`; set it beforehand to make
  several pytest sessions one run: scripts/test does).
- The first process to need the stack deploys it, under a file lock; the others read its
  outputs. The process that started the session gives the IAM verdict and destroys the
  stack at its end (`finish`; not with KEEP_STACK=1), after every worker is done.
- Tests share one LocalStack and one stack. Most work on keys of their own and run side by
  side; a test marked `exclusive` changes what others rely on (takes a permission from a
  role, redrives a whole DLQ) or counts what they all make, and runs alone (`turn`: a
  readers-writer lock with the writer first in line, over two lock files). scripts/test
  runs those first, in a session of their own, then the others side by side.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[2]
STATE = ROOT / ".pulumi-local" / "e2e"
RUN_VARIABLE = "EXACTLY_ONCE_TEST_RUN"
DEPLOYED = STATE / "deployed"  # the id of the run whose deploy is standing
OUTPUTS = ROOT / ".pulumi-local" / "local.outputs.json"
EXPECTED = STATE / "iam-expected.jsonl"  # the denials tests provoked, from every worker


def begin() -> None:
    """In the process that starts the session: the run's id (a new one, unless the session
    is part of a run), for the workers it spawns."""
    os.environ.setdefault(RUN_VARIABLE, uuid.uuid4().hex)


def run_id() -> str:
    return os.environ.get(RUN_VARIABLE, "")


@contextlib.contextmanager
def _locked(name: str, mode: int = fcntl.LOCK_EX) -> Iterator[TextIO]:
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / name, "a") as handle:
        fcntl.flock(handle, mode)
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _deploy(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deploy", command, "--stack", "local"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def stack(reset_iam: Any) -> tuple[dict[str, Any] | None, str]:
    """The run's deployment's outputs, deploying it if no process of this run has: (outputs,
    "") or (None, what the failed deploy printed)."""
    with _locked("deploy.lock"):
        if not DEPLOYED.exists() or DEPLOYED.read_text() != run_id():
            DEPLOYED.unlink(missing_ok=True)
            EXPECTED.unlink(missing_ok=True)
            reset_iam()  # the report covers this run only
            result = _deploy("up")
            if result.returncode != 0:
                _deploy("destroy")
                return None, f"{result.stdout}\n{result.stderr}"
            DEPLOYED.write_text(run_id())
    return json.loads(OUTPUTS.read_text()), ""


def deployed_by_this_run() -> bool:
    return DEPLOYED.exists() and DEPLOYED.read_text() == run_id()


def finish() -> None:
    """The run's end, in the process that started it: the stack destroyed (KEEP_STACK=1
    keeps it)."""
    if not deployed_by_this_run() or os.environ.get("KEEP_STACK") == "1":
        return
    DEPLOYED.unlink()
    result = _deploy("destroy")
    if result.returncode != 0:
        raise RuntimeError(f"destroy failed:\n{result.stdout}\n{result.stderr}")


@contextlib.contextmanager
def turn(alone: bool) -> Iterator[None]:
    """A test's turn: beside the others, or `alone`. A test that wants to run alone waits
    at the gate for the room to empty, and holds the gate meanwhile, so no test enters
    after it (it cannot wait forever behind a stream of others)."""
    with _locked("gate") as gate, open(STATE / "room", "a") as room:
        fcntl.flock(room, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)  # others may come in beside this one
        try:
            yield
        finally:
            fcntl.flock(room, fcntl.LOCK_UN)


def expect(record: dict[str, Any]) -> None:
    """A window of denials a test provoked, for every process of the run to read."""
    with _locked("expected.lock"), EXPECTED.open("a") as out:
        out.write(json.dumps(record) + "\n")


def expected() -> list[dict[str, Any]]:
    with _locked("expected.lock"):
        if not EXPECTED.exists():
            return []
        return [json.loads(line) for line in EXPECTED.read_text().splitlines() if line]
