"""examples/python installed exactly as its README says (a fresh venv, `pip install -r
requirements.txt` in that folder) and its program run under Pulumi mocks (#37)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.package.test_wheel import COMPONENT_NAMES, ROOT, run_program, users_project


@pytest.mark.heavy(30)
def test_the_python_example_installs_as_its_readme_says_and_deploys(tmp_path: Path) -> None:
    example = ROOT / "examples" / "python"
    readme = (example / "README.md").read_text()
    assert "venv/bin/pip install -r requirements.txt" in readme
    # GIVEN a fresh venv, as the README makes one
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    # WHEN the example's requirements are installed from its folder
    done = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            "requirements.txt",
        ],
        cwd=example,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # THEN the package is installed (not linked to the checkout) and the program deploys
    # every component under mocks
    where = subprocess.run(
        [
            python,
            "-c",
            "import exactly_once; print(exactly_once.__file__, exactly_once.__version__)",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.split()
    assert Path(where[0]).is_relative_to(venv) and where[1] != "unknown"
    result = run_program(None, users_project(tmp_path), python=python)
    for component in COMPONENT_NAMES:
        assert f"exactly-once:index:{component}" in result["types"]
