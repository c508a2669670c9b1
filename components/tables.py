"""On-demand DynamoDB tables keyed by one string attribute, as most patterns need."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws


def key_table(
    name: str,
    parent: pulumi.Resource,
    key: str = "pk",
    ttl_attribute: str | None = None,
    point_in_time_recovery: bool = False,
) -> aws.dynamodb.Table:
    return aws.dynamodb.Table(
        name,
        billing_mode="PAY_PER_REQUEST",
        hash_key=key,
        attributes=[aws.dynamodb.TableAttributeArgs(name=key, type="S")],
        ttl=(
            aws.dynamodb.TableTtlArgs(attribute_name=ttl_attribute, enabled=True)
            if ttl_attribute
            else None
        ),
        point_in_time_recovery=(
            aws.dynamodb.TablePointInTimeRecoveryArgs(enabled=True)
            if point_in_time_recovery
            else None
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )
