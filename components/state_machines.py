"""Target state machines: the STANDARD-only rule, an explicit target, a scoped role."""

from __future__ import annotations

import enum
import json
from typing import Any

import pulumi
import pulumi_aws as aws

from exactly_once.components.functions import service_role
from exactly_once.handlers.executions import execution_arn


class StateMachineType(enum.StrEnum):
    STANDARD = "STANDARD"
    EXPRESS = "EXPRESS"


def require_standard(workflow_type: str, component: str) -> None:
    """Name dedup rests on STANDARD's 90-day unique names; EXPRESS has none."""
    if str(workflow_type).upper() != "STANDARD":
        raise ValueError(
            f"{component} needs a STANDARD state machine, got {workflow_type!r}: EXPRESS "
            "workflows do not deduplicate executions by name, so duplicates would run twice"
        )


def require_target(
    arn: pulumi.Input[str] | None, definition: object | None, component: str
) -> None:
    """A starter starts the caller's workflow: refuse to guess one."""
    if arn is None and definition is None:
        raise ValueError(
            f"{component} needs a target: give state_machine_arn (an existing STANDARD state "
            "machine) or definition (the ASL of one to create)"
        )
    if arn is not None and definition is not None:
        raise ValueError(f"{component}: give state_machine_arn or definition, not both")


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
    """The ARN of the given state machine, or of one created from `definition` (exactly
    one is given: `require_target`)."""
    if arn is not None:
        return pulumi.Output.from_input(arn)
    assert definition is not None
    return state_machine(f"{name}-workflow", definition, parent).arn


def executions_of(state_machine_arn: pulumi.Output[str]) -> pulumi.Output[str]:
    """The ARN pattern of every execution of one state machine (for IAM)."""
    return state_machine_arn.apply(lambda arn: execution_arn(arn, "*"))
