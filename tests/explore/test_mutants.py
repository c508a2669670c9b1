"""The mutation tier in CI: a rotating share of the catalogue (tests/explore/mutants.py),
by the commit under test, each defect planted in a scratch copy and run against the
explorer tier, its kept replays first (the question here is only whether it is found);
every one must be found. `bash scripts/mutate` runs the whole catalogue, the exploration
first (whether the schedules find each, not only a pinned replay)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.explore import mutate
from tests.explore.mutants import CATALOGUE, Mutant

pytestmark = pytest.mark.explore
ROOT = Path(__file__).resolve().parents[2]
SHARES = 8  # CI runs one of these shares of the catalogue, a different one each commit


def test_every_mutant_still_plants_a_defect_in_todays_code() -> None:
    for mutant in CATALOGUE:
        text = (ROOT / mutant.path).read_text()
        assert text.count(mutant.old) == 1, f"{mutant.name}: its text is gone from {mutant.path}"
        assert mutant.old != mutant.new, mutant.name
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE) >= 20


def share() -> int:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:  # no git: the first share (collection must not fail)
        head = ""
    return int(head[:8], 16) % SHARES if head else 0


SHARE = share()  # this commit's, read once


# one test a mutant, so the share's mutants are judged side by side (a late kill, one that
# runs a scenario's every schedule before its pinned replay, no longer holds up the others)
@pytest.mark.parametrize("mutant", CATALOGUE[SHARE::SHARES], ids=lambda m: m.name)
def test_a_rotating_share_of_the_mutation_catalogue_is_found(mutant: Mutant) -> None:
    verdict = mutate.judge(mutant, replays_first=True)
    print(
        f"mutation share {SHARE + 1}/{SHARES}: "
        f"{'killed' if verdict.killed else 'SURVIVED'} {mutant.name} ({verdict.seconds:.0f} s)"
    )
    assert verdict.killed, f"{mutant.name}: {mutant.defect}\n{verdict.detail}"
