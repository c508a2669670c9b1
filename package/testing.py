"""Run a Pulumi program that uses these components in a test: no engine, no cloud.

    from exactly_once.testing import run

    def test_the_scheduler_has_a_dead_letter_queue():
        mocks = run(lambda: Scheduler("reminders", SchedulerArgs(channels={...})))
        assert mocks.of_type("aws:sqs/queue:Queue")

`run` declares the program's resources under `pulumi.runtime.set_mocks`, waits for all of
them and returns what was declared. Every resource is given the outputs AWS would give it
(an ARN of the right shape, a queue URL, a stage's invoke URL, a table's stream ARN, a
function's qualified ARN), and the provider functions the components call
(`aws.get_region`, `aws.get_caller_identity`, `aws.get_partition`) answer for `REGION` and
`ACCOUNT`, so no component fails on an output a generic echo mock leaves out. Inputs are
recorded as the engine sees them: camelCase names, Outputs resolved. docs/testing.md.

Transforms (`ResourceOptions(transforms=...)`) are the engine's: they do not run here.
Needs the `pulumi` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pulumi
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

ACCOUNT = "123456789012"
REGION = "us-east-1"
# DynamoDB's stream label shape (an ISO time, colons and all): ARNs built from it parse as
# on AWS.
STREAM_LABEL = "2026-01-01T00:00:00.000"

__all__ = ["ACCOUNT", "REGION", "Mocks", "arn_of", "run"]


def arn_of(typ: str, name: str) -> str:
    """The ARN AWS gives a resource of this type and name, so policies read as on AWS."""
    prefix = f"{REGION}:{ACCOUNT}"
    shapes = {
        "aws:s3/bucket:Bucket": f"arn:aws:s3:::{name}",
        "aws:s3/bucketV2:BucketV2": f"arn:aws:s3:::{name}",
        "aws:sqs/queue:Queue": f"arn:aws:sqs:{prefix}:{name}",
        "aws:sns/topic:Topic": f"arn:aws:sns:{prefix}:{name}",
        "aws:lambda/function:Function": f"arn:aws:lambda:{prefix}:function:{name}",
        "aws:dynamodb/table:Table": f"arn:aws:dynamodb:{prefix}:table/{name}",
        "aws:sfn/stateMachine:StateMachine": f"arn:aws:states:{prefix}:stateMachine:{name}",
        "aws:cloudwatch/logGroup:LogGroup": f"arn:aws:logs:{prefix}:log-group:{name}",
        "aws:iam/role:Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
        "aws:cloudwatch/eventRule:EventRule": f"arn:aws:events:{prefix}:rule/{name}",
        "aws:cloudwatch/eventBus:EventBus": f"arn:aws:events:{prefix}:event-bus/{name}",
        "aws:apigateway/restApi:RestApi": f"arn:aws:apigateway:{REGION}::/restapis/{name}",
    }
    service = typ.split(":")[1].split("/")[0]
    return shapes.get(typ, f"arn:aws:{service}:{prefix}:{name}")


class Mocks(pulumi.runtime.Mocks):
    """Gives each resource AWS-shaped outputs and records what was declared."""

    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        name = args.inputs.get("name") or args.inputs.get("namePrefix") or args.name
        arn = arn_of(args.typ, name)
        if args.resource_id:  # `Resource.get` by its ARN (a Scheduler's state machine channel)
            return args.resource_id, {**args.inputs, "arn": args.resource_id}
        version = "1" if args.inputs.get("publish") else "$LATEST"
        outputs = {
            **args.inputs,
            "arn": arn,
            "name": name,
            "bucket": args.inputs.get("bucket") or name,
            "url": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}",
            "invokeArn": f"arn:aws:apigateway:{REGION}:lambda:path/functions/{arn}/invocations",
            "streamArn": f"{arn}/stream/{STREAM_LABEL}",
            "rootResourceId": "root",
            "executionArn": f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{args.name}",
            "invokeUrl": f"https://{args.name}.execute-api.{REGION}.amazonaws.com/v1",
            "qualifiedArn": f"{arn}:{version}",  # "1" once published, as Lambda names it
        }
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        # aws.get_region, aws.get_caller_identity, aws.get_partition: one answer for all
        return {
            "accountId": ACCOUNT,
            "arn": f"arn:aws:iam::{ACCOUNT}:user/test",
            "userId": "test",
            "id": REGION,
            "name": REGION,
            "region": REGION,
            "partition": "aws",
            "dnsSuffix": "amazonaws.com",
        }, []

    def of_type(self, typ: str) -> list[pulumi.runtime.MockResourceArgs]:
        """Every resource of a Pulumi type token, e.g. "aws:lambda/function:Function"."""
        return [r for r in self.resources if r.typ == typ]

    def named(self, name: str) -> pulumi.runtime.MockResourceArgs:
        """The one resource with this Pulumi name (e.g. "reminders-slots")."""
        found = [r for r in self.resources if r.name == name]
        if len(found) != 1:
            names = ", ".join(sorted(r.name for r in self.resources))
            raise KeyError(f"{len(found)} resources named {name!r} (declared: {names})")
        return found[0]


def _forget_the_last_program() -> None:
    """Pulumi keeps a failed program's error, and its Outputs still pending, for the program
    after it (its RPC manager and pending Outputs outlive set_mocks): a test after one whose
    program failed on an Output would fail with that error."""
    from pulumi.runtime import settings

    manager = getattr(settings, "_get_rpc_manager", None)  # (Pulumi's own: guarded)
    if manager is not None:
        manager().clear()
    outputs = getattr(settings.SETTINGS, "outputs", None)  # (not in every release)
    if outputs is not None:
        with settings.SETTINGS.lock:
            outputs.clear()


def run(
    program: Callable[[], object],
    config: Mapping[str, str] | None = None,
    project: str = "project",
    stack: str = "test",
    mocks: Mocks | None = None,
) -> Mocks:
    """Declare `program`'s resources under fresh mocks (or `mocks`, a subclass of yours
    that answers some resources or calls its own way) and wait for every one of them.
    `config`: the stack's config as Pulumi keys it ({"project:key": "value"})."""
    mocks = mocks if mocks is not None else Mocks()
    _forget_the_last_program()
    pulumi.runtime.set_all_config(dict(config or {}))
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False)

    def body() -> None:  # plain: pulumi 3.168 (the floor) calls it without awaiting
        program()

    _sync_await(run_pulumi_func(body))
    return mocks
