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


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        service = args.typ.split(":")[1].split("/")[0]
        name = args.inputs.get("name") or args.name
        outputs = {
            **args.inputs,
            "arn": f"arn:aws:{service}:us-east-1:123456789012:{args.name}",
            "name": name,
            "bucket": args.inputs.get("bucket") or name,
            "url": f"https://sqs.us-east-1.amazonaws.com/123456789012/{name}",
            "invokeArn": f"arn:aws:apigateway:us-east-1:lambda:path/functions/{args.name}",
            "streamArn": f"arn:aws:dynamodb:us-east-1:123456789012:table/{name}/stream/1",
            "rootResourceId": "root",
            "executionArn": f"arn:aws:execute-api:us-east-1:123456789012:{args.name}",
            "invokeUrl": f"https://{args.name}.execute-api.us-east-1.amazonaws.com/v1",
        }
        if args.typ == "aws:sfn/stateMachine:StateMachine":
            outputs["arn"] = f"arn:aws:states:us-east-1:123456789012:stateMachine:{name}"
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list]:
        return {"accountId": "123456789012", "name": "us-east-1", "region": "us-east-1"}, []

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
