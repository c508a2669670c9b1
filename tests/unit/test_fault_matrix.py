"""docs/fault-matrix.md names, in every cell, the test that proves it: each must exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "docs" / "fault-matrix.md"
PATTERNS = 6  # the five, and pattern 1 with a durable function
FAULTS = (
    "transient",
    "permanent",
    "crash after the effect",
    "concurrent duplicate",
    "duplicate after completion",
    "after the record's retention",
    "slow arrival",
    "lost answer",
    "redrive",
)


def defined_tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_cell_of_the_matrix_is_filled_and_names_real_tests() -> None:
    rows = [line for line in MATRIX.read_text().splitlines() if line.startswith("| ")]
    body = {row.split("|")[1].strip(): row.split("|")[2:-1] for row in rows[1:]}
    assert set(body) == set(FAULTS)
    named = 0
    for fault, cells in body.items():
        assert len(cells) == PATTERNS, fault
        for cell in cells:
            assert cell.strip(), f"{fault}: an empty cell"
            for tier, module, test in re.findall(r"`(u: |x: )?(test_\w+)::(test_\w+)`", cell):
                folder = {"u: ": "unit", "x: ": "explore"}.get(tier, "e2e")
                assert test in defined_tests(ROOT / "tests" / folder / f"{module}.py"), (
                    fault,
                    test,
                )
                named += 1
    assert named >= 30
