"""Every Python sample in docs/ runs: Pulumi programs under Pulumi mocks (they must declare
resources), Lambda-side samples (transforms, handlers) against moto."""

from __future__ import annotations

import inspect
import io
import re
from typing import Any

import pytest
from moto import mock_aws

from exactly_once.handlers import runtime
from exactly_once.handlers.s3_events import ObjectRef
from tests.unit.pulumi_harness import ROOT, run
from tooling import events

BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
SAMPLES = [
    pytest.param(code, id=f"{path.name}#{n}")
    for path in sorted((ROOT / "docs").glob("*.md"))
    for n, code in enumerate(BLOCK.findall(path.read_text()))
]
# A user's tests (docs/testing.md) run under pytest from the built wheel instead
# (tests/package/test_wheel.py): they declare nothing when executed.
USERS_TESTS = [sample for sample in SAMPLES if "exactly_once.testing" in sample.values[0]]
PROGRAMS = [
    sample
    for sample in SAMPLES
    if "from exactly_once.components" in sample.values[0] and sample not in USERS_TESTS
]
LAMBDA_SIDE = [sample for sample in SAMPLES if sample not in PROGRAMS + USERS_TESTS]


def test_the_docs_have_samples() -> None:
    assert len(PROGRAMS) >= 5 and LAMBDA_SIDE and USERS_TESTS


@pytest.mark.parametrize("code", PROGRAMS)
def test_sample_runs(code: str) -> None:
    mocks = run(lambda: exec(compile(code, "<docs>", "exec"), {"__name__": "__docs__"}))
    assert [r for r in mocks.resources if r.custom], "the sample declared no resources"


@pytest.mark.parametrize("code", LAMBDA_SIDE)
def test_lambda_side_sample_works(code: str) -> None:
    """Its transforms turn bytes into bytes; its handler publishes once, then finds it."""
    with mock_aws():
        runtime.client.cache_clear()
        s3 = runtime.client("s3")
        for bucket in ("acme-uploads", "acme-curated"):
            s3.create_bucket(Bucket=bucket)
        namespace: dict[str, Any] = {"__name__": "__docs__"}
        exec(compile(code, "<docs>", "exec"), namespace)
        if "@receiver(" in code:  # a scheduler target: one message sent twice, applied once
            assert_receives_once(code, namespace)
            return
        transforms = [
            fn
            for fn in namespace.values()
            if inspect.isfunction(fn) and [*inspect.signature(fn).parameters] == ["source", "obj"]
        ]
        ref = ObjectRef("acme-uploads", "a.txt", None, "etag")
        for transform in transforms:
            assert b"".join(transform(io.BytesIO(b"hello"), ref))
        if "handler" in namespace:
            put = s3.put_object(Bucket="acme-uploads", Key="a.txt", Body=b"hello")
            event = events.notification("acme-uploads", "a.txt", etag=put["ETag"])
            statuses = [namespace["handler"](event, None)["results"][0]["status"] for _ in "ab"]
            assert statuses == ["WRITTEN", "DUPLICATE"]
        assert transforms or "handler" in namespace, "the sample defines nothing to run"
    runtime.client.cache_clear()


def assert_receives_once(code: str, namespace: dict[str, Any]) -> None:
    table = re.search(r'@receiver\(table="([^"]+)"\)', code)
    assert table is not None, "the receiver sample names its table"
    runtime.client("dynamodb").create_table(
        TableName=table.group(1),
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    message = {"id": "m-1", "channel": "email", "parameters": {"to": "ann"}, "publishTime": 0}
    answers = [namespace["handler"](message, None) for _ in "ab"]
    assert answers[0] == answers[1] and namespace["SENT"] == ["ann"]


def test_every_sample_and_the_python_example_type_check(tmp_path: Any) -> None:
    """Plain mypy (as a user's editor runs it) over every Python block of docs/ and
    examples/python, against the package's own hints (py.typed)."""
    import fcntl
    import subprocess
    import sys

    for sample in SAMPLES:
        name = re.sub(r"\W", "_", sample.id or "sample")
        (tmp_path / f"{name}.py").write_text(sample.values[0])
    example = (ROOT / "examples" / "python" / "__main__.py").read_text()
    (tmp_path / "example_python.py").write_text(example)
    # mypy's defaults with the two warnings the shipped code's check adds (stricter, so a
    # sample that passes here passes a user's default editor): with the same options, that
    # check's cache serves the package, Pulumi's and boto3's hints, which are most of the time
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\npython_version = 3.11\nwarn_unused_ignores = True\n"
        f"warn_redundant_casts = True\ncache_dir = {ROOT / '.mypy_cache'}\n"
    )
    # (under the cache's lock, as scripts/test's check of the shipped code beside it takes
    # it: mypy's SQLite cache is not for two runs at once)
    (ROOT / ".mypy_cache").mkdir(exist_ok=True)
    with open(ROOT / ".mypy_cache" / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = subprocess.run(
            [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "."],
            cwd=tmp_path,
            capture_output=True,
            text=True,
        )
    assert found.returncode == 0, found.stdout[-4000:]


def test_the_platform_docs_give_the_schedulers_function_sizes_as_deployed() -> None:
    from tests.unit.pulumi_harness import component

    row = next(
        line
        for line in (ROOT / "docs/platform.md").read_text().splitlines()
        if line.startswith("| Scheduler |")
    )
    documented = {
        name: (int(memory.replace(",", "")), int(timeout))
        for name, memory, timeout in re.findall(r"`([a-z-]+)` \(([\d,]+) / (\d+)\)", row)
    }
    mocks = run(lambda: component("scheduler"))
    deployed = {
        r.name.removeprefix("c-"): (int(r.inputs["memorySize"]), int(r.inputs["timeout"]))
        for r in mocks.of_type("aws:lambda/function:Function")
    }
    assert documented == deployed
