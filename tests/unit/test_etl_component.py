"""IdempotentEtl under Pulumi mocks: bringing your own buckets, a key prefix, least privilege."""

from __future__ import annotations

import json

import pytest

from components.etl import IdempotentEtl, IdempotentEtlArgs
from tests.unit.pulumi_harness import run


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
    # reads only under the prefix; conditional-write (the default) only PUTs outputs
    assert by_action[("s3:GetObject", "s3:GetObjectVersion")] == [
        "arn:aws:s3:::teams-uploads/incoming/*"
    ]
    assert by_action[("s3:PutObject",)] == ["arn:aws:s3:::teams-results/*"]
    assert by_action[("s3:ListBucket",)] == ["arn:aws:s3:::teams-uploads"]


def test_a_created_bucket_with_a_prefix_filters_its_notification() -> None:
    mocks = run(lambda: IdempotentEtl("etl", IdempotentEtlArgs(input_prefix="incoming/")))
    [notification] = mocks.of_type("aws:s3/bucketNotification:BucketNotification")
    [function] = notification.inputs["lambdaFunctions"]
    assert function["filterPrefix"] == "incoming/"


def test_an_existing_bucket_is_refused_a_notification_trigger() -> None:
    with pytest.raises(ValueError, match="trigger='eventbridge'"):
        IdempotentEtlArgs(input_bucket_name="teams-uploads", trigger="notification")
