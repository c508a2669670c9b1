"""Run Pulumi code under recording mocks and return every resource it declared."""

from __future__ import annotations

import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from deploy.stack_config import load

ROOT = Path(__file__).resolve().parents[2]


ACCOUNT = "123456789012"
REGION = "us-east-1"
STREAM_LABEL = "2026-01-01T00:00:00.000"  # DynamoDB's real stream label shape, colons and all


def arn_of(typ: str, name: str) -> str:
    """The ARN AWS gives a resource of this type, so policies read as they would on AWS."""
    prefix = f"{REGION}:{ACCOUNT}"
    shapes = {
        "aws:s3/bucket:Bucket": f"arn:aws:s3:::{name}",
        "aws:sqs/queue:Queue": f"arn:aws:sqs:{prefix}:{name}",
        "aws:lambda/function:Function": f"arn:aws:lambda:{prefix}:function:{name}",
        "aws:dynamodb/table:Table": f"arn:aws:dynamodb:{prefix}:table/{name}",
        "aws:sfn/stateMachine:StateMachine": f"arn:aws:states:{prefix}:stateMachine:{name}",
        "aws:cloudwatch/logGroup:LogGroup": f"arn:aws:logs:{prefix}:log-group:{name}",
        "aws:iam/role:Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
        "aws:cloudwatch/eventRule:EventRule": f"arn:aws:events:{prefix}:rule/{name}",
        "aws:apigateway/restApi:RestApi": f"arn:aws:apigateway:{REGION}::/restapis/{name}",
    }
    service = typ.split(":")[1].split("/")[0]
    return shapes.get(typ, f"arn:aws:{service}:{prefix}:{name}")


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        name = args.inputs.get("name") or args.name
        version = "1" if args.inputs.get("publish") else "$LATEST"
        outputs = {
            **args.inputs,
            "arn": arn_of(args.typ, name),
            "name": name,
            "bucket": args.inputs.get("bucket") or name,
            "url": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}",
            "invokeArn": f"arn:aws:apigateway:{REGION}:lambda:path/functions/{args.name}",
            "streamArn": f"{arn_of(args.typ, name)}/stream/{STREAM_LABEL}",
            "rootResourceId": "root",
            "executionArn": f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{args.name}",
            "invokeUrl": f"https://{args.name}.execute-api.{REGION}.amazonaws.com/v1",
            # a function's version, as Lambda names it ("1" once published)
            "qualifiedArn": f"{arn_of(args.typ, name)}:{version}",
        }
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list]:
        return {"accountId": ACCOUNT, "name": REGION, "region": REGION, "partition": "aws"}, []

    def of_type(self, typ: str) -> list[pulumi.runtime.MockResourceArgs]:
        return [r for r in self.resources if r.typ == typ]

    def named(self, name: str) -> pulumi.runtime.MockResourceArgs:
        [resource] = [r for r in self.resources if r.name == name]
        return resource


def run(program: Callable[[], Any], config: dict[str, str] | None = None) -> RecordingMocks:
    """Declare resources with `program` under fresh mocks; wait for all of them."""
    mocks = RecordingMocks()
    pulumi.runtime.set_all_config(config or {})
    pulumi.runtime.set_mocks(mocks, project="exactly-once", stack="test", preview=False)

    async def body() -> None:
        program()

    _sync_await(run_pulumi_func(body))
    return mocks


def run_stack(stack: str = "local") -> RecordingMocks:
    """The real __main__.py with the real Pulumi.<stack>.yaml."""
    config = load(stack, ROOT).as_pulumi_config()
    return run(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"), config)
