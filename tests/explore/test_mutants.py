"""The mutation tier in CI: a rotating share of the catalogue (tests/explore/mutants.py),
by the commit under test, each defect planted in a scratch copy and run against the
explorer tier; every one must be found. `bash scripts/mutate` runs the whole catalogue."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.explore import mutate
from tests.explore.mutants import CATALOGUE

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
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return int(head[:8], 16) % SHARES if head else 0


def test_a_rotating_share_of_the_mutation_catalogue_is_found() -> None:
    index = share()
    chosen = CATALOGUE[index::SHARES]
    verdicts = [mutate.judge(mutant) for mutant in chosen]
    lines = [
        f"{'killed' if v.killed else 'SURVIVED'} {v.mutant.name} ({v.seconds:.0f} s)"
        for v in verdicts
    ]
    print(f"mutation share {index + 1}/{SHARES}: " + "; ".join(lines))
    assert all(v.killed for v in verdicts), "\n".join(
        f"{v.mutant.name}: {v.mutant.defect}\n{v.detail}" for v in verdicts if not v.killed
    )
