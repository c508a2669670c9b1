"""A demo durable function (demo/durable_functions/durable_demo.py) for the name-dedup
starter's durable-function backend: a published version with a DurableConfig and the
checkpoint permissions AWS documents for its role, and a runs table counting executions.

Demo support, built only by a stack that asks for it (`nameDedupDurable`); its code is
bundled from demo/durable_functions with the durable-execution SDK, as a user's would be."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_aws as aws

from exactly_once.components.functions import DURABLE_RUNTIME, allow, lambda_code, service_role
from exactly_once.components.tables import key_table

SDK = "aws-durable-execution-sdk-python==3.0.0"


class DemoDurableFunction(pulumi.ComponentResource):
    runs_table: aws.dynamodb.Table
    function: aws.lambda_.Function
    version_arn: pulumi.Output[str]

    def __init__(self, name: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("exactly-once:index:DemoDurableFunction", name, {}, opts)
        self.runs_table = key_table(f"{name}-runs", self)
        identity = aws.get_caller_identity_output(opts=pulumi.InvokeOptions(parent=self))
        region = aws.get_region_output(opts=pulumi.InvokeOptions(parent=self)).region
        # Its execution role checkpoints its own executions (any version: ":*"), as the
        # Lambda developer guide's durable-functions security page gives it.
        executions = pulumi.Output.format(
            "arn:aws:lambda:{0}:{1}:function:{2}:*", region, identity.account_id, name
        )
        log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs", retention_in_days=1, opts=pulumi.ResourceOptions(parent=self)
        )
        role, ready = service_role(
            name,
            "lambda.amazonaws.com",
            [
                allow(
                    ["lambda:CheckpointDurableExecution", "lambda:GetDurableExecutionState"],
                    [executions],
                ),
                allow(["dynamodb:UpdateItem"], [self.runs_table.arn]),
                allow(
                    ["logs:CreateLogStream", "logs:PutLogEvents"],
                    [log_group.arn.apply(lambda arn: f"{arn}:*")],
                ),
            ],
            self,
        )
        self.function = aws.lambda_.Function(
            name,
            name=name,
            runtime=DURABLE_RUNTIME,
            handler="durable_demo.handler",
            role=role.arn,
            code=lambda_code(
                (SDK,),
                (str(Path(__file__).parent / "durable_functions"),),
                python_version=DURABLE_RUNTIME.removeprefix("python"),  # its wheels' Python
            ),
            timeout=30,
            environment=aws.lambda_.FunctionEnvironmentArgs(
                variables={"RUNS_TABLE": self.runs_table.name}
            ),
            logging_config=aws.lambda_.FunctionLoggingConfigArgs(
                log_format="Text", log_group=log_group.name
            ),
            durable_config=aws.lambda_.FunctionDurableConfigArgs(
                execution_timeout=900, retention_period=1
            ),
            publish=True,  # durable functions are invoked by version
            opts=pulumi.ResourceOptions(parent=self, depends_on=ready),
        )
        self.version_arn = self.function.qualified_arn
        self.register_outputs({"runsTable": self.runs_table.name})
