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
import re
import shutil
import subprocess
import sys
import tempfile
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
# Lambda's Python 3.12 and 3.13 runtimes run on Amazon Linux 2023, glibc 2.34 (Lambda
# developer guide, "Lambda runtimes"): a wheel for any manylinux up to 2_34 runs there.
# pip takes exactly the platforms it is given, so each is named.
GLIBC = ("2014", "_2_17", "_2_24", "_2_28", "_2_31", "_2_34")
MACHINES = {"x86_64": "x86_64", "arm64": "aarch64"}
LAMBDA_PYTHON = "3.12"


def platforms(architecture: str) -> list[str]:
    """Every manylinux platform tag Lambda's glibc runs, for `architecture`."""
    return [f"manylinux{glibc}_{MACHINES[architecture]}" for glibc in GLIBC]


# Never bundled from a source folder: environments, version control, caches, secrets,
# build output, and a Pulumi program living in the same folder.
ALWAYS_SKIPPED = (frozenset({"__pycache__"}), ("*.pyc", ".complete"))
SOURCE_SKIPPED = (
    frozenset(
        {
            ".venv",
            "venv",
            ".git",
            ".hg",
            "node_modules",
            "__pycache__",
            ".pulumi",
            "build",
            "dist",
            ".mypy_cache",
            ".ruff_cache",
            ".pytest_cache",
            ".tox",
            ".nox",
            ".idea",
            ".vscode",
            ".ipynb_checkpoints",
        }
    ),
    ("*.pyc", ".env", ".env.*", "Pulumi.yaml", "Pulumi.*.yaml", ".DS_Store"),
)
# What pip writes that names the machine that installed it (an interpreter path in a
# console script, and in RECORD's hash of it; an absolute path in direct_url.json;
# bytecode for the deploying Python): left out, so two venvs build the same zip. Lambda
# needs none of it (pip reads RECORD only to uninstall).
MACHINE_SPECIFIC = ("*.dist-info/RECORD", "*.dist-info/INSTALLER", "*.dist-info/direct_url.json")


class BuildError(RuntimeError):
    """A function's dependencies cannot be built: one line that says what to do."""


def _pip(python: str) -> list[str]:
    """How to run pip with `python`; BuildError when it has none."""
    probe = subprocess.run(
        [python, "-c", "import importlib.util as u; print(bool(u.find_spec('pip')))"],
        capture_output=True,
        text=True,
    )
    if probe.stdout.strip() != "True":
        raise BuildError(
            f"building the functions' dependencies needs pip in the Python running this "
            f"program ({python}): run `{python} -m ensurepip` (or create the venv without "
            "--without-pip)"
        )
    return [python, "-m", "pip"]


def _why(requirements: tuple[str, ...], stderr: str, platform_tags: list[str]) -> str:
    """pip's failure as one line that names what is missing."""
    missing = re.findall(r"No matching distribution found for (\S+)", stderr)
    if re.search(
        r"NewConnectionError|Temporary failure in name resolution|"
        r"Network is unreachable|ConnectTimeout|Max retries exceeded",
        stderr,
    ):
        return (
            f"cannot download {', '.join(requirements)} for Lambda: the package index is "
            "unreachable (offline?); build once online, then the cache in "
            f"{build_dir()} is reused, or set PIP_INDEX_URL / PIP_FIND_LINKS to a mirror"
        )
    if missing:
        return (
            f"{', '.join(missing)}: no wheel for Lambda (CPython {LAMBDA_PYTHON}, "
            f"{platform_tags[0]} to {platform_tags[-1]}); pin a version that ships one, "
            "or vendor it yourself"
        )
    last = [line for line in stderr.strip().splitlines() if line.strip()][-1:] or ["no output"]
    return f"cannot install {', '.join(requirements)} for Lambda: {last[0].strip()[:300]}"


def _vendor(
    requirements: tuple[str, ...],
    architecture: str = "x86_64",
    python_version: str = LAMBDA_PYTHON,
    python: str = sys.executable,
) -> Path | None:
    """pip-install requirements, as Lambda's platform wheels for `architecture` and the
    runtime's `python_version`, into a cache folder keyed by them (reused, offline too)."""
    if not requirements:
        return None
    tags = platforms(architecture)
    key = "\n".join([*tags, python_version, *sorted(requirements)])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    target = build_dir() / f"deps-{digest}"
    if not (target / ".complete").exists():
        # Installed beside, then moved into place whole: two deploys building at once (two
        # stacks, two test workers) never see each other's half-installed folder.
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f"{target.name}.", dir=target.parent))
        done = subprocess.run(
            [
                *_pip(python),
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-compile",  # bytecode is the deploying Python's, not the runtime's
                "--target",
                str(staging),
                *[arg for tag in tags for arg in ("--platform", tag)],
                "--implementation",
                "cp",
                "--python-version",
                python_version,
                "--only-binary=:all:",
                *requirements,
            ],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise BuildError(_why(requirements, done.stderr, tags))
        (staging / ".complete").touch()
        try:
            staging.rename(target)
        except OSError:  # another build put it in place first (or a stale one is there)
            shutil.rmtree(staging, ignore_errors=True)
            if not (target / ".complete").exists():
                shutil.rmtree(target, ignore_errors=True)
                return _vendor(requirements, architecture, python_version, python)
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
    python_version: str = LAMBDA_PYTHON,
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
    deps = _vendor(requirements, architecture, python_version)
    if deps:
        # bin/ holds console scripts whose shebang names this machine's interpreter
        entries += [
            entry
            for entry in _files(deps, patterns=MACHINE_SPECIFIC)
            if not entry[1].startswith("bin/")
        ]
    digest = hashlib.sha256()
    for path, arcname in entries:
        digest.update(arcname.encode() + b"\0" + path.read_bytes())
    out = build_dir() / f"lambda-{digest.hexdigest()[:16]}.zip"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        # a name of its own, moved into place whole: a concurrent build of the same zip
        # writes the same bytes, and neither ever reads the other's half
        handle, name = tempfile.mkstemp(prefix=f"{out.stem}.", suffix=".tmp", dir=out.parent)
        os.close(handle)
        tmp = Path(name)
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for path, arcname in entries:
                info = zipfile.ZipInfo(arcname, FIXED_TIME)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, path.read_bytes())
        tmp.chmod(0o644)
        tmp.replace(out)
    return out


def lambda_code(
    requirements: tuple[str, ...] = (),
    sources: tuple[str, ...] = (),
    excludes: tuple[str, ...] = (),
    architecture: str = "x86_64",
    python_version: str = LAMBDA_PYTHON,
) -> pulumi.FileArchive:
    built = build_zip(requirements, sources, excludes, architecture, python_version)
    return pulumi.FileArchive(str(built))
