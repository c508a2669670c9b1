"""Step functions for the demo resumable workflow (demo/functions/demo_steps.py), one per
name. Demo support, built only by a stack that asks for it (`demoSteps`); the functions'
code is bundled from demo/functions, as a user's own code would be."""

from __future__ import annotations

from pathlib import Path

import pulumi
import pulumi_aws as aws

from demo.functions.demo_steps import StepSettings
from exactly_once.components.functions import allow, handler_function
from exactly_once.components.resumable import WorkflowStep
from exactly_once.components.tables import key_table


class DemoSteps(pulumi.ComponentResource):
    counter_table: aws.dynamodb.Table
    steps: list[WorkflowStep]

    def __init__(
        self, name: str, step_names: list[str], opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("exactly-once:index:DemoSteps", name, {}, opts)
        self.counter_table = key_table(f"{name}-calls", self)
        self.steps = []
        for step in step_names:
            function = handler_function(
                f"{name}-{step}",
                handler="demo_steps.handler",
                sources=(str(Path(__file__).parent / "functions"),),
                statements=[allow(["dynamodb:UpdateItem"], [self.counter_table.arn])],
                environment=StepSettings.environment(
                    step_name=step, counter_table=self.counter_table.name
                ),
                # room for a step slower than botocore's 60 s read timeout (`pauseAt`)
                timeout=90,
                parent=self,
            ).function
            self.steps.append(WorkflowStep(step, function.arn))
        self.register_outputs({"counterTable": self.counter_table.name})
