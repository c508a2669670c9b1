"""A demo scheduler channel (demo/functions/demo_target.py) that records every fire.

Demo support, built only by a stack that asks for it (`demoChannels`); its function's
code is bundled from demo/functions, as a user's own code would be."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_aws as aws

from demo.functions.demo_target import TargetSettings
from exactly_once.components.functions import allow, handler_function
from exactly_once.components.tables import key_table


class DemoTarget(pulumi.ComponentResource):
    fires_table: aws.dynamodb.Table
    function: aws.lambda_.Function

    def __init__(
        self,
        name: str,
        concurrency: int | None = None,
        opts: pulumi.ResourceOptions | None = None,
        timeout: int = 10,
    ) -> None:
        super().__init__("exactly-once:index:DemoTarget", name, {}, opts)
        self.fires_table = key_table(f"{name}-fires", self)
        self.function = handler_function(
            name,
            handler="demo_target.handler",
            sources=(str(Path(__file__).parent / "functions"),),
            # its effect (UpdateItem) and its receiver's records (demo/functions/demo_target.py)
            statements=[
                allow(
                    [
                        "dynamodb:UpdateItem",
                        "dynamodb:PutItem",
                        "dynamodb:DeleteItem",
                    ],
                    [self.fires_table.arn],
                )
            ],
            environment=TargetSettings.environment(fires_table=self.fires_table.name),
            timeout=timeout,
            reserved_concurrency=concurrency,
            parent=self,
        ).function
        self.register_outputs({"firesTable": self.fires_table.name})
