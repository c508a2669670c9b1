"""EventBridge event patterns the components share."""

from __future__ import annotations

import pulumi


def s3_object_created_pattern(
    *bucket_names: pulumi.Input[str], key_prefix: str = "", key_suffix: str = ""
) -> pulumi.Output[str]:
    """S3 "Object Created" events of these buckets (the bucket must send its events to
    EventBridge), of keys under `key_prefix` and ending in `key_suffix` if given. Every S3
    key strategy names the bucket, so one key in two buckets is two events."""
    detail: dict[str, object] = {"bucket": {"name": list(bucket_names)}}
    if key_prefix and key_suffix:
        # One field's conditions are alternatives, so both ends are one wildcard match
        # (EventBridge user guide, eb-create-pattern-operators, "Wildcard matching").
        if "*" in key_prefix + key_suffix:
            raise ValueError("a key prefix and suffix together may not contain '*'")
        detail["object"] = {"key": [{"wildcard": f"{key_prefix}*{key_suffix}"}]}
    elif key_prefix:
        detail["object"] = {"key": [{"prefix": key_prefix}]}
    elif key_suffix:
        detail["object"] = {"key": [{"suffix": key_suffix}]}
    return pulumi.Output.json_dumps(
        {"source": ["aws.s3"], "detail-type": ["Object Created"], "detail": detail}
    )
