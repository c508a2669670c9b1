"""What the REST APIs share: an API key with a throttled usage plan on a stage, and the
fingerprint that redeploys a stage whenever anything it serves changes."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence

import pulumi
import pulumi_aws as aws

# "Stage names can only contain alphanumeric characters, hyphens, and underscores. Maximum
# length is 128 characters." (API Gateway API reference, Stage: stageName)
_STAGE_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")


def stage_name(name: str) -> str:
    """`name` if API Gateway takes it as a stage name; else a ValueError saying why."""
    if not _STAGE_NAME.fullmatch(name):  # (not match: "$" lets a final newline by)
        raise ValueError(
            f"stage_name {name!r}: API Gateway takes 1 to 128 letters, digits, - and _"
        )
    return name


# Every property of an API's pieces (methods, integrations and their responses, gateway
# responses, validators, resources) that a deployment snapshots: a change to any of them
# must make a new deployment, or the stage keeps serving the old one.
SERVED = (
    "path_part",
    "http_method",
    "authorization",
    "authorizer_id",
    "api_key_required",
    "request_validator_id",
    "request_parameters",
    "request_models",
    "type",
    "uri",
    "credentials",
    "integration_http_method",
    "request_templates",
    "passthrough_behavior",
    "selection_pattern",
    "status_code",
    "response_type",
    "response_templates",
    "response_parameters",
    "response_models",
    "validate_request_body",
    "validate_request_parameters",
)


def fingerprint(pieces: Sequence[pulumi.Resource]) -> pulumi.Output[str]:
    """A hash of everything `pieces` serve (see SERVED): a Deployment's `triggers`."""
    values = [
        pulumi.Output.all(
            type(piece).__name__,
            *[getattr(piece, name) for name in SERVED if hasattr(type(piece), name)],
        )
        for piece in pieces
    ]
    return pulumi.Output.all(*values).apply(
        lambda served: hashlib.sha256(
            json.dumps(served, sort_keys=True, default=str).encode()
        ).hexdigest()
    )


def api_key(
    name: str,
    api: aws.apigateway.RestApi,
    stage: aws.apigateway.Stage,
    parent: pulumi.Resource,
    rate_limit: float = 100,
    burst_limit: int = 200,
) -> pulumi.Output[str]:
    """A key callers send as `x-api-key`, and the plan that admits it to `stage` (secret)."""
    child = pulumi.ResourceOptions(parent=parent)
    key = aws.apigateway.ApiKey(f"{name}-key", opts=child)
    plan = aws.apigateway.UsagePlan(
        f"{name}-plan",
        api_stages=[aws.apigateway.UsagePlanApiStageArgs(api_id=api.id, stage=stage.stage_name)],
        throttle_settings=aws.apigateway.UsagePlanThrottleSettingsArgs(
            rate_limit=rate_limit, burst_limit=burst_limit
        ),
        opts=child,
    )
    aws.apigateway.UsagePlanKey(
        f"{name}-plan-key", key_id=key.id, key_type="API_KEY", usage_plan_id=plan.id, opts=child
    )
    return pulumi.Output.secret(key.value)
