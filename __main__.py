"""The Pulumi program: one stack per pattern, or `local` with all of them on LocalStack.

Stack config is read here and only here; components get plain args.
"""

from __future__ import annotations

import pulumi

from components.buckets import secure_bucket
from components.config import args_from_config
from components.name_dedup import NameDedupStarter, NameDedupStarterArgs
from components.provider import aws_provider

config = pulumi.Config()
region = pulumi.Config("aws").get("region") or "us-east-1"
endpoint = config.get("endpoint") or None
provider = aws_provider("aws", region, endpoint)
opts = pulumi.ResourceOptions(provider=provider)
pulumi.export("region", region)
pulumi.export("endpoint", endpoint or "")

name_dedup = config.get_object("nameDedup")
if name_dedup is not None:
    uploads = secure_bucket(
        "uploads", versioned=True, eventbridge=True, force_destroy=True, opts=opts
    )
    starter = NameDedupStarter(
        "name-dedup",
        args_from_config(NameDedupStarterArgs, name_dedup, bucket_name=uploads.bucket),
        opts,
    )
    pulumi.export(
        "nameDedup",
        {
            "bucket": uploads.bucket,
            "functionName": starter.function.name,
            "stateMachineArn": starter.state_machine_arn,
            "dlqUrl": starter.dlq.url,
        },
    )
