"""The one place the AWS provider is configured, for real AWS or for LocalStack."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

# Every service a component talks to; LocalStack serves them all on one URL.
SERVICES = (
    "apigateway",
    "cloudwatch",
    "cloudwatchevents",
    "cloudwatchlogs",
    "dynamodb",
    "eventbridge",
    "iam",
    "lambda_",
    "s3",
    "scheduler",
    "sfn",
    "sqs",
    "sts",
)


def aws_provider(
    name: str,
    region: str,
    endpoint_url: str | None = None,
    opts: pulumi.ResourceOptions | None = None,
) -> aws.Provider:
    """An explicit provider; with `endpoint_url` every service points at LocalStack."""
    if not endpoint_url:
        return aws.Provider(name, region=region, opts=opts)
    return aws.Provider(
        name,
        region=region,
        access_key="test",
        secret_key="test",
        endpoints=[aws.ProviderEndpointArgs(**{service: endpoint_url for service in SERVICES})],
        s3_use_path_style=True,
        skip_credentials_validation=True,
        skip_requesting_account_id=True,
        skip_metadata_api_check=True,
        opts=opts,
    )
