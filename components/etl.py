"""Pattern 5: S3 PutObject -> transform Lambda -> exactly one output per input object version."""

from __future__ import annotations

import dataclasses
import typing
from typing import Literal

import pulumi
import pulumi_aws as aws

from components.buckets import secure_bucket
from components.event_patterns import s3_object_created_pattern
from components.functions import (
    allow,
    dead_letter_queue,
    handler_function,
    invoke_from_rule,
)
from components.tables import key_table
from handlers.csv_transform import DEFAULT_SCHEMA, check_schema
from handlers.etl import STRATEGIES, EtlSettings, Strategy
from handlers.runtime import LogLevel
from handlers.settings import encode

POWERTOOLS = ("aws-lambda-powertools>=3.0,<4",)
# PutObject's IfNoneMatch arrived in botocore 1.35.16; the SDK a Lambda runtime includes
# varies by runtime and region (Lambda developer guide, "Runtime-included SDK versions"),
# so the conditional-write function carries its own.
CONDITIONAL_WRITE_SDK = ("boto3>=1.35.16",)
REQUIREMENTS: dict[str, tuple[str, ...]] = {
    "powertools": POWERTOOLS,
    "conditional-write": CONDITIONAL_WRITE_SDK,
}
Trigger = Literal["notification", "eventbridge"]
# A test stack's fault -> the entry point that injects it (handlers/fault_hooks.py); real
# stacks run the handler itself.
FaultInjection = Literal["", "crash-after-put"]
FAULT_HANDLERS: dict[str, str] = {
    "": "handlers.etl.handler",
    "crash-after-put": "handlers.fault_hooks.etl_crash_after_put",
}
TRIGGERS: tuple[Trigger, ...] = typing.get_args(Trigger)


@dataclasses.dataclass
class IdempotentEtlArgs:
    """`strategy`: conditional-write | deterministic | control-record | powertools. `trigger`: an S3
    notification (default) or an EventBridge rule. `fault_injection` is for test stacks
    ('crash-after-put': the handler runs through handlers/fault_hooks.py)."""

    strategy: Strategy = "conditional-write"
    trigger: Trigger = "notification"
    schema: dict[str, str] = dataclasses.field(default_factory=lambda: dict(DEFAULT_SCHEMA))
    output_prefix: str = "out/"
    record_ttl_days: int = 7
    timeout: int = 60
    memory_size: int = 512
    log_level: LogLevel = "INFO"
    fault_injection: FaultInjection = ""
    input_bucket_name: pulumi.Input[str] | None = None
    """An existing input bucket (yours: its notification configuration stays yours, so
    the trigger is EventBridge; turn on its EventBridge notifications). None: create one."""
    input_prefix: str = ""
    """Only objects under this key prefix are transformed (and may be read)."""
    output_bucket_name: pulumi.Input[str] | None = None
    """An existing output bucket. None: create one."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {self.strategy!r}")
        if self.trigger not in TRIGGERS:
            raise ValueError(f"trigger must be one of {TRIGGERS}, got {self.trigger!r}")
        check_schema(self.schema)
        if self.fault_injection not in typing.get_args(FaultInjection):
            raise ValueError(f"unknown fault_injection {self.fault_injection!r}")
        if self.input_bucket_name is not None and self.trigger != "eventbridge":
            raise ValueError(
                "an existing input bucket's notification configuration is its owner's: use "
                "trigger='eventbridge' and turn on the bucket's EventBridge notifications"
            )


class IdempotentEtl(pulumi.ComponentResource):
    input_bucket_name: pulumi.Output[str]
    output_bucket_name: pulumi.Output[str]
    control_table: aws.dynamodb.Table
    function: aws.lambda_.Function
    dlq: aws.sqs.Queue

    def __init__(
        self, name: str, args: IdempotentEtlArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        args.validate()
        super().__init__("exactly-once:index:IdempotentEtl", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)
        # A created input is versioned: every upload of a key is a version to transform once
        # (an unversioned bucket of yours works too: each write is told apart by its ETag).
        created_in = (
            secure_bucket(f"{name}-in", self, versioned=True, force_destroy=True)
            if args.input_bucket_name is None
            else None
        )
        self.input_bucket_name, input_arn = self._bucket(args.input_bucket_name, created_in)
        created_out = (
            secure_bucket(f"{name}-out", self, force_destroy=True)
            if args.output_bucket_name is None
            else None
        )
        self.output_bucket_name, output_arn = self._bucket(args.output_bucket_name, created_out)
        self.control_table = key_table(
            f"{name}-control",
            self,
            key="id",
            ttl_attribute="expiration",
            point_in_time_recovery=True,
        )
        self.dlq = dead_letter_queue(name, self)
        objects_in = input_arn.apply(lambda arn: f"{arn}/{args.input_prefix}*")
        objects_out = output_arn.apply(lambda arn: f"{arn}/*")
        # S3 answers a missing key with 404 only to a caller that may list the bucket, and
        # with 403 AccessDenied to anyone else (API_GetObject, "Permissions"). The handler
        # needs the 404: on the input, so a vanished version is dead-lettered with its
        # reason instead of retried as a denial; on the output where it looks for a
        # published output (deterministic) or the crash fault for its staging object.
        listed = [input_arn]
        if args.strategy == "deterministic" or args.fault_injection:
            listed.append(output_arn)
        # A conditional write only PUTs (no staging copy, no delete, no read back); the
        # crash fault also HEADs what it is about to write.
        if args.strategy == "conditional-write":
            written = ["s3:GetObject", "s3:PutObject"] if args.fault_injection else ["s3:PutObject"]
        else:
            written = ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"]
        # Every strategy records a malformed input's FAILED record; only the lock-based
        # ones read, update and delete records.
        recorded = ["dynamodb:PutItem"]
        if args.strategy in ("control-record", "powertools"):
            recorded = ["dynamodb:GetItem", *recorded, "dynamodb:UpdateItem", "dynamodb:DeleteItem"]
        transform = handler_function(
            f"{name}-transform",
            handler=FAULT_HANDLERS[args.fault_injection],
            statements=[
                allow(["s3:ListBucket"], listed),
                allow(["s3:GetObject", "s3:GetObjectVersion"], [objects_in]),
                allow(written, [objects_out]),
                allow(recorded, [self.control_table.arn]),
            ],
            environment={
                **EtlSettings.environment(
                    strategy=args.strategy,
                    output_bucket=self.output_bucket_name,
                    output_prefix=args.output_prefix,
                    control_table=self.control_table.name,
                    record_ttl_seconds=encode(args.record_ttl_days * 24 * 3600),
                    schema=encode(args.schema),
                ),
                "DLQ_URL": self.dlq.url,
                "LOG_LEVEL": args.log_level,
                "POWERTOOLS_SERVICE_NAME": name,
            },
            dead_letter_arn=self.dlq.arn,
            timeout=args.timeout,
            memory_size=args.memory_size,
            requirements=REQUIREMENTS.get(args.strategy, ()),
            parent=self,
        )
        self.function = transform.function
        if args.trigger == "notification":
            permission = aws.lambda_.Permission(
                f"{name}-s3-invoke",
                action="lambda:InvokeFunction",
                function=self.function.name,
                principal="s3.amazonaws.com",
                source_arn=input_arn,
                opts=child,
            )
            aws.s3.BucketNotification(
                f"{name}-notification",
                bucket=self.input_bucket_name,
                lambda_functions=[
                    aws.s3.BucketNotificationLambdaFunctionArgs(
                        lambda_function_arn=self.function.arn,
                        events=["s3:ObjectCreated:*"],
                        filter_prefix=args.input_prefix or None,
                    )
                ],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[permission]),
            )
        else:
            if created_in is not None:  # an existing bucket's owner turns EventBridge on
                aws.s3.BucketNotification(
                    f"{name}-events", bucket=created_in.id, eventbridge=True, opts=child
                )
            rule = aws.cloudwatch.EventRule(
                f"{name}-rule",
                event_pattern=s3_object_created_pattern(
                    self.input_bucket_name, key_prefix=args.input_prefix
                ),
                opts=child,
            )
            invoke_from_rule(name, rule, self.function, self, self.dlq)
        self.register_outputs(
            {
                "inputBucket": self.input_bucket_name,
                "outputBucket": self.output_bucket_name,
                "controlTable": self.control_table.name,
                "functionName": self.function.name,
                "dlqUrl": self.dlq.url,
            }
        )

    def _bucket(
        self, existing: pulumi.Input[str] | None, created: aws.s3.Bucket | None
    ) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """(name, ARN) of a bucket given by name or created by this component."""
        if created is not None:
            return created.bucket, created.arn
        assert existing is not None
        partition = aws.get_partition_output(opts=pulumi.InvokeOptions(parent=self)).partition
        name = pulumi.Output.from_input(existing)
        return name, pulumi.Output.all(partition, name).apply(lambda v: f"arn:{v[0]}:s3:::{v[1]}")
