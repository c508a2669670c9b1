"""On-demand DynamoDB tables keyed by one string attribute, as most patterns need, and a
secondary index's key the way the installed pulumi-aws wants it."""

from __future__ import annotations

import inspect
from typing import Any

import pulumi
import pulumi_aws as aws


def index(
    name: str, hash_key: str, range_key: str, projection_type: str, warm_writes: int = 0
) -> Any:
    """A global secondary index by `key_schemas` where pulumi-aws has it (7.x releases
    deprecate the index's hash_key and range_key, with a warning on every run); by
    hash_key and range_key on older 7.x releases, which have nothing else. `warm_writes`:
    pre-warmed to that many writes a second (`warm_writes`)."""
    args = aws.dynamodb.TableGlobalSecondaryIndexArgs
    warm = {"warm_throughput": warm_writes_args(warm_writes, index=True)} if warm_writes else {}
    if "key_schemas" in inspect.signature(args.__init__).parameters:
        schema = aws.dynamodb.TableGlobalSecondaryIndexKeySchemaArgs
        return args(
            name=name,
            key_schemas=[
                schema(attribute_name=hash_key, key_type="HASH"),
                schema(attribute_name=range_key, key_type="RANGE"),
            ],
            projection_type=projection_type,
            **warm,
        )
    return args(
        name=name, hash_key=hash_key, range_key=range_key, projection_type=projection_type, **warm
    )


def warm_writes_args(writes: int, index: bool = False) -> Any:
    """A table's (or an index's) warm throughput of `writes` units a second: pre-warmed, so
    that a burst of that rate is served at once, not throttled while an on-demand table
    scales up ("Understanding DynamoDB warm throughput", DynamoDB developer guide; the
    increase is charged once, by DynamoDB's pricing)."""
    kind = "TableGlobalSecondaryIndexWarmThroughputArgs" if index else "TableWarmThroughputArgs"
    if not hasattr(aws.dynamodb, kind):
        raise ValueError(f"warm throughput needs a pulumi-aws with aws.dynamodb.{kind}")
    return getattr(aws.dynamodb, kind)(write_units_per_second=writes)


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
