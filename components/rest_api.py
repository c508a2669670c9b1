"""What the REST APIs share: an API key with a throttled usage plan on a stage."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws


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
