"""A function's zip is the same bytes whatever venv and Python deploy it (#37): two venvs at
different paths, of two Python minor versions where the machine has them, vendor the same
requirement (one with a console script, whose shebang and RECORD name the venv) and build
byte-identical zips. Real pip, real wheels from the package index."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from exactly_once.components import lambda_asset

REQUIREMENT = ("tabulate==0.9.0",)  # pure Python, with a console script


def minor(python: str) -> int | None:
    """The interpreter's minor version, or None if it does not run (a pyenv shim of a
    version not enabled)."""
    answer = subprocess.run(
        [python, "-c", "import sys, venv; print(sys.version_info.minor)"],
        capture_output=True,
        text=True,
    )
    return int(answer.stdout) if answer.returncode == 0 else None


def pythons() -> list[str]:
    """This interpreter, and one of another minor version (3.11+) if the machine has one
    (on PATH, or installed by pyenv)."""
    candidates = [shutil.which(f"python3.{n}") for n in (11, 12, 13)]
    candidates += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.1*/bin/python3"))]
    for other in filter(None, candidates):
        found = minor(other)
        if found is not None and found >= 11 and found != sys.version_info.minor:
            return [sys.executable, other]
    return [sys.executable]


def test_two_venvs_at_different_paths_build_the_same_zip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    interpreters = pythons()
    built = []
    for index, python in enumerate([interpreters[0], interpreters[-1]]):
        venv = tmp_path / f"user-{index}" / ("deeper/" * index) / "venv"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        monkeypatch.setenv("EXACTLY_ONCE_BUILD_DIR", str(tmp_path / f"build-{index}"))
        # the dependencies as that venv's pip installs them (then cached for the build)
        lambda_asset._vendor(REQUIREMENT, python=str(venv / "bin" / "python"))
        built.append(lambda_asset.build_zip(requirements=REQUIREMENT).read_bytes())
    assert built[0] == built[1]
    names = lambda_asset.zipfile.ZipFile(lambda_asset.build_zip(REQUIREMENT)).namelist()
    assert "tabulate/__init__.py" in names
    assert not [n for n in names if n.endswith((".pyc", "/RECORD")) or n.startswith("bin/")]
