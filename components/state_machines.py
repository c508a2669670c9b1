"""Target state machines: the STANDARD-only rule, and the demo workflow the local stack runs."""

from __future__ import annotations

import json
from typing import Any, Literal

import pulumi
import pulumi_aws as aws

from components.functions import service_role
from handlers.executions import execution_arn

StateMachineType = Literal["STANDARD", "EXPRESS"]


def require_standard(workflow_type: str, component: str) -> None:
    """Name dedup rests on STANDARD's 90-day unique names; EXPRESS has none."""
    if workflow_type.upper() != "STANDARD":
        raise ValueError(
            f"{component} needs a STANDARD state machine, got {workflow_type!r}: EXPRESS "
            "workflows do not deduplicate executions by name, so duplicates would run twice"
        )


def demo_definition(wait_seconds: int = 2) -> dict[str, Any]:
    """Waits, then fails when the input's `key` contains 'fail' (to exercise retries)."""
    return {
        "Comment": "Demo target: succeeds unless the key contains 'fail'",
        "StartAt": "Work",
        "States": {
            "Work": {"Type": "Wait", "Seconds": wait_seconds, "Next": "Check"},
            "Check": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.key", "StringMatches": "*fail*", "Next": "Failed"}],
                "Default": "Done",
            },
            "Failed": {"Type": "Fail", "Error": "DemoFailure", "Cause": "key contains 'fail'"},
            "Done": {"Type": "Succeed"},
        },
    }


def state_machine(
    name: str,
    definition: pulumi.Input[str] | dict[str, Any],
    parent: pulumi.Resource,
    statements: list[dict[str, Any]] | None = None,
) -> aws.sfn.StateMachine:
    """A STANDARD state machine whose role may do exactly `statements`."""
    role, ready = service_role(name, "states.amazonaws.com", statements or [], parent)
    body = json.dumps(definition) if isinstance(definition, dict) else definition
    return aws.sfn.StateMachine(
        name,
        role_arn=role.arn,
        definition=body,
        type="STANDARD",
        opts=pulumi.ResourceOptions(parent=parent, depends_on=ready),
    )


def target_state_machine(
    name: str,
    arn: pulumi.Input[str] | None,
    definition: pulumi.Input[str] | dict[str, Any] | None,
    parent: pulumi.Resource,
) -> pulumi.Output[str]:
    """The ARN of the given state machine, or of one created from `definition`
    (the demo workflow when there is neither)."""
    if arn is not None:
        return pulumi.Output.from_input(arn)
    return state_machine(f"{name}-workflow", definition or demo_definition(), parent).arn


def executions_of(state_machine_arn: pulumi.Output[str]) -> pulumi.Output[str]:
    """The ARN pattern of every execution of one state machine (for IAM)."""
    return state_machine_arn.apply(lambda arn: execution_arn(arn, "*"))
