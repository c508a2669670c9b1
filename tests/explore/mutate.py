"""The mutation tier: plant each defect of the catalogue (tests/explore/mutants.py) in a
scratch copy of the repository, run the explorer tier there as CI runs it, and count the
defects it finds. A mutant the explorer lets through fails the tier.

    python -m tests.explore.mutate                 # every mutant (bash scripts/mutate)
    python -m tests.explore.mutate NAME [NAME...]  # these
    python -m tests.explore.mutate --share I/N     # every N-th mutant from the I-th

Each mutant is one exact replacement in one file (its `old` text must be there exactly
once: a catalogue that no longer matches the code fails, rather than silently testing
nothing). The scratch copy imports its own `exactly_once` (a link tree to its own
sources, first on PYTHONPATH), so the installed package never stands in for the mutant.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.explore.mutants import CATALOGUE, Mutant

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".git", ".venv", ".localstack", ".pulumi-local", "build", "node_modules", ".mypy_cache"}
SKIP |= {".ruff_cache", ".pytest_cache", "__pycache__"}
# the package's folders, as pyproject.toml maps them into exactly_once
PACKAGE = {"__init__.py": "package/__init__.py", "py.typed": "package/py.typed"}
PACKAGE |= {"components": "components", "handlers": "handlers", "ops": "ops"}


@dataclasses.dataclass
class Verdict:
    mutant: Mutant
    killed: bool
    by: list[str]  # the tests that failed
    seconds: float
    detail: str = ""


def scratch_copy(into: Path) -> Path:
    """The repository's sources (no venvs, no build output) under `into`, and a link tree
    that makes them the `exactly_once` package."""
    work = into / "repo"
    shutil.copytree(ROOT, work, ignore=lambda _, names: [n for n in names if n in SKIP])
    site = into / "site" / "exactly_once"
    site.mkdir(parents=True)
    for name, source in PACKAGE.items():
        (site / name).symlink_to(work / source)
    return work


def plant(work: Path, mutant: Mutant) -> None:
    path = work / mutant.path
    text = path.read_text()
    found = text.count(mutant.old)
    if found != 1:
        raise LookupError(f"{mutant.name}: its text is in {mutant.path} {found} times, not once")
    path.write_text(text.replace(mutant.old, mutant.new))


def judge(mutant: Mutant, timeout: float = 900, replays_first: bool = False) -> Verdict:
    """The explorer tier, in a scratch copy with `mutant` planted: killed if a test fails.
    The exploration first, then the mutant's kept replays (what the whole catalogue
    reports: found by the schedules, or only by a pinned replay, as `by` names);
    `replays_first`, the kept replays first (CI's rotating share asks only whether it is
    found, and a replay answers in seconds)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as scratch:
        work = scratch_copy(Path(scratch))
        try:
            plant(work, mutant)
        except LookupError as exc:  # the catalogue no longer matches the code: a failure
            return Verdict(mutant, False, [], 0.0, str(exc))
        env = {
            **os.environ,
            "PYTHONPATH": f"{Path(scratch) / 'site'}:{work}",
            "EXPLORE_STOP_AT_FIRST": "1",  # the question is only whether it is found
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        command = [
            sys.executable,
            "-m",
            "pytest",
            "tests/explore/test_explore.py",
            "-m",
            "explore",
            "-q",
            "-x",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-k",
        ]
        # the exploration, then the mutant's kept replays (a kept replay names the mutant
        # whose defect it finds): `by` says which found it
        selections = [mutant.selection, f"once_found and {mutant.name}"]
        if replays_first:
            selections.reverse()
        for selection in selections:
            try:
                done = subprocess.run(
                    [*command, selection],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                return Verdict(mutant, False, [], time.monotonic() - started, "timed out")
            if done.returncode == 1:  # found (a failed test), or broken: judged below
                break
    seconds = time.monotonic() - started
    failed = re.findall(r"^FAILED (\S+)", done.stdout, re.M)
    if done.returncode == 1 and failed:
        found = re.search(r"^E\s+AssertionError: (.*)$", done.stdout, re.M)
        return Verdict(mutant, True, failed, seconds, found.group(1)[:300] if found else "")
    # (5: pytest found no kept replay of the mutant, after an exploration that passed)
    detail = "" if done.returncode in (0, 5) else done.stdout[-2000:] + done.stderr[-2000:]
    return Verdict(mutant, False, [], seconds, detail)


def main(argv: list[str]) -> int:
    chosen = list(CATALOGUE)
    if argv[:1] == ["--share"]:
        part, parts = (int(x) for x in argv[1].split("/"))
        chosen = chosen[part - 1 :: parts]
    elif argv:
        unknown = set(argv) - {m.name for m in CATALOGUE}
        if unknown:
            print(f"no such mutant: {sorted(unknown)}")
            return 2
        chosen = [m for m in CATALOGUE if m.name in argv]
    workers = int(os.environ.get("MUTATE_WORKERS", os.cpu_count() or 1))
    verdicts: list[Verdict] = []
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for verdict in pool.map(judge, chosen):
            verdicts.append(verdict)
            mark = "killed  " if verdict.killed else "SURVIVED"
            by = ", ".join(t.split("::")[-1] for t in verdict.by[:2])
            print(f"{mark} {verdict.mutant.name:32} {verdict.seconds:4.0f} s  {by}", flush=True)
            if verdict.detail:
                print("    " + verdict.detail.strip().replace("\n", "\n    "), flush=True)
    killed = sum(v.killed for v in verdicts)
    print(
        f"mutation tier: {killed} of {len(verdicts)} killed ({100 * killed / len(verdicts):.0f}%)"
    )
    return 0 if killed == len(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
