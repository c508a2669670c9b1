"""Function assets: what a source folder never ships, Lambda-platform wheels, and the same
bytes on every machine."""

from __future__ import annotations

import subprocess
import zipfile
from collections.abc import Callable
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


def fake_pip(
    monkeypatch: pytest.MonkeyPatch,
    install: Callable[[list[str]], subprocess.CompletedProcess[str]],
) -> list[list[str]]:
    """pip as `install` (the probe for pip answers yes); every install's arguments."""
    calls: list[list[str]] = []

    def run(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        if args[1] == "-c":  # the probe: is pip there?
            return subprocess.CompletedProcess(args, 0, "True\n", "")
        calls.append(args)
        return install(args)

    monkeypatch.setattr(lambda_asset.subprocess, "run", run)
    return calls


def test_requirements_are_installed_as_lambda_platform_wheels_without_console_scripts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def pip(args: list[str]) -> subprocess.CompletedProcess[str]:
        target = Path(args[args.index("--target") + 1])
        (target / "bin").mkdir(parents=True)
        (target / "bin" / "tool").write_text(f"#!{tmp_path}/venv/bin/python\n")
        (target / "lib_pkg").mkdir()
        (target / "lib_pkg" / "__init__.py").write_text("")
        info = target / "lib_pkg-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Name: lib-pkg\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"../../bin/tool,sha256={tmp_path},1\n")  # this venv's
        (info / "INSTALLER").write_text("pip\n")
        return subprocess.CompletedProcess(args, 0, "", "")

    calls = fake_pip(monkeypatch, pip)
    shipped = names(lambda_asset.build_zip(requirements=("lib-pkg==1.0",)))
    [args] = calls
    tags = [args[i + 1] for i, arg in enumerate(args) if arg == "--platform"]
    # every manylinux Lambda's glibc (2.34, Amazon Linux 2023) runs
    assert tags[0] == "manylinux2014_x86_64" and "manylinux_2_28_x86_64" in tags
    assert tags[-1] == "manylinux_2_34_x86_64"
    assert args[args.index("--python-version") + 1] == "3.12"
    assert "--only-binary=:all:" in args and "--no-compile" in args
    assert "lib_pkg/__init__.py" in shipped and "lib_pkg-1.0.dist-info/METADATA" in shipped
    assert not any(name.startswith("bin/") for name in shipped)  # no machine's paths
    assert not {"lib_pkg-1.0.dist-info/RECORD", "lib_pkg-1.0.dist-info/INSTALLER"} & shipped


def test_a_requirement_without_a_lambda_wheel_is_named_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr = (
        "ERROR: Could not find a version that satisfies the requirement sdist-only==1\n"
        "ERROR: No matching distribution found for sdist-only==1\n"
    )
    fake_pip(monkeypatch, lambda args: subprocess.CompletedProcess(args, 1, "", stderr))
    with pytest.raises(lambda_asset.BuildError) as error:
        lambda_asset.build_zip(requirements=("sdist-only==1",))
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("sdist-only==1: no wheel for Lambda (CPython 3.12")
    assert "manylinux_2_34_x86_64" in message


def test_offline_a_fresh_build_says_what_it_needs_and_a_cached_one_needs_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stderr = (
        "WARNING: Retrying (Retry(total=4...)) after connection broken by "
        "'NewConnectionError(...: Failed to establish a new connection: [Errno -3] "
        "Temporary failure in name resolution')': /simple/six/\n"
        "ERROR: Could not find a version that satisfies the requirement six\n"
        "ERROR: No matching distribution found for six\n"
    )
    online = True

    def pip(args: list[str]) -> subprocess.CompletedProcess[str]:
        if not online:
            return subprocess.CompletedProcess(args, 1, "", stderr)
        target = Path(args[args.index("--target") + 1])
        (target / "six.py").write_text("")
        return subprocess.CompletedProcess(args, 0, "", "")

    calls = fake_pip(monkeypatch, pip)
    with pytest.raises(lambda_asset.BuildError, match="unreachable") as error:
        online = False
        lambda_asset.build_zip(requirements=("six",))
    assert "\n" not in str(error.value) and "six" in str(error.value)
    online = True
    first = lambda_asset.build_zip(requirements=("six",))
    online = False  # the cache serves it: pip is not run again
    assert lambda_asset.build_zip(requirements=("six",)) == first
    assert len(calls) == 2


def test_without_pip_the_error_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def run(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert args[1] == "-c", "pip must not be run when it is missing"
        return subprocess.CompletedProcess(args, 0, "False\n", "")

    monkeypatch.setattr(lambda_asset.subprocess, "run", run)
    with pytest.raises(lambda_asset.BuildError, match="-m ensurepip"):
        lambda_asset.build_zip(requirements=("six",))


def test_a_durable_functions_wheels_are_for_its_own_python(monkeypatch: pytest.MonkeyPatch) -> None:
    def pip(args: list[str]) -> subprocess.CompletedProcess[str]:
        (Path(args[args.index("--target") + 1]) / "sdk.py").write_text("")
        return subprocess.CompletedProcess(args, 0, "", "")

    calls = fake_pip(monkeypatch, pip)
    lambda_asset.build_zip(requirements=("sdk",), python_version="3.13")
    [args] = calls
    assert args[args.index("--python-version") + 1] == "3.13"


def test_the_zip_is_the_same_bytes_every_time(tmp_path: Path) -> None:
    first = lambda_asset.build_zip().read_bytes()
    for built in (tmp_path / "build").glob("*.zip"):
        built.unlink()
    assert lambda_asset.build_zip().read_bytes() == first


def test_an_arm64_function_gets_aarch64_wheels(monkeypatch: pytest.MonkeyPatch) -> None:
    from exactly_once.components.etl import IdempotentEtl, IdempotentEtlArgs
    from tests.unit.pulumi_harness import run

    def pip(args: list[str]) -> subprocess.CompletedProcess[str]:
        Path(args[args.index("--target") + 1]).mkdir(parents=True, exist_ok=True)
        return subprocess.CompletedProcess(args, 0, "", "")

    calls = fake_pip(monkeypatch, pip)
    args = IdempotentEtlArgs(
        transform="etl_transforms.csv_jsonl:transform",
        transform_source="examples/etl",
        transform_requirements=["lib-pkg==1.0"],
        architecture="arm64",
    )
    mocks = run(lambda: IdempotentEtl("etl", args))
    assert mocks.named("etl-transform").inputs["architectures"] == ["arm64"]
    [install] = calls
    tags = {install[i + 1] for i, arg in enumerate(install) if arg == "--platform"}
    assert {"manylinux2014_aarch64", "manylinux_2_28_aarch64"} <= tags
    assert not any("x86_64" in tag for tag in tags)


def test_builds_of_one_zip_at_once_both_get_it_whole(tmp_path: Path) -> None:
    # GIVEN two deploys (two stacks, two test workers) building the same function at once
    import concurrent.futures

    source = tmp_path / "src"
    source.mkdir()
    (source / "app.py").write_text("def handler(event, context):\n    return event\n")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        built = list(pool.map(lambda _: lambda_asset.build_zip(sources=(str(source),)), range(8)))
    # THEN each got the one zip, whole, and no half-written file is left beside it
    assert len(set(built)) == 1
    with zipfile.ZipFile(built[0]) as archive:
        assert "app.py" in archive.namelist() and archive.testzip() is None
    assert list(built[0].parent.glob("*.tmp")) == []
