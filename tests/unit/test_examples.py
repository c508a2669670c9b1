"""The examples are runnable Pulumi projects: each has its Pulumi.yaml with its runtime,
and its dependencies declared as its language declares them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize(
    ("example", "runtime", "entry"),
    [
        ("python", "python", "__main__.py"),
        ("typescript", "nodejs", "index.ts"),
        ("yaml", "yaml", None),
    ],
)
def test_each_example_is_a_pulumi_project(example: str, runtime: str, entry: str | None) -> None:
    project = yaml.safe_load((EXAMPLES / example / "Pulumi.yaml").read_text())
    declared = project["runtime"]
    assert (declared if isinstance(declared, str) else declared["name"]) == runtime
    if entry:
        assert (EXAMPLES / example / entry).exists()


def test_the_examples_declare_their_dependencies() -> None:
    assert "pulumi-exactly-once[pulumi]" in (EXAMPLES / "python" / "requirements.txt").read_text()
    package = json.loads((EXAMPLES / "typescript" / "package.json").read_text())
    assert "@pulumi/pulumi" in package["dependencies"]
