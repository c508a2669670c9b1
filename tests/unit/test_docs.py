"""Every Python sample in docs/ runs under Pulumi mocks and declares resources."""

from __future__ import annotations

import re

import pytest

from tests.unit.pulumi_harness import ROOT, run

BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
SAMPLES = [
    pytest.param(code, id=f"{path.name}#{n}")
    for path in sorted((ROOT / "docs").glob("*.md"))
    for n, code in enumerate(BLOCK.findall(path.read_text()))
]


def test_the_docs_have_samples() -> None:
    assert len(SAMPLES) >= 5


@pytest.mark.parametrize("code", SAMPLES)
def test_sample_runs(code: str) -> None:
    mocks = run(lambda: exec(compile(code, "<docs>", "exec"), {"__name__": "__docs__"}))
    assert [r for r in mocks.resources if r.custom], "the sample declared no resources"
