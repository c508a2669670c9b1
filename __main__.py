"""The Pulumi program: one stack per pattern, or `local` with all of them on LocalStack.

Stack config is read here and only here; components get plain args. A pattern is
deployed when its config key is present (see Pulumi.<stack>.yaml).
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

from demo import workflow as demo_workflow
from demo.durable import DemoDurableFunction
from demo.layer import demo_layer
from demo.steps import DemoSteps
from demo.target import DemoTarget
from exactly_once.components.api_starter import ApiGatewayStarter, ApiGatewayStarterArgs
from exactly_once.components.aws_provider import aws_provider
from exactly_once.components.buckets import secure_bucket
from exactly_once.components.config import args_from_config
from exactly_once.components.etl import IdempotentEtl, IdempotentEtlArgs
from exactly_once.components.event_patterns import s3_object_created_pattern
from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs
from exactly_once.components.resumable import ResumableWorkflow, ResumableWorkflowArgs
from exactly_once.components.scheduler import Scheduler, SchedulerArgs

config = pulumi.Config()
region = pulumi.Config("aws").get("region") or "us-east-1"
endpoint = config.get("endpoint") or None
opts = pulumi.ResourceOptions(provider=aws_provider("aws", region, endpoint))
pulumi.export("region", region)
pulumi.export("endpoint", endpoint or "")


def demo_target(starter_config: dict[str, Any]) -> dict[str, Any]:
    """`demoWorkflow: true` in a starter's config targets the demo workflow (demo/workflow.py);
    otherwise the config names the target (`stateMachineArn` or `definition`)."""
    if starter_config.pop("demoWorkflow", False):
        return {"definition": json.dumps(demo_workflow.definition())}
    if isinstance(starter_config.get("definition"), dict):  # ASL written as YAML
        starter_config["definition"] = json.dumps(starter_config["definition"])
    return {}


name_dedup = config.get_object("nameDedup")
api_starter = config.get_object("apiStarter")

if name_dedup is not None or api_starter is not None:
    # Both starters watch one upload bucket; each has its own state machine.
    uploads = secure_bucket(
        "uploads", versioned=True, eventbridge=True, force_destroy=True, opts=opts
    )
    pulumi.export("uploadsBucket", uploads.bucket)

if name_dedup is not None:
    starter = NameDedupStarter(
        "name-dedup",
        args_from_config(
            NameDedupStarterArgs, name_dedup, bucket_name=uploads.bucket, **demo_target(name_dedup)
        ),
        opts,
    )
    pulumi.export("nameDedup", starter.exports())  # (its bucket, machine, DLQ, ...)

# A second name-dedup starter, watching two buckets through one event pattern: one key
# written to each is two events (every S3 key strategy names the bucket).
name_dedup_keys = config.get_object("nameDedupKeys")
if name_dedup_keys is not None:
    key_buckets = [
        secure_bucket(f"keys-{part}", eventbridge=True, force_destroy=True, opts=opts)
        for part in ("a", "b")
    ]
    keys_starter = NameDedupStarter(
        "name-dedup-keys",
        args_from_config(
            NameDedupStarterArgs,
            name_dedup_keys,
            event_pattern=s3_object_created_pattern(*[b.bucket for b in key_buckets]),
            **demo_target(name_dedup_keys),
        ),
        opts,
    )
    pulumi.export(
        "nameDedupKeys",
        {
            "buckets": [b.bucket for b in key_buckets],
            "functionName": keys_starter.function.name,
            "stateMachineArn": keys_starter.state_machine_arn,
            "dlqUrl": keys_starter.dlq.url,
            "alarmNames": keys_starter.alarm_names,
            "dashboardName": keys_starter.dashboard_name,
        },
    )

# A name-dedup starter with the durable-function backend: the uploads bucket's events start
# a demo durable function (demo/durable.py), named by the event's key.
name_dedup_durable = config.get_object("nameDedupDurable")
if name_dedup_durable is not None:
    durable_bucket = secure_bucket(
        "durable-uploads", versioned=True, eventbridge=True, force_destroy=True, opts=opts
    )
    durable = DemoDurableFunction(name_dedup_durable.pop("demoDurableFunction"), opts)
    durable_starter = NameDedupStarter(
        "name-dedup-durable",
        args_from_config(
            NameDedupStarterArgs,
            name_dedup_durable,
            bucket_name=durable_bucket.bucket,
            backend="durable-function",
            durable_function_arn=durable.version_arn,
        ),
        opts,
    )
    pulumi.export(
        "nameDedupDurable",
        {
            "bucket": durable_bucket.bucket,
            "functionName": durable_starter.function.name,
            "durableFunctionArn": durable.version_arn,
            "durableFunctionName": durable.function.name,
            "runsTable": durable.runs_table.name,
            "dlqUrl": durable_starter.dlq.url,
            "alarmNames": durable_starter.alarm_names,
            "dashboardName": durable_starter.dashboard_name,
        },
    )

if api_starter is not None:
    forward_uploads = bool(api_starter.pop("forwardUploads", False))
    api = ApiGatewayStarter(
        "api-starter",
        args_from_config(
            ApiGatewayStarterArgs,
            api_starter,
            bucket_name=uploads.bucket if forward_uploads else None,
            **demo_target(api_starter),
        ),
        opts,
    )
    pulumi.export(
        "apiStarter",
        {
            "bucket": uploads.bucket,
            "url": api.url,
            "apiKey": api.api_key,
            "stateMachineArn": api.state_machine_arn,
            "dlqUrl": api.dlq.url if api.dlq else None,
            "alarmNames": api.alarm_names,
            "dashboardName": api.dashboard_name,
        },
    )

# One ETL per entry: `etl` is an object, or a list of objects each with a `name`.
etl_config = config.get_object("etl")
if etl_config is not None:
    etl_outputs = {}
    for entry in etl_config if isinstance(etl_config, list) else [etl_config]:
        etl_name = entry.pop("name", "etl")
        fixed: dict[str, Any] = {}
        if entry.pop("demoOwnBucket", False):
            # A bucket the ETL does not own, as a team's existing one would be (demo/test
            # support: the ETL is given its name, never creates or reconfigures it).
            own = secure_bucket(
                f"{etl_name}-teams-bucket",
                versioned=True,
                eventbridge=True,
                force_destroy=True,
                opts=opts,
            )
            fixed["input_bucket_name"] = own.bucket
        args = args_from_config(IdempotentEtlArgs, entry, **fixed)
        etl = IdempotentEtl(etl_name, args, opts)
        etl_outputs[etl_name] = {
            **etl.exports(),  # what the ops commands read (docs/operations.md)
            "strategy": args.strategy,
            "transform": args.transform,
        }
    pulumi.export("etl", etl_outputs)

# The resumable workflow, with demo steps (demo/functions/demo_steps.py) named in config.
resumable = config.get_object("resumable")
if resumable is not None:
    demo = DemoSteps("resumable-steps", list(resumable.pop("demoSteps")), opts)
    workflow = ResumableWorkflow(
        "resumable", args_from_config(ResumableWorkflowArgs, resumable, steps=demo.steps), opts
    )
    assert workflow.state_machine is not None  # the step-functions backend
    pulumi.export(
        "resumable",
        {
            **workflow.exports(),
            "counterTable": demo.counter_table.name,
            "steps": [step.name for step in demo.steps],
        },
    )

# The same workflow as a Lambda durable function (backend 'durable-function').
resumable_durable = config.get_object("resumableDurable")
if resumable_durable is not None:
    durable_steps = DemoSteps(
        "resumable-durable-steps", list(resumable_durable.pop("demoSteps")), opts
    )
    durable_workflow = ResumableWorkflow(
        "resumable-durable",
        args_from_config(
            ResumableWorkflowArgs,
            resumable_durable,
            steps=durable_steps.steps,
            backend="durable-function",
        ),
        opts,
    )
    pulumi.export(
        "resumableDurable",
        {
            "durableFunctionArn": durable_workflow.durable_function_arn,
            "table": durable_workflow.table.name,
            "counterTable": durable_steps.counter_table.name,
            "steps": [step.name for step in durable_steps.steps],
            "alarmNames": durable_workflow.alarm_names,
            "dashboardName": durable_workflow.dashboard_name,
        },
    )

# The scheduler; `demoChannels` (and `demoSerialChannels`) get a recording demo target each
# (demo/functions/demo_target.py),
# `demoQueues` an SQS queue each (a channel of another kind), and the function named by
# `demoLayerFunction` the demo layer (demo/layer.py) after its platform layers.
scheduler_config = config.get_object("scheduler")
if scheduler_config is not None:
    channels = dict(scheduler_config.pop("channels", {}))
    fires = {}
    targets = {}
    queues = {}
    concurrency = scheduler_config.pop("demoConcurrency", None)
    # `demoSerialChannels`: demo targets that run one message at a time (reserved
    # concurrency 1: a burst's sends are throttled while one runs), stopped at 10 s (a slow
    # target's test runs one past it). The others are given a minute: a burst of 1,000 on
    # a 2-core LocalStack queues their three writes to DynamoDB Local past 10 s (at 10 s,
    # 23 of 1,000 were stopped with only their receiver's record written, and rightly
    # ended UNKNOWN: the machine's overload, not the scheduler's).
    serial = scheduler_config.pop("demoSerialChannels", [])
    for channel in [*scheduler_config.pop("demoChannels", []), *serial]:
        alone = channel in serial
        target = DemoTarget(
            f"scheduler-{channel}", 1 if alone else concurrency, opts, timeout=10 if alone else 60
        )
        channels[channel] = target.function.arn
        fires[channel] = target.fires_table.name
        targets[channel] = target.function.name
    for channel in scheduler_config.pop("demoQueues", []):
        queue = aws.sqs.Queue(f"scheduler-{channel}-queue", sqs_managed_sse_enabled=True, opts=opts)
        channels[channel] = queue.arn
        queues[channel] = queue.url
    if layered := scheduler_config.pop("demoLayerFunction", None):
        layer = demo_layer("scheduler-demo-layer", opts)
        functions = scheduler_config.setdefault("platform", {}).setdefault("functions", {})
        function = functions.setdefault(layered, {})
        function["layers"] = [*function.get("layers", []), layer.arn]
    if isinstance(audit := scheduler_config.get("audit"), dict):
        # the demo targets keep their receiver's records in their fires tables
        audit.setdefault("receipts", fires)
    scheduler = Scheduler(
        "scheduler", args_from_config(SchedulerArgs, scheduler_config, channels=channels), opts
    )
    pulumi.export(
        "scheduler",
        {
            **scheduler.exports(),
            "firesTables": fires,
            "targetFunctions": targets,
            "queues": queues,
        },
    )
