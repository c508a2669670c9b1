"""The package as users install it: a built wheel, installed outside the repository (not
editable), running a user's program under Pulumi mocks from the user's own project.

Shows that every component deploys from the installed files (nothing found through the
repository's layout), that function assets are built into the user's project and are
byte-identical to the repository's, and that nothing is written into the installation.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPONENT_NAMES = (
    "NameDedupStarter",
    "ApiGatewayStarter",
    "Scheduler",
    "ResumableWorkflow",
    "IdempotentEtl",
)
NOT_SOURCE = (".git", ".venv", ".localstack", ".pulumi-local", "build", "node_modules")
NOT_SOURCE += ("*.egg-info", ".mypy_cache", ".ruff_cache", ".pytest_cache", "__pycache__")

# A user's program run as `pulumi up` would, under mocks (no repository code imported):
# it records each Lambda's code archive and every resource type.
RUNNER = r"""
import hashlib, json, runpy, sys
import pulumi
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

types, archives = [], {}

class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        types.append(args.typ)
        if args.typ == "aws:lambda/function:Function":
            path = args.inputs["code"].path
            archives[args.name] = hashlib.sha256(open(path, "rb").read()).hexdigest()
        name = args.inputs.get("name") or args.name
        return f"{args.name}-id", {**args.inputs, "arn": f"arn:aws:x:us-east-1:123456789012:{name}",
            "name": name, "url": "https://example/" + name, "invokeArn": "arn:aws:apigateway:x",
            "streamArn": f"arn:aws:dynamodb:us-east-1:123456789012:table/{name}/stream/1",
            "rootResourceId": "root", "executionArn": "arn:aws:execute-api:x",
            "invokeUrl": "https://x/v1"}
    def call(self, args):
        return {"accountId": "123456789012", "name": "us-east-1", "region": "us-east-1"}, []

pulumi.runtime.set_mocks(Mocks(), project="users-project", stack="dev", preview=False)

def program():  # plain: pulumi 3.168 (our floor) calls it without awaiting
    runpy.run_path(sys.argv[1])

_sync_await(run_pulumi_func(program))
import exactly_once
print(json.dumps(
    {"package": exactly_once.__file__, "types": sorted(set(types)), "archives": archives}
))
"""


def files(tree: Path) -> dict[str, int]:
    return {str(p.relative_to(tree)): p.stat().st_size for p in tree.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout's sources."""
    work = tmp_path_factory.mktemp("wheel")
    # From a copy without build output: setuptools reuses build/lib, which keeps a deleted
    # module until cleaned, and the wheel would ship it.
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "dist"), str(source)],
        check=True,
    )
    [built] = (work / "dist").glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, installed into a folder of its own."""
    site = tmp_path_factory.mktemp("site")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    return site


def test_the_wheel_is_one_namespace_of_exactly_the_source_folders_modules(wheel: Path) -> None:
    from exactly_once.components.package import VERSION

    names = zipfile.ZipFile(wheel).namelist()
    # nothing takes a generic top-level name (`handlers`) from a user's code
    assert {name.split("/")[0] for name in names} == {
        "exactly_once",
        f"pulumi_exactly_once-{VERSION}.dist-info",
    }
    # every module of the mapped folders, and nothing else (no stale or missing module)
    sources = {"package": "", "components": "components/", "handlers": "handlers/", "ops": "ops/"}
    expected = {
        f"exactly_once/{inside}{path.name}"
        for folder, inside in sources.items()
        for path in (ROOT / folder).glob("*.py")
    }
    assert {name for name in names if name.endswith(".py")} == expected
    assert "exactly_once/py.typed" in names


def users_project(where: Path) -> Path:
    """The Python example as a user's own project, its transform folder beside it (as in
    examples/), outside the repository."""
    project = where / "project"
    shutil.copytree(ROOT / "examples" / "python", project)
    shutil.copytree(ROOT / "examples" / "etl", where / "etl")
    return project


def run_program(site: Path | None, project: Path, python: str = sys.executable) -> dict:
    """The project's program under mocks, importing the package from `site` (a folder the
    wheel was installed into) or else from `python`'s own environment."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    if site is not None:
        env["PYTHONPATH"] = str(site)  # before the test venv's own (editable) install
    env.pop("EXACTLY_ONCE_BUILD_DIR", None)
    (project / "runner.py").write_text(RUNNER)
    done = subprocess.run(
        [python, "runner.py", "__main__.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_users_program_deploys_every_component_from_the_installed_wheel(
    installed: Path, tmp_path: Path
) -> None:
    # GIVEN a user's project outside the repository: their program and their own transform
    project = users_project(tmp_path)
    before = files(installed)
    # WHEN it runs as `pulumi up` would
    result = run_program(installed, project)
    # THEN the installed package served it, every component was built
    assert Path(result["package"]).is_relative_to(installed)
    for component in COMPONENT_NAMES:
        assert f"exactly-once:index:{component}" in result["types"]
    # AND the function assets were built into the user's project, none into the install
    built = sorted((project / "build" / "lambda").glob("lambda-*.zip"))
    assert built and len(result["archives"]) >= 5
    assert files(installed) == before
    # AND the package says it is typed
    assert (installed / "exactly_once" / "py.typed").exists()


def test_assets_are_byte_identical_from_the_repository_and_from_the_wheel(
    installed: Path, tmp_path: Path
) -> None:
    from exactly_once.components.lambda_asset import build_zip

    project = users_project(tmp_path)
    from_wheel = run_program(installed, project)["archives"]
    # the handlers' zip, built here from the checkout (no sources, no requirements)
    import hashlib

    from_checkout = hashlib.sha256(build_zip().read_bytes()).hexdigest()
    assert from_checkout in from_wheel.values()


def floors() -> list[str]:
    """The `pulumi` extra's dependencies pinned at their declared minimums (pyproject's
    `>=` floors: the one place they are written)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = project["optional-dependencies"]["pulumi"]
    pinned = [re.sub(r">=([^,;\s]+).*", r"==\1", requirement) for requirement in declared]
    assert all("==" in pin for pin in pinned), declared  # every dependency has a floor
    return pinned


@pytest.fixture(scope="module")
def at_minimums(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh venv with the wheel and every dependency at its declared minimum: the
    interpreter's path. Made once a run: the tests that use it may land on different
    workers (pytest-xdist), each of which would otherwise install Pulumi and the AWS
    provider again (20-45 s)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the run's
    venv = shared / "minimums" / "venv"
    python = str(venv / "bin" / "python")
    with open(shared / "minimums.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (released when closed)
        if (venv.parent / "done").exists():
            return python
        shutil.rmtree(venv.parent, ignore_errors=True)  # (a worker's that failed half way)
        venv.parent.mkdir()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        constraints = venv.parent / "constraints.txt"
        constraints.write_text("\n".join(floors()) + "\n")
        wanted = ["-c", str(constraints), f"{wheel}[pulumi]"]
        # (what is installed is the question here, not by what: uv, where scripts/setup put
        # it, resolves and installs the same in a fraction of pip's 20-45 s; compiled, as
        # pip would, where PYTHONDONTWRITEBYTECODE leaves each run to compile its imports)
        uv = Path(sys.executable).with_name("uv")
        by_uv = [str(uv), "pip", "install", "--quiet", "--compile-bytecode", "--python", python]
        installed = uv.exists() and subprocess.run([*by_uv, *wanted]).returncode == 0
        if not installed:
            pip = [python, "-m", "pip", "--disable-pip-version-check", "--quiet", "install"]
            subprocess.run([*pip, *wanted], check=True)
        (venv.parent / "done").touch()
    return python


@pytest.mark.heavy(25)
def test_at_the_minimum_versions_every_component_deploys_and_the_schema_is_the_same(
    at_minimums: str, tmp_path: Path
) -> None:
    # GIVEN pulumi, pulumi-aws, boto3 and jmespath at pyproject's floors
    versions = subprocess.run(
        [at_minimums, "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    found = {canonicalize_name(p["name"]): p["version"] for p in json.loads(versions.stdout)}
    for pin in floors():
        name, version = pin.split("==")
        assert Version(found[canonicalize_name(name)]) == Version(version), pin
    # WHEN a user's program uses every component, under mocks
    result = run_program(None, users_project(tmp_path), python=at_minimums)
    # THEN every component deploys with its functions
    for component in COMPONENT_NAMES:
        assert f"exactly-once:index:{component}" in result["types"]
    assert len(result["archives"]) >= 5
    # AND the package's schema (the analyzer of the oldest pulumi) has the same inputs
    script = "import json; from exactly_once.components.package import schema; "
    script += "print(json.dumps(schema()))"
    oldest = subprocess.run(
        [at_minimums, "-c", script], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    from exactly_once.components.package import schema

    def inputs(document: dict) -> dict[str, list[str]]:
        resources = document["resources"].items()
        return {token: sorted(spec["inputProperties"]) for token, spec in resources}

    assert inputs(json.loads(oldest.stdout)) == inputs(schema())


def test_the_oldest_boto3_has_the_conditional_writes_the_handlers_send(at_minimums: str) -> None:
    # S3 PutObject/CompleteMultipartUpload IfNoneMatch arrived in botocore 1.35.16
    script = """
from botocore.session import get_session
s3 = get_session().get_service_model("s3")
for operation in ("PutObject", "CompleteMultipartUpload"):
    assert "IfNoneMatch" in s3.operation_model(operation).input_shape.members, operation
"""
    subprocess.run([at_minimums, "-c", script], check=True)


def test_the_runtime_library_installs_alone_in_under_5_mb(wheel: Path, tmp_path: Path) -> None:
    """What a Lambda of your own carries (`pip install --target`): the library and its
    declared dependencies (none: the Lambda runtime has boto3), no Pulumi."""
    target = tmp_path / "lambda"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--disable-pip-version-check",
            "--quiet",
            "install",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
    assert size < 5 * 1024 * 1024, f"{size / 1e6:.1f} MB"
    tops = {p.name for p in target.iterdir()}
    assert not any(name.startswith("pulumi") and "exactly_once" not in name for name in tops), tops
    assert (target / "exactly_once" / "handlers" / "etl.py").exists()


def test_the_version_has_one_home() -> None:
    import tomllib

    from exactly_once.components.package import VERSION, schema, schema_version

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    # the schema states it as semver (0.5.0.dev0 is 0.5.0-0.dev.0); CHANGELOG.md's rule for
    # it: tests/package/test_release.py
    assert declared == VERSION and schema()["version"] == schema_version(declared)


@pytest.mark.heavy(22)
def test_every_aws_api_the_handlers_call_is_in_the_oldest_botocore_or_declared_newer(
    at_minimums: str, tmp_path: Path
) -> None:
    # GIVEN every API (operation and parameter) the handlers called in the fault explorer's
    # runs of every pattern, its faults included (retries, re-runs, sweeps, redrives,
    # restarts: a failed call at every call; at 0.5.0.dev0 that reached the 87 APIs that
    # failed calls, error answers and dead invocations at every call reach together, in a
    # third of their time)
    from exactly_once.handlers.sdk import NEWER
    from tests.explore import explorer

    called: set[str] = set()
    for scenario in explorer.all_scenarios():
        called |= explorer.explore(scenario, 0, only=("fail",)).apis
    assert {"dynamodb.UpdateItem.ConditionExpression", "stepfunctions.StartExecution"} <= called
    listed = tmp_path / "apis.json"
    listed.write_text(json.dumps(sorted(called)))
    # THEN the oldest botocore the package allows has each, except those declared newer
    # (handlers/sdk.py, with what the handlers do about an older SDK), and those are
    # really missing there: the declaration is neither short nor stale
    script = """
import json, sys
from botocore.session import get_session
session = get_session()
missing = []
for api in json.load(open(sys.argv[1])) + sys.argv[2].split(","):
    service, operation, *parameter = api.split(".")
    model = session.get_service_model(service)
    if operation not in model.operation_names:
        missing.append(f"{service}.{operation}")  # its parameters go with it
    elif parameter and parameter[0] not in model.operation_model(operation).input_shape.members:
        missing.append(api)
print(json.dumps(sorted(set(missing))))
"""
    result = subprocess.run(
        [at_minimums, "-c", script, str(listed), ",".join(NEWER)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert set(json.loads(result.stdout)) == set(NEWER)


def test_the_testing_guide_passes_under_pytest_from_the_wheel(
    at_minimums: str, tmp_path: Path
) -> None:
    """docs/testing.md's examples, each saved as a user's test file and run by pytest in a
    fresh venv with the wheel (its dependencies at their floors): exactly_once.testing
    ships, and answers as the guide says (the components' outputs, a policy document of the
    user's own, a name two resources share)."""
    guide = (ROOT / "docs" / "testing.md").read_text()
    examples = [
        block
        for block in re.findall(r"```python\n(.*?)```", guide, re.DOTALL)
        if "exactly_once.testing" in block
    ]
    covered = ("get_policy_document(", 'named("send-email", type=', "run(program)")
    assert all(any(case in example for example in examples) for case in covered), covered
    for n, example in enumerate(examples):
        (tmp_path / f"test_guide_{n}.py").write_text(example)
    pip = [at_minimums, "-m", "pip", "--disable-pip-version-check", "--quiet", "install"]
    subprocess.run([*pip, "pytest>=8"], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    done = subprocess.run(
        [at_minimums, "-m", "pytest", "-q", "-p", "no:cacheprovider", "."],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    expected = sum(example.count("\ndef test_") for example in examples)
    assert done.returncode == 0 and f"{expected} passed" in done.stdout, done.stdout[-3000:]


USERS_RECEIVER_TEST = """
import os

import boto3
from moto import mock_aws

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")


def test_a_message_sent_twice_is_applied_once():
    with mock_aws():
        import reminder

        boto3.client("dynamodb").create_table(
            TableName="reminders-received",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        message = {"id": "m-1", "channel": "email", "parameters": {"to": "ann"}}
        first, again = (reminder.handler(message, None) for _ in "ab")
        assert first == again == {"sent": True} and reminder.SENT == ["ann"]
"""


def test_the_receiver_sample_applies_a_message_once_under_pytest_from_the_wheel(
    at_minimums: str, tmp_path: Path
) -> None:
    """docs/scheduler.md's receiver, saved as a user's function module and tested as a user
    would (pytest, moto) in the fresh venv with the wheel, boto3 at its floor."""
    guide = (ROOT / "docs" / "scheduler.md").read_text()
    [sample] = [
        block
        for block in re.findall(r"```python\n(.*?)```", guide, re.DOTALL)
        if "@receiver(" in block
    ]
    (tmp_path / "reminder.py").write_text(sample)
    (tmp_path / "test_reminder.py").write_text(USERS_RECEIVER_TEST)
    installed = subprocess.run(
        [at_minimums, "-m", "pip", "freeze"], capture_output=True, text=True, check=True
    ).stdout
    kept = tmp_path / "kept.txt"  # moto must not lift boto3 off its floor
    kept.write_text("\n".join(line for line in installed.split("\n") if "boto" in line))
    pip = [at_minimums, "-m", "pip", "--disable-pip-version-check", "--quiet", "install"]
    subprocess.run([*pip, "-c", str(kept), "pytest>=8", "moto[dynamodb]>=5"], check=True)
    away = ("PYTHONPATH", "PYTEST_ADDOPTS", "AWS_ENDPOINT_URL")  # (moto answers, not LocalStack)
    env = {k: v for k, v in os.environ.items() if k not in away}
    done = subprocess.run(
        [at_minimums, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_reminder.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:]


# `exactly-once audit` as a user runs it, against moto (its own process, the installed
# package first on the path): an ETL with one output missing.
AUDIT_RUNNER = r"""
import json, sys, time
from moto import mock_aws
with mock_aws():
    import boto3
    s3 = boto3.client("s3", region_name="us-east-1")
    for bucket in ("uploads", "outputs"):
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket="uploads", VersioningConfiguration={"Status": "Enabled"})
    for key in ("a.csv", "b.csv"):
        version = s3.put_object(Bucket="uploads", Key=key, Body=b"1")["VersionId"]
        if key == "a.csv":
            s3.put_object(Bucket="outputs", Key=f"out/{key}.{version}.jsonl", Body=b"{}")
    from exactly_once.ops.__main__ import main
    import exactly_once
    print(exactly_once.__file__, file=sys.stderr)
    sys.exit(main(["audit", "--outputs", sys.argv[1], "--grace-minutes", "0",
                   "--region", "us-east-1", "--format", "table"]))
"""


def test_the_audit_runs_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    outputs = {
        "kind": "IdempotentEtl",
        "inputBucket": "uploads",
        "inputPrefix": "",
        "inputSuffix": "",
        "outputBucket": "outputs",
        "outputPrefix": "out/",
        "outputSuffix": ".jsonl",
        "controlTable": "",
        "recordTtlSeconds": 604800,
    }
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    (tmp_path / "audit.py").write_text(AUDIT_RUNNER)
    env = {**os.environ, "PYTHONPATH": str(installed), "PYTHONDONTWRITEBYTECODE": "1"}
    env |= {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
    done = subprocess.run(
        [sys.executable, "audit.py", "outputs.json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    # the installed package answered: one input lost (b.csv), exit 3
    assert Path(done.stderr.splitlines()[0]).is_relative_to(installed), done.stderr[-2000:]
    assert done.returncode == 3, done.stderr[-2000:]
    assert "1 lost, 0 doubled, 0 pending" in done.stdout
    assert "s3://uploads/b.csv#" in done.stdout
