"""Releases as they reach users: a version names one codebase (HEAD never carries
Unreleased changes under a release's version, and a release's version is one commit's),
README.md's install lines work against the repository as it is published (its `main`
branch, no tags), and `scripts/release --check` builds from a fresh clone without the
test environment's set-up. The rules themselves: tooling/release.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version as Pep440

from tooling import release
from tooling.release import Changelog, Pin, Version

ROOT = Path(__file__).resolve().parents[2]
# Pulumi's package metaschema's pattern for `version` (pkg/codegen/schema/pulumi.json)
SEMVER = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
HISTORY = """# Changelog

## Unreleased
{unreleased}

## 0.4.0 (2026-12-06)
- platform options

## 0.3.0 (2026-12-06)
- the ops tool

## 0.2.0
- first package
"""


def changelog(*entries: str) -> Changelog:
    return Changelog.parse(HISTORY.format(unreleased="\n".join(entries)))


def declared() -> str:
    return release.declared_in((ROOT / "pyproject.toml").read_text())


# --- HEAD -------------------------------------------------------------------------------


def test_heads_version_follows_the_changelog() -> None:
    """Unreleased changes under a release's version fail here (HEAD said 0.4.0 over
    breaking changes, #54): while there are any, the version is a pre-release newer than
    the last release, so HEAD's version differs from every release's."""
    assert release.version_problems(declared(), Changelog.parse(read("CHANGELOG.md"))) == []


def test_a_release_version_is_its_release_commits_alone() -> None:
    head, parent = release.declared_at("HEAD"), release.declared_at("HEAD~1")
    if parent is None:
        pytest.skip("a shallow clone: HEAD~1 is not here")
    assert release.shared_version_problems(head, parent) == []


def test_the_readme_pins_the_last_release_by_its_commit() -> None:
    pin = Pin.parse(read("README.md"))
    problems = release.pin_problems(
        pin, declared(), Changelog.parse(read("CHANGELOG.md")), release.declared_at
    )
    assert problems == []


def test_the_schema_states_heads_version_as_semver() -> None:
    from exactly_once.components.package import schema

    assert SEMVER.match(schema()["version"]), schema()["version"]


# --- the rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "entries", "refused"),
    [
        # between releases: the next one's pre-release, newer than the last release
        ("0.5.0.dev0", ["- a change"], None),
        ("0.4.1.dev3", ["- a fix"], None),
        ("0.5.0rc1", ["- a change"], None),
        ("0.5.0.dev0", [], None),  # just after a release commit: the section opened, empty
        # a release's version over Unreleased changes: two codebases, one version (#54)
        ("0.4.0", ["- a change"], "Unreleased changes under a release's version"),
        ("0.5.0", ["- a change"], "Unreleased changes under a release's version"),
        # a pre-release that is not newer than the last release
        ("0.4.0.dev0", ["- a change"], "not newer than the last release, 0.4.0"),
        ("0.4.0rc2", ["- a change"], "not newer than the last release, 0.4.0"),
        # a release with no section of its own, or an older release
        ("0.5.0", [], "no section '## 0.5.0 (YYYY-MM-DD)'"),
        ("0.3.0", [], "an older release than 0.4.0"),
        # what 0.4.0's release commit left: "Nothing yet." is no entry
        ("0.4.0", ["- Nothing yet."], None),
    ],
)
def test_the_version_rule(version: str, entries: list[str], refused: str | None) -> None:
    problems = release.version_problems(version, changelog(*entries))
    if refused is None:
        assert problems == []
    else:
        assert any(refused in problem for problem in problems), problems


def test_a_released_pre_release_is_no_version_for_unreleased_changes() -> None:
    log = Changelog.parse(HISTORY.format(unreleased="- more") + "\n## 0.5.0rc1 (2026-12-20)\n")
    problems = release.version_problems("0.5.0rc1", log)
    assert any("Unreleased changes under a release's version" in p for p in problems), problems


def test_a_tag_is_a_release_with_a_dated_section() -> None:
    assert release.version_problems("0.4.0", changelog(), release=True) == []
    refused = release.version_problems("0.5.0.dev0", changelog(), release=True)
    assert any("only a release is tagged" in p for p in refused), refused
    undated = release.version_problems("0.2.0", Changelog.parse("## 0.2.0\n- x\n"), release=True)
    assert any("has no date" in p for p in undated), undated


def test_two_commits_never_share_a_release_version() -> None:
    assert release.shared_version_problems("0.4.0", "0.4.0")
    assert release.shared_version_problems("0.4.0", "0.4.0.dev0") == []
    assert release.shared_version_problems("0.5.0.dev0", "0.5.0.dev0") == []  # between


def test_the_pin_is_the_last_release_or_at_its_release_commit_the_one_before() -> None:
    log = Changelog.parse(HISTORY.format(unreleased=""))
    at = {"a" * 40: "0.4.0", "b" * 40: "0.3.0"}.get
    assert release.pin_problems(Pin("a" * 40, Version.parse("0.4.0")), "0.5.0.dev0", log, at) == []
    # HEAD is 0.4.0's release commit: README still pins 0.3.0 (it cannot name itself)
    assert release.pin_problems(Pin("b" * 40, Version.parse("0.3.0")), "0.4.0", log, at) == []
    stale = release.pin_problems(Pin("b" * 40, Version.parse("0.3.0")), "0.5.0.dev0", log, at)
    assert any("the last release is 0.4.0" in p for p in stale), stale
    wrong = release.pin_problems(Pin("b" * 40, Version.parse("0.4.0")), "0.5.0.dev0", log, at)
    assert any("that commit says 0.3.0" in p for p in wrong), wrong
    elsewhere = release.pin_problems(Pin("c" * 40, Version.parse("0.4.0")), "0.5.0.dev0", log, at)
    assert any("not in HEAD's history" in p for p in elsewhere), elsewhere


def test_the_readme_names_one_release() -> None:
    line = 'pip install "x @ git+https://<this repository>@{}"  # @v0.4.0'
    wheel = " pulumi_exactly_once-0.4.0-py3-none-any.whl"
    assert Pin.parse(line.format("a" * 40) + wheel) == Pin("a" * 40, Version.parse("0.4.0"))
    with pytest.raises(ValueError, match="name one release"):
        Pin.parse(line.format("a" * 40) + line.format("b" * 40) + wheel)
    with pytest.raises(ValueError, match="name one release"):
        Pin.parse(line.format("a" * 40) + wheel.replace("0.4.0", "0.3.0"))
    with pytest.raises(ValueError, match="name one release"):  # a tag alone: no pin
        Pin.parse('pip install "x @ git+https://<this repository>@v0.4.0"' + wheel)


VERSIONS = ["0.4.0.dev0", "0.4.0a1.dev0", "0.4.0a1", "0.4.0b2", "0.4.0rc1", "0.4.0", "0.4.1.dev0"]
VERSIONS += ["0.5.0.dev0", "0.5.0", "1.0.0rc1", "1.0.0", "10.0.0"]


def test_versions_order_as_pep_440_orders_them() -> None:
    ours = sorted(VERSIONS[::-1], key=lambda v: Version.parse(v).sort_key())
    assert ours == sorted(VERSIONS[::-1], key=Pep440) == VERSIONS
    assert all(str(Version.parse(v)) == str(Pep440(v)) for v in VERSIONS)  # normalized
    with pytest.raises(ValueError, match="not a version this project writes"):
        Version.parse("0.5.0-dev")


def semver_order(version: str) -> tuple[Any, ...]:
    """Semantic Versioning 2.0.0's precedence (item 11): a pre-release below its release;
    its identifiers compared in turn, numeric ones by value and below alphanumeric ones,
    a shorter list below a longer one it begins."""
    release, _, pre = version.partition("-")
    ids = [(0, int(i), "") if i.isdigit() else (1, 0, i) for i in pre.split(".")] if pre else []
    return (tuple(int(n) for n in release.split(".")), 0 if pre else 1, ids)


def test_the_schema_version_is_semver_in_pep_440s_order_and_a_release_reads_the_same() -> None:
    from exactly_once.components.package import schema_version

    assert schema_version("0.4.0") == "0.4.0"
    assert schema_version("0.5.0.dev0") == "0.5.0-0.dev.0"
    assert schema_version("1.0.0rc1") == "1.0.0-rc.1"
    ours = [v for v in VERSIONS if not re.search(r"(a|b|rc)\d+\.dev", v)]
    assert all(SEMVER.match(schema_version(v)) for v in ours)
    # a dev version before the pre-releases and the release it leads to, as PEP 440 has it
    assert sorted(ours[::-1], key=lambda v: semver_order(schema_version(v))) == ours
    with pytest.raises(ValueError, match="no semver of the same order"):
        schema_version("0.4.0a1.dev0")  # (semver ranks any alpha.1.<more> above alpha.1)


# --- from a clone, as published -----------------------------------------------------------


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository as published: a clone of HEAD's branch, with no tags (only `main` is
    published; a tag made on a machine stays there). Committed files only."""
    where = tmp_path_factory.mktemp("published") / "pulumi-exactly-once"
    git("clone", "--quiet", "--no-tags", f"file://{ROOT}", str(where))
    assert git("tag", "--list", cwd=where) == ""
    return where


def test_the_readme_install_lines_work_from_a_clone(clone: Path, tmp_path: Path) -> None:
    """README.md's Install lines, run as written in a user's project with a fresh venv
    outside the repository, the repository's address replaced by the clone's. `--no-deps`
    is added: the `pulumi` extra brings Pulumi and the AWS provider (hundreds of MB, a
    minute and more), which say nothing of the pin; pip still parses each line, the extra's
    name included, and warns of an extra the package lacks (refused below).
    tests/package/test_wheel.py installs the wheel's dependencies at their floors."""
    readme = (clone / "README.md").read_text()
    pin = Pin.parse(readme)
    install = readme.split("## Install", 1)[1].split("\n## ", 1)[0]
    lines = re.findall(r"^    (pip .+)$", install, re.MULTILINE)
    assert len(lines) == 3, lines  # the commit-pinned line; the wheel, built; then installed
    project = tmp_path / "users-project"
    project.mkdir()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def pip(line: str) -> None:
        words = shlex.split(line.replace("https://<this repository>", f"file://localhost{clone}"))
        assert words[0] == "pip"
        words = [python, "-m", "pip", "--disable-pip-version-check", *words[1:]]
        if words[4] == "install":
            words.insert(5, "--no-deps")
        done = subprocess.run(words, cwd=project, env=env, capture_output=True, text=True)
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        assert "does not provide the extra" not in done.stdout + done.stderr, line

    def installed() -> dict[str, Any]:
        script = """
import importlib.metadata, json
dist = importlib.metadata.distribution("pulumi-exactly-once")
print(json.dumps({"version": dist.version, "from": json.loads(dist.read_text("direct_url.json"))}))
"""
        done = subprocess.run([python, "-c", script], cwd=project, env=env, capture_output=True)
        assert done.returncode == 0, done.stderr
        found: dict[str, Any] = json.loads(done.stdout)
        return found

    # the commit-pinned line: the release's code, at the commit README names
    pip(lines[0])
    got = installed()
    assert got["version"] == str(pin.version)
    assert got["from"]["vcs_info"]["commit_id"] == pin.commit
    uninstall = [python, "-m", "pip", "uninstall", "--quiet", "-y", "pulumi-exactly-once"]
    subprocess.run(uninstall, env=env, check=True)
    # the wheel: the file README names, built from the same commit, then installed
    pip(lines[1])
    wheel = f"pulumi_exactly_once-{pin.version}-py3-none-any.whl"
    assert (project / "dist" / wheel).is_file(), sorted((project / "dist").iterdir())
    pip(lines[2])
    got = installed()
    assert got["version"] == str(pin.version)
    assert got["from"]["url"] == (project / "dist" / wheel).as_uri()


def test_the_release_check_builds_from_a_fresh_clone_without_the_test_set_up(
    clone: Path,
) -> None:
    """`scripts/release <HEAD's version> --check` in a clone with no .venv: the version
    agrees across pyproject.toml, CHANGELOG.md and README.md; the wheel and the sdist build
    from the committed files in a venv of the script's own, with the build-system's
    setuptools; the wheel installed in a fresh venv says its version; the sdist builds the
    same wheel; it sets up nothing of the tests' (scripts/setup's LocalStack, DynamoDB Local
    and JDK; the project's .venv) and tags nothing. (The one run of the script per CI.)"""
    version = release.declared_in((clone / "pyproject.toml").read_text())
    # the machine's python3, not this repository's venv
    path = os.pathsep.join(
        entry
        for entry in os.environ["PATH"].split(os.pathsep)
        if not entry.startswith(str(ROOT / ".venv"))
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(
        ["bash", "scripts/release", version, "--check"],
        cwd=clone,
        env={**env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"release {version}: dist/pulumi_exactly_once-{version}-py3-none-any.whl" in done.stdout
    tree = set(git("ls-tree", "--name-only", "HEAD", cwd=clone).split()) | {".git"}
    assert {p.name for p in clone.iterdir()} - tree == {"dist"}  # no .venv, no .localstack
    assert git("tag", "--list", cwd=clone) == ""  # --check tags nothing


def read(name: str) -> str:
    return (ROOT / name).read_text()


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()
