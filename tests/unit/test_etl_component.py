"""IdempotentEtl under Pulumi mocks: your own transform and buckets, a key prefix, least
privilege."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from exactly_once.components.etl import IdempotentEtl
from exactly_once.components.etl import IdempotentEtlArgs as Args
from tests.unit.pulumi_harness import run

CSV_TRANSFORM = {
    "transform": "etl_transforms.csv_jsonl:transform",
    "transform_source": "examples/etl",
}


def IdempotentEtlArgs(**args: Any) -> Args:  # the class, with the example transform
    return Args(**{**CSV_TRANSFORM, **args})


def test_an_existing_bucket_is_used_as_given_never_created_or_reconfigured() -> None:
    args = IdempotentEtlArgs(
        input_bucket_name="teams-uploads",
        input_prefix="incoming/",
        output_bucket_name="teams-results",
        trigger="eventbridge",
    )
    mocks = run(lambda: IdempotentEtl("etl", args))
    assert mocks.of_type("aws:s3/bucket:Bucket") == []  # neither bucket is created
    assert mocks.of_type("aws:s3/bucketNotification:BucketNotification") == []
    pattern = json.loads(mocks.named("etl-rule").inputs["eventPattern"])
    assert pattern["detail"] == {
        "bucket": {"name": ["teams-uploads"]},
        "object": {"key": [{"prefix": "incoming/"}]},
    }
    env = mocks.named("etl-transform").inputs["environment"]["variables"]
    assert env["OUTPUT_BUCKET"] == "teams-results"
    policy = json.loads(mocks.named("etl-transform-policy").inputs["policy"])
    by_action = {tuple(s["Action"]): s["Resource"] for s in policy["Statement"]}
    # reads only under the prefix; conditional-write (the default) HEADs and PUTs outputs
    # (the HEAD's 404 for an output not yet written needs ListBucket on its bucket)
    assert by_action[("s3:GetObject", "s3:GetObjectVersion")] == [
        "arn:aws:s3:::teams-uploads/incoming/*"
    ]
    assert by_action[("s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload")] == [
        "arn:aws:s3:::teams-results/*"
    ]
    assert by_action[("s3:ListBucket",)] == [
        "arn:aws:s3:::teams-uploads",
        "arn:aws:s3:::teams-results",
    ]


def test_a_created_bucket_with_a_prefix_and_suffix_filters_its_notification() -> None:
    args = IdempotentEtlArgs(input_prefix="incoming/", input_suffix=".csv")
    mocks = run(lambda: IdempotentEtl("etl", args))
    [notification] = mocks.of_type("aws:s3/bucketNotification:BucketNotification")
    [function] = notification.inputs["lambdaFunctions"]
    assert (function["filterPrefix"], function["filterSuffix"]) == ("incoming/", ".csv")


def test_only_this_accounts_bucket_may_invoke_and_created_buckets_keep_their_data() -> None:
    mocks = run(lambda: IdempotentEtl("etl", IdempotentEtlArgs()))
    permission = mocks.named("etl-s3-invoke").inputs
    assert permission["sourceAccount"] == "123456789012"
    assert permission["sourceArn"].startswith("arn:aws:s3:::")
    buckets = mocks.of_type("aws:s3/bucket:Bucket")
    assert len(buckets) == 2
    assert [b.inputs.get("forceDestroy", False) for b in buckets] == [False, False]
    test_stack = run(lambda: IdempotentEtl("etl", IdempotentEtlArgs(force_destroy=True)))
    assert [b.inputs["forceDestroy"] for b in test_stack.of_type("aws:s3/bucket:Bucket")] == [
        True,
        True,
    ]


def test_what_your_transform_calls_is_added_to_its_role() -> None:
    from exactly_once.components.roles import IamStatement

    table = "arn:aws:dynamodb:us-east-1:123456789012:table/rates"
    args = IdempotentEtlArgs(transform_statements=[IamStatement(["dynamodb:GetItem"], [table])])
    policy = json.loads(
        run(lambda: IdempotentEtl("etl", args)).named("etl-transform-policy").inputs["policy"]
    )
    assert {"Effect": "Allow", "Action": ["dynamodb:GetItem"], "Resource": [table]} in policy[
        "Statement"
    ]
    with pytest.raises(ValueError, match="every action"):
        IamStatement(["*"], [table]).statement()


def test_kms_keys_of_your_buckets_are_granted_only_when_given() -> None:
    key = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"

    def kms(args: Args) -> list[dict[str, Any]]:
        policy = json.loads(
            run(lambda: IdempotentEtl("etl", args)).named("etl-transform-policy").inputs["policy"]
        )
        return [s for s in policy["Statement"] if any(a.startswith("kms:") for a in s["Action"])]

    assert kms(IdempotentEtlArgs()) == []
    assert kms(IdempotentEtlArgs(kms_key_arns=[key])) == [
        {"Effect": "Allow", "Action": ["kms:Decrypt", "kms:GenerateDataKey"], "Resource": [key]}
    ]


@pytest.mark.parametrize(
    ("prefix", "suffix", "condition", "readable"),
    [
        ("incoming/", ".csv", {"wildcard": "incoming/*.csv"}, "incoming/*.csv"),
        ("", ".csv", {"suffix": ".csv"}, "*.csv"),
        ("incoming/", "", {"prefix": "incoming/"}, "incoming/*"),
    ],
)
def test_an_eventbridge_trigger_matches_the_prefix_and_suffix_and_reads_only_them(
    prefix: str, suffix: str, condition: dict[str, str], readable: str
) -> None:
    args = IdempotentEtlArgs(
        input_bucket_name="teams-uploads",
        input_prefix=prefix,
        input_suffix=suffix,
        trigger="eventbridge",
    )
    mocks = run(lambda: IdempotentEtl("etl", args))
    pattern = json.loads(mocks.named("etl-rule").inputs["eventPattern"])
    assert pattern["detail"]["object"] == {"key": [condition]}
    policy = json.loads(mocks.named("etl-transform-policy").inputs["policy"])
    by_action = {tuple(s["Action"]): s["Resource"] for s in policy["Statement"]}
    assert by_action[("s3:GetObject", "s3:GetObjectVersion")] == [
        f"arn:aws:s3:::teams-uploads/{readable}"
    ]


def test_an_existing_bucket_is_refused_a_notification_trigger() -> None:
    with pytest.raises(ValueError, match="trigger='eventbridge'"):
        IdempotentEtlArgs(input_bucket_name="teams-uploads", trigger="notification")


def test_the_users_transform_is_bundled_and_named_with_its_own_environment() -> None:
    args = IdempotentEtlArgs(
        transform="etl_transforms.jsonl_gzip:transform",
        transform_environment={"LEVEL": "9"},
        output_suffix=".jsonl.gz",
        content_type="application/gzip",
    )
    mocks = run(lambda: IdempotentEtl("etl", args))
    function = mocks.named("etl-transform").inputs
    env = function["environment"]["variables"]
    assert env["TRANSFORM"] == "etl_transforms.jsonl_gzip:transform"
    assert (env["LEVEL"], env["OUTPUT_SUFFIX"], env["CONTENT_TYPE"]) == (
        "9",
        ".jsonl.gz",
        "application/gzip",
    )
    assert function["handler"] == "exactly_once.handlers.etl.handler"
    names = zipfile.ZipFile(function["code"].path).namelist()
    assert "etl_transforms/jsonl_gzip.py" in names and "exactly_once/handlers/etl.py" in names


def test_a_created_output_bucket_drops_incomplete_multipart_uploads() -> None:
    mocks = run(lambda: IdempotentEtl("etl", IdempotentEtlArgs()))
    [lifecycle] = mocks.of_type("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    [rule] = lifecycle.inputs["rules"]
    assert rule["abortIncompleteMultipartUpload"] == {"daysAfterInitiation": 1}
    assert rule["status"] == "Enabled"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"transform": "etl_transforms.csv_jsonl"}, "'package.module:function'"),
        ({"transform": "etl_transforms.absent:transform"}, "no etl_transforms/absent.py"),
        # a function the module does not define: its first event would fail (SettingsError)
        ({"transform": "etl_transforms.csv_jsonl:transfrom"}, "defines no 'transfrom'"),
        ({"transform_source": "examples/nowhere"}, "is not a folder"),
        ({"transform_source": "<a copy of the package>"}, "'exactly_once' folder"),
        ({"transform_environment": {"OUTPUT_BUCKET": "x"}}, "may not set"),
        ({"transform_environment": {"AWS_REGION": "x"}}, "may not set"),
        # a variable with an option of its own names the option
        (
            {"transform_environment": {"POWERTOOLS_SERVICE_NAME": "x"}},
            r"POWERTOOLS_SERVICE_NAME: set platform.service",
        ),
        ({"part_size_mb": 4}, "at least 5"),
        ({"input_prefix": "a*/", "input_suffix": ".csv"}, "may not contain"),
    ],
)
def test_a_transform_that_cannot_be_run_is_refused_with_the_reason(
    changes: dict[str, Any], message: str, tmp_path: Path
) -> None:
    if changes.get("transform_source") == "<a copy of the package>":  # e.g. a vendored one
        (tmp_path / "exactly_once").mkdir()
        (tmp_path / "team.py").write_text("def transform(body, ref):\n    return body\n")
        changes = {"transform_source": str(tmp_path), "transform": "team:transform"}
    with pytest.raises(ValueError, match=message):
        IdempotentEtlArgs(**changes)


def test_a_transform_imported_assigned_or_built_at_run_time_is_taken(tmp_path: Path) -> None:
    (tmp_path / "by_import.py").write_text("from json import dumps as transform\n")
    (tmp_path / "by_assignment.py").write_text("transform = lambda source, obj: iter(())\n")
    (tmp_path / "by_getattr.py").write_text("def __getattr__(name):\n    return print\n")
    for module in ("by_import", "by_assignment", "by_getattr"):
        IdempotentEtlArgs(transform=f"{module}:transform", transform_source=str(tmp_path))


def test_a_transform_source_with_its_own_handlers_package_is_bundled_beside_ours(
    tmp_path: Path,
) -> None:
    # A team's code with a `handlers` package of its own: ours is exactly_once.handlers
    (tmp_path / "handlers").mkdir()
    (tmp_path / "handlers" / "__init__.py").write_text("")
    (tmp_path / "handlers" / "team.py").write_text("def transform(source, obj):\n    yield b''\n")
    args = IdempotentEtlArgs(transform="handlers.team:transform", transform_source=str(tmp_path))
    mocks = run(lambda: IdempotentEtl("etl", args))
    function = mocks.named("etl-transform").inputs
    names = zipfile.ZipFile(function["code"].path).namelist()
    assert {"handlers/team.py", "exactly_once/handlers/etl.py", "exactly_once/__init__.py"} <= set(
        names
    )
    assert function["environment"]["variables"]["TRANSFORM"] == "handlers.team:transform"


def test_a_requirements_txt_in_the_transform_folder_is_vendored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess

    from exactly_once.components import lambda_asset

    source = tmp_path / "team"
    (source / "team_etl").mkdir(parents=True)
    (source / "team_etl" / "__init__.py").write_text("def transform(source, obj):\n    yield b''\n")
    (source / "requirements.txt").write_text("# ours\nsix==1.16.0  # pinned\n\norjson\n")
    monkeypatch.setenv("EXACTLY_ONCE_BUILD_DIR", str(tmp_path / "build"))
    installs: list[list[str]] = []

    def run_(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        if args[1] == "-c":
            return subprocess.CompletedProcess(args, 0, "True\n", "")
        installs.append(args)
        Path(args[args.index("--target") + 1]).mkdir(parents=True, exist_ok=True)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(lambda_asset.subprocess, "run", run_)
    args = Args(transform="team_etl:transform", transform_source=str(source))
    run(lambda: IdempotentEtl("etl", args))
    [install] = installs
    assert install[-2:] == ["six==1.16.0", "orjson"]
    (source / "requirements.txt").write_text("--index-url https://mirror\nsix\n")
    with pytest.raises(ValueError, match="requirements only"):
        run(
            lambda: IdempotentEtl(
                "etl", Args(transform="team_etl:transform", transform_source=str(source))
            )
        )
