"""The release rules, one place for scripts/release and the package tests
(tests/package/test_release.py), so that a version names one codebase:

- Between releases the version is a pre-release newer than the last release (the next
  one's `.dev0`) and CHANGELOG.md's "Unreleased" section holds the changes; a release's
  version is never declared while that section has entries, and is declared by one commit
  only (its release commit: the next moves on).
- README.md's install lines pin the last release by its commit (the published repository
  is its `main` branch: a tag made on a developer's machine never reaches it, so a tag
  alone is no pin that works), name its tag and its wheel's file, and that commit declares
  that version.

Standard library only: scripts/release runs it with the machine's python3 (3.11+) before
any venv exists: `python3 -m tooling.release check VERSION [--release]`, `... next VERSION`.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# PEP 440's public versions in the forms this project uses: X.Y.Z, then aN, bN or rcN, then
# .devN (normalized spelling only, so that the text a version is written as is one).
VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:(a|b|rc)(\d+))?(?:\.dev(\d+))?")
PRE_RANK = {"a": 0, "b": 1, "rc": 2}
# What 0.4.0's release commit left under "Unreleased": a section with nothing in it.
NO_ENTRIES = {"- Nothing yet."}
SECTION = re.compile(r"^## (.*)$", re.MULTILINE)
RELEASED = re.compile(r"(\S+)(?: \((\d{4}-\d{2}-\d{2})\))?")
# README.md's install lines: the commit pin, the tag, the wheel's file name.
PINNED = re.compile(r"git\+https://<this repository>@([0-9a-f]{40})\b")
TAGGED = re.compile(r"@v(\d[0-9a-z.]*\d)\b")
WHEEL = re.compile(r"pulumi_exactly_once-([0-9a-z.]+)-py3-none-any\.whl")


@dataclass(frozen=True)
class Version:
    """A version as pyproject.toml and CHANGELOG.md write it."""

    release: tuple[int, int, int]
    pre: tuple[str, int] | None = None  # ("a" | "b" | "rc", N)
    dev: int | None = None

    @classmethod
    def parse(cls, text: str) -> Version:
        found = VERSION.fullmatch(text)
        if not found:
            raise ValueError(
                f"{text!r} is not a version this project writes (X.Y.Z, then aN, bN or rcN, "
                "then .devN: PEP 440's normalized forms)"
            )
        major, minor, patch, kind, number, dev = found.groups()
        return cls(
            (int(major), int(minor), int(patch)),
            (kind, int(number)) if kind else None,
            int(dev) if dev is not None else None,
        )

    @property
    def is_prerelease(self) -> bool:
        return self.pre is not None or self.dev is not None

    def sort_key(self) -> tuple[tuple[int, ...], ...]:
        """PEP 440's order: X.Y.Z.dev0 < X.Y.Za1.dev0 < X.Y.Za1 < X.Y.Zb1 < X.Y.Zrc1 < X.Y.Z."""
        if self.pre is not None:
            pre = (0, PRE_RANK[self.pre[0]], self.pre[1])
        else:  # a final's .devN comes before all its pre-releases; the final after them
            pre = (-1, 0, 0) if self.dev is not None else (1, 0, 0)
        dev = (0, self.dev) if self.dev is not None else (1, 0)
        return (self.release, pre, dev)

    def next_minor(self) -> Version:
        """The version HEAD moves to after this release: the next minor's .dev0."""
        major, minor, _ = self.release
        return Version((major, minor + 1, 0), None, 0)

    def __str__(self) -> str:
        text = ".".join(map(str, self.release))
        if self.pre is not None:
            text += f"{self.pre[0]}{self.pre[1]}"
        return text + (f".dev{self.dev}" if self.dev is not None else "")


@dataclass(frozen=True)
class Changelog:
    """CHANGELOG.md's sections: the Unreleased entries (None: no such section) and the
    released versions with their dates, as written (newest first)."""

    unreleased: tuple[str, ...] | None
    released: tuple[tuple[Version, str | None], ...]

    @classmethod
    def parse(cls, text: str) -> Changelog:
        heads = list(SECTION.finditer(text))
        unreleased: tuple[str, ...] | None = None
        released: list[tuple[Version, str | None]] = []
        for head, after in zip(heads, [*heads[1:], None], strict=True):
            title = head.group(1).strip()
            body = text[head.end() : after.start() if after else len(text)]
            if title == "Unreleased":
                lines = (line.strip() for line in body.splitlines())
                unreleased = tuple(line for line in lines if line and line not in NO_ENTRIES)
                continue
            found = RELEASED.fullmatch(title)
            if not found:
                raise ValueError(f"CHANGELOG.md: '## {title}' is neither Unreleased nor a release")
            released.append((Version.parse(found.group(1)), found.group(2)))
        return cls(unreleased, tuple(released))

    @property
    def latest(self) -> Version | None:
        return max((v for v, _ in self.released), key=Version.sort_key, default=None)

    def date(self, version: Version) -> str | None:
        return next((date for v, date in self.released if v == version), None)

    def has(self, version: Version) -> bool:
        return any(v == version for v, _ in self.released)


@dataclass(frozen=True)
class Pin:
    """What README.md's install lines name: one commit, one version (tag and wheel)."""

    commit: str
    version: Version

    @classmethod
    def parse(cls, readme: str) -> Pin:
        commits = set(PINNED.findall(readme))
        versions = set(TAGGED.findall(readme)) | set(WHEEL.findall(readme))
        if len(commits) != 1 or len(versions) != 1 or not TAGGED.search(readme):
            raise ValueError(
                "README.md's install lines name one release: its commit "
                "(git+https://<this repository>@<40 hex digits>), its tag (@v<version>) and "
                "its wheel (pulumi_exactly_once-<version>-py3-none-any.whl); found commits "
                f"{sorted(commits)}, versions {sorted(versions)}"
            )
        [commit], [version] = commits, versions
        return cls(commit, Version.parse(version))


def version_problems(declared: str, changelog: Changelog, *, release: bool = False) -> list[str]:
    """What is wrong with pyproject.toml's version against CHANGELOG.md (`release`: HEAD is
    about to be tagged as that release)."""
    version = Version.parse(declared)
    latest = changelog.latest
    problems = []
    if release and version.dev is not None:
        problems.append(f"{version} is a development version: only a release is tagged")
    if changelog.unreleased and (changelog.has(version) or not version.is_prerelease):
        problems.append(
            f"CHANGELOG.md has Unreleased changes under a release's version ({version}): "
            f"between releases the version is the next one's pre-release "
            f"({(latest or version).next_minor()}, or a patch's .dev0); a release commit "
            "moves the entries to a dated section"
        )
    if changelog.has(version):
        if latest is not None and version != latest:
            problems.append(f"pyproject.toml says {version}, an older release than {latest}")
        if changelog.date(version) is None:
            problems.append(f"CHANGELOG.md's '## {version}' has no date (YYYY-MM-DD)")
    elif not version.is_prerelease or release:
        problems.append(f"CHANGELOG.md has no section '## {version} (YYYY-MM-DD)'")
    elif latest is not None and version.sort_key() <= latest.sort_key():
        problems.append(
            f"pyproject.toml says {version}, not newer than the last release, {latest}: "
            f"the next is {latest.next_minor()} (or a patch's .dev0)"
        )
    return problems


def shared_version_problems(head: str | None, parent: str | None) -> list[str]:
    """A release's version is its release commit's alone: the commit before it says
    another, and the commit after it moves on (a .devN is shared by the commits between
    releases by design: it says it is none)."""
    if head is None or parent is None or head != parent:
        return []
    if Version.parse(head).is_prerelease:
        return []
    return [
        f"HEAD and HEAD~1 both say {head}: a release's version is one commit's (after the "
        f"release commit, move to {Version.parse(head).next_minor()})"
    ]


def pin_problems(
    pin: Pin,
    declared: str,
    changelog: Changelog,
    declared_at: Callable[[str], str | None],
) -> list[str]:
    """README.md's pin against history: the commit is on HEAD's branch and declares the
    version named, the last release (or, at a release commit, the one before: the commit
    cannot name itself). `declared_at(commit)`: its pyproject.toml's version, None when
    HEAD's history has no such commit."""
    problems = []
    at = declared_at(pin.commit)
    if at is None:
        problems.append(f"README.md pins {pin.commit}, which is not in HEAD's history")
    elif at != str(pin.version):
        problems.append(f"README.md pins {pin.commit} as {pin.version}; that commit says {at}")
    released = sorted((v for v, _ in changelog.released), key=Version.sort_key)
    if not changelog.has(pin.version):
        problems.append(f"README.md names {pin.version}, which CHANGELOG.md has no release of")
        return problems
    allowed = released[-1:]
    if str(released[-1]) == declared:  # HEAD is the release commit, which cannot name itself
        allowed = released[-2:]
    if pin.version not in allowed:
        problems.append(f"README.md pins {pin.version}; the last release is {released[-1]}")
    return problems


def git(*args: str, root: Path = ROOT) -> str | None:
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def declared_in(text: str) -> str:
    return str(tomllib.loads(text)["project"]["version"])


def declared_at(commit: str, root: Path = ROOT) -> str | None:
    """pyproject.toml's version at `commit`, when HEAD's history has it."""
    if git("merge-base", "--is-ancestor", commit, "HEAD", root=root) is None:
        return None
    text = git("show", f"{commit}:pyproject.toml", root=root)
    return declared_in(text) if text is not None else None


def problems(version: str, *, release: bool = False, root: Path = ROOT) -> list[str]:
    """Everything scripts/release checks before building `version`."""
    declared = declared_in((root / "pyproject.toml").read_text())
    if declared != version:
        return [f"pyproject.toml says {declared}, not {version}"]
    changelog = Changelog.parse((root / "CHANGELOG.md").read_text())
    found = version_problems(declared, changelog, release=release)
    found += shared_version_problems(declared_at("HEAD", root), declared_at("HEAD~1", root))
    try:
        pin = Pin.parse((root / "README.md").read_text())
    except ValueError as refused:
        return [*found, str(refused)]
    return found + pin_problems(pin, declared, changelog, lambda c: declared_at(c, root))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tooling.release", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="the version, CHANGELOG.md and README.md agree")
    check.add_argument("version")
    check.add_argument("--release", action="store_true", help="HEAD is about to be tagged")
    after = commands.add_parser("next", help="the version to move to after a release")
    after.add_argument("version")
    args = parser.parse_args(argv)
    if args.command == "next":
        print(Version.parse(args.version).next_minor())
        return 0
    found = problems(args.version, release=args.release)
    for problem in found:
        print(f"release: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
