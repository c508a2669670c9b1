"""EventBridge event patterns the components share."""

from __future__ import annotations

import pulumi


def s3_object_created_pattern(
    *bucket_names: pulumi.Input[str], key_prefix: str = ""
) -> pulumi.Output[str]:
    """S3 "Object Created" events of these buckets (the bucket must send its events to
    EventBridge), of keys under `key_prefix` if given. Every S3 key strategy names the
    bucket, so one key in two buckets is two events."""
    detail: dict[str, object] = {"bucket": {"name": list(bucket_names)}}
    if key_prefix:
        detail["object"] = {"key": [{"prefix": key_prefix}]}
    return pulumi.Output.json_dumps(
        {"source": ["aws.s3"], "detail-type": ["Object Created"], "detail": detail}
    )
