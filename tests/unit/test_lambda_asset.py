"""Function assets: what a source folder never ships, Lambda-platform wheels, and the same
bytes on every machine."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from exactly_once.components import lambda_asset


@pytest.fixture(autouse=True)
def build_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXACTLY_ONCE_BUILD_DIR", str(tmp_path / "build"))


def names(zip_path: Path) -> set[str]:
    return set(zipfile.ZipFile(zip_path).namelist())


def test_a_source_folder_ships_its_code_and_never_environments_secrets_or_the_program(
    tmp_path: Path,
) -> None:
    # GIVEN a team's project folder used as transform_source
    source = tmp_path / "project"
    for relative in (
        "team/transform.py",
        "team/fixtures/big.csv",
        ".venv/lib/site.py",
        ".git/config",
        "node_modules/x/index.js",
        "build/lambda/old.zip",
        ".env",
        ".env.production",
        "Pulumi.yaml",
        "Pulumi.prod.yaml",
        "team/__pycache__/transform.cpython-312.pyc",
    ):
        (source / relative).parent.mkdir(parents=True, exist_ok=True)
        (source / relative).write_text("x")
    # WHEN it is bundled, with one pattern of the team's own
    shipped = names(lambda_asset.build_zip(sources=(str(source),), excludes=("team/fixtures/*",)))
    # THEN only the code goes (beside our handlers)
    theirs = {name for name in shipped if not name.startswith("exactly_once/")}
    assert theirs == {"team/transform.py"}


def test_requirements_are_installed_as_lambda_platform_wheels_without_console_scripts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[list[str]] = []

    def pip(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        target = Path(args[args.index("--target") + 1])
        (target / "bin").mkdir(parents=True)
        (target / "bin" / "tool").write_text(f"#!{tmp_path}/venv/bin/python\n")
        (target / "lib_pkg").mkdir()
        (target / "lib_pkg" / "__init__.py").write_text("")
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(lambda_asset.subprocess, "run", pip)
    shipped = names(lambda_asset.build_zip(requirements=("lib-pkg==1.0",)))
    [args] = calls
    assert args[args.index("--platform") + 1] == "manylinux2014_x86_64"
    assert args[args.index("--python-version") + 1] == "3.12"
    assert "--only-binary=:all:" in args
    assert "lib_pkg/__init__.py" in shipped
    assert not any(name.startswith("bin/") for name in shipped)  # no machine's paths


def test_a_requirement_without_a_lambda_wheel_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def pip(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 1, "", "ERROR: No matching distribution")

    monkeypatch.setattr(lambda_asset.subprocess, "run", pip)
    with pytest.raises(RuntimeError, match="manylinux2014_x86_64 wheels only"):
        lambda_asset.build_zip(requirements=("sdist-only==1",))


def test_the_zip_is_the_same_bytes_every_time(tmp_path: Path) -> None:
    first = lambda_asset.build_zip().read_bytes()
    for built in (tmp_path / "build").glob("*.zip"):
        built.unlink()
    assert lambda_asset.build_zip().read_bytes() == first


def test_an_arm64_function_gets_aarch64_wheels(monkeypatch: pytest.MonkeyPatch) -> None:
    from exactly_once.components.etl import IdempotentEtl, IdempotentEtlArgs
    from tests.unit.pulumi_harness import run

    calls: list[list[str]] = []

    def pip(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        Path(args[args.index("--target") + 1]).mkdir(parents=True, exist_ok=True)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(lambda_asset.subprocess, "run", pip)
    args = IdempotentEtlArgs(
        transform="etl_transforms.csv_jsonl:transform",
        transform_source="examples/etl",
        transform_requirements=["lib-pkg==1.0"],
        architecture="arm64",
    )
    mocks = run(lambda: IdempotentEtl("etl", args))
    assert mocks.named("etl-transform").inputs["architectures"] == ["arm64"]
    [install] = calls
    assert install[install.index("--platform") + 1] == "manylinux2014_aarch64"
