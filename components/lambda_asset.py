"""The one Lambda code asset build: the `exactly_once.handlers` package, a user's own
source folders (their modules importable from the code root) and vendored dependencies.

Both deploy paths (the Pulumi CLI and the LocalStack engine without it) get their
code from here, so what runs in LocalStack is byte for byte what AWS would run.
The zip is deterministic (sorted entries, fixed timestamps), so an unchanged build
never shows up as a diff in `pulumi preview`.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pulumi

import exactly_once
import exactly_once.handlers

# Found through the package itself, so the build is the same from the repository and from
# an installed wheel. The handlers keep their namespace in the zip (handler
# "exactly_once.handlers.etl.handler"), so a user's own modules beside them, even one
# called `handlers`, never clash.
PACKAGE = Path(exactly_once.__file__)
HANDLERS = Path(exactly_once.handlers.__file__).parent
FIXED_TIME = (2020, 1, 1, 0, 0, 0)


def build_dir() -> Path:
    """Where assets are built: EXACTLY_ONCE_BUILD_DIR, else build/lambda under the working
    directory (the Pulumi project's): never inside the installed package, which may be
    read-only (Docker, Nix) and must not grow."""
    return Path(os.environ.get("EXACTLY_ONCE_BUILD_DIR") or Path.cwd() / "build" / "lambda")


# The functions' platform (components/functions.py: RUNTIME, and the architecture):
# requirements are installed as wheels built for it, never for the deploying machine's.
PLATFORMS = {"x86_64": "manylinux2014_x86_64", "arm64": "manylinux2014_aarch64"}
LAMBDA_PYTHON = "3.12"
# Never bundled from a source folder: environments, version control, secrets, build
# output, and a Pulumi program living in the same folder.
ALWAYS_SKIPPED = (frozenset({"__pycache__"}), ("*.pyc", ".complete"))
SOURCE_SKIPPED = (
    frozenset({".venv", "venv", ".git", "node_modules", "__pycache__", ".pulumi", "build"}),
    ("*.pyc", ".env", ".env.*", "Pulumi.yaml", "Pulumi.*.yaml"),
)


def _vendor(requirements: tuple[str, ...], architecture: str = "x86_64") -> Path | None:
    """pip-install requirements, as Lambda's platform wheels for `architecture`, into a
    cache folder keyed by their hash."""
    if not requirements:
        return None
    platform = PLATFORMS[architecture]
    key = "\n".join([platform, *sorted(requirements)])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    target = build_dir() / f"deps-{digest}"
    if not (target / ".complete").exists():
        target.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--target",
                str(target),
                "--platform",
                platform,
                "--implementation",
                "cp",
                "--python-version",
                LAMBDA_PYTHON,
                "--only-binary=:all:",
                *requirements,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"cannot install {list(requirements)} for Lambda (python{LAMBDA_PYTHON}, "
                f"{platform} wheels only): {done.stderr.strip()[-600:]}"
            )
        (target / ".complete").touch()
    return target


def _files(
    base: Path,
    prefix: str = "",
    skipped: tuple[frozenset[str], tuple[str, ...]] = ALWAYS_SKIPPED,
    patterns: tuple[str, ...] = (),
) -> list[tuple[Path, str]]:
    """Every file under `base` (as `prefix` + its relative path) but the skipped folders
    and file patterns (and `patterns`, globs on the relative path); sorted, so the zip is
    the same on every machine."""
    folders, names = skipped
    found = []
    for path in sorted(base.rglob("*")):
        relative = path.relative_to(base)
        if not path.is_file() or folders & set(relative.parts[:-1]):
            continue
        if any(path.match(name) for name in names) or any(
            relative.match(pattern) for pattern in patterns
        ):
            continue
        found.append((path, prefix + relative.as_posix()))
    return found


def build_zip(
    requirements: tuple[str, ...] = (),
    sources: tuple[str, ...] = (),
    excludes: tuple[str, ...] = (),
    architecture: str = "x86_64",
) -> Path:
    """Build (or reuse) the zip for these source folders (without SOURCE_SKIPPED's folders
    and files, nor `excludes`, globs on paths relative to a source) and vendored
    requirements; return its path."""
    entries = [(PACKAGE, "exactly_once/__init__.py"), *_files(HANDLERS, "exactly_once/handlers/")]
    for source in sources:
        entries += _files(Path(source).resolve(), skipped=SOURCE_SKIPPED, patterns=excludes)
    names = [arcname for _, arcname in entries]
    if len(set(names)) != len(names):
        clashes = sorted({name for name in names if names.count(name) > 1})
        raise ValueError(f"source folders clash with each other or the handlers: {clashes[:5]}")
    deps = _vendor(requirements, architecture)
    if deps:
        # bin/ holds console scripts whose shebang names this machine's interpreter
        entries += [entry for entry in _files(deps) if not entry[1].startswith("bin/")]
    digest = hashlib.sha256()
    for path, arcname in entries:
        digest.update(arcname.encode() + b"\0" + path.read_bytes())
    out = build_dir() / f"lambda-{digest.hexdigest()[:16]}.zip"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path, arcname in entries:
                info = zipfile.ZipInfo(arcname, FIXED_TIME)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
        tmp.replace(out)
    return out


def lambda_code(
    requirements: tuple[str, ...] = (),
    sources: tuple[str, ...] = (),
    excludes: tuple[str, ...] = (),
    architecture: str = "x86_64",
) -> pulumi.FileArchive:
    return pulumi.FileArchive(str(build_zip(requirements, sources, excludes, architecture)))
