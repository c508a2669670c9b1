"""Target state machines: the STANDARD-only rule, an explicit target, a scoped role."""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterator
from typing import Any, Literal

import pulumi
import pulumi_aws as aws

from exactly_once.components.functions import allow, service_role
from exactly_once.components.platform import Platform
from exactly_once.handlers.executions import execution_arn
from exactly_once.handlers.targets import TargetKind, kind_of


class StateMachineType(enum.StrEnum):
    STANDARD = "STANDARD"
    EXPRESS = "EXPRESS"


StateMachineTypeName = Literal["STANDARD", "EXPRESS"]  # its values (components/config.py)


def require_standard(workflow_type: str, component: str) -> None:
    """Name dedup rests on STANDARD's 90-day unique names; EXPRESS has none."""
    if str(workflow_type).upper() != "STANDARD":
        raise ValueError(
            f"{component} needs a STANDARD state machine, got {workflow_type!r}: EXPRESS "
            "workflows do not deduplicate executions by name, so duplicates would run twice"
        )


def _names_a_state_machine(arn: str) -> bool:
    """Told apart as a scheduler's targets are (handlers/targets.py)."""
    try:
        return kind_of(arn) == TargetKind.STATES
    except ValueError:
        return False


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
    if isinstance(arn, str) and not _names_a_state_machine(arn):
        raise ValueError(
            f"{component}: state_machine_arn {arn!r} is not a Step Functions state machine "
            "ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME)"
        )
    if isinstance(definition, str | dict):
        task_statements(definition)  # a Task we cannot grant fails here, with the reason


def state_machine(
    name: str,
    definition: pulumi.Input[str] | dict[str, Any],
    parent: pulumi.Resource,
    statements: list[dict[str, Any]] | pulumi.Output[list[dict[str, Any]]] | None = None,
    platform: Platform | None = None,
) -> aws.sfn.StateMachine:
    """A STANDARD state machine whose role may do exactly `statements` (and what
    `platform`'s tracing and logging need)."""
    inputs, needs = (platform or Platform(name, None)).state_machine(name, parent)
    granted: Any = statements or []
    if needs:
        # (a role that may do nothing else is a Deny of everything, which would override
        # these Allows too: it gives way to them)
        granted = pulumi.Output.from_input(granted).apply(
            lambda given: [*[s for s in given if s != DENY_ALL], *needs]
        )
    role, ready = service_role(name, "states.amazonaws.com", granted, parent)
    body = json.dumps(definition) if isinstance(definition, dict) else definition
    return aws.sfn.StateMachine(
        name,
        role_arn=role.arn,
        definition=body,
        type="STANDARD",
        **inputs,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=ready),
    )


# Optimized integrations we can grant from the definition alone: resource -> (IAM action,
# the Parameters field naming the target, how that value becomes an IAM resource).
_SQS_URL = re.compile(r"^https://sqs\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/(\d{12})/([^/]+)$")


def _queue_arn(url: str) -> str:
    found = _SQS_URL.match(url)
    if not found:
        raise ValueError(f"cannot grant sqs:SendMessage to {url!r}: give a queue URL")
    region, account, queue = found.groups()
    return f"arn:aws:sqs:{region}:{account}:{queue}"


def _table_arn(table: str) -> str:
    return table if table.startswith("arn:") else f"arn:aws:dynamodb:*:*:table/{table}"


def _bus_arn(bus: str) -> str:
    return bus if bus.startswith("arn:") else f"arn:aws:events:*:*:event-bus/{bus}"


def _function_arns(function: str) -> list[str]:
    """A function and its qualified versions and aliases (a Task may name either)."""
    base = re.sub(r"(:function:[^:]+):[^:]+$", r"\1", function)
    return [base, f"{base}:*"]


_INTEGRATIONS: dict[str, tuple[str, str, Any]] = {
    "arn:aws:states:::lambda:invoke": ("lambda:InvokeFunction", "FunctionName", _function_arns),
    "arn:aws:states:::sqs:sendMessage": ("sqs:SendMessage", "QueueUrl", _queue_arn),
    "arn:aws:states:::sns:publish": ("sns:Publish", "TopicArn", lambda arn: arn),
    "arn:aws:states:::states:startExecution": (
        "states:StartExecution",
        "StateMachineArn",
        lambda arn: arn,
    ),
    "arn:aws:states:::events:putEvents": ("events:PutEvents", "Entries", None),
    **{
        f"arn:aws:states:::dynamodb:{verb}": (
            f"dynamodb:{verb[0].upper()}{verb[1:]}",
            "TableName",
            _table_arn,
        )
        for verb in ("getItem", "putItem", "updateItem", "deleteItem")
    },
}


def _states(definition: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every state, in Parallel branches and Map processors too."""
    for name, state in definition.get("States", {}).items():
        yield name, state
        for branch in state.get("Branches", []):
            yield from _states(branch)
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                yield from _states(state[key])


def task_statements(definition: str | dict[str, Any]) -> list[dict[str, Any]]:
    """The least-privilege IAM statements a definition's Task states need, as the Step
    Functions console derives them: one action per integration, on the resources the
    Tasks name. A Task we cannot grant from the definition alone (a target chosen at run
    time, `.sync` or callback patterns, an integration not listed) is refused with the
    reason: give `state_machine_arn` (a machine with a role of your own) instead."""
    try:
        document = json.loads(definition) if isinstance(definition, str) else definition
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"definition is not JSON (Amazon States Language): {exc.msg} at line {exc.lineno}, "
            f"column {exc.colno}"
        ) from None
    if not isinstance(document, dict) or "States" not in document:
        raise ValueError("definition must be a state machine (a JSON object with States)")
    grants: dict[str, list[str]] = {}
    for name, state in _states(document):
        if state.get("Type") != "Task":
            continue
        resource = str(state.get("Resource", ""))
        parameters = state.get("Parameters", {})
        if resource.startswith("arn:aws:lambda:"):  # a function named directly
            action, resources = "lambda:InvokeFunction", _function_arns(resource)
        elif resource in _INTEGRATIONS:
            action, field, to_arn = _INTEGRATIONS[resource]
            if to_arn is None:  # events:putEvents: each entry's bus
                buses = [
                    entry.get("EventBusName", "default") for entry in parameters.get(field, [])
                ]
                if not buses or not all(isinstance(b, str) for b in buses):
                    raise ValueError(
                        f"Task {name!r}: events:putEvents needs Entries with static EventBusName"
                    )
                resources = [_bus_arn(bus) for bus in buses]
            else:
                target = parameters.get(field)
                if not isinstance(target, str):
                    raise ValueError(
                        f"Task {name!r} ({resource}) chooses its {field} at run time "
                        f"({field}.$), so its permission cannot be derived from the "
                        "definition: give state_machine_arn (a state machine with your own "
                        "role) instead of definition"
                    )
                found = to_arn(target)
                resources = found if isinstance(found, list) else [found]
        else:
            raise ValueError(
                f"Task {name!r} uses {resource!r}, whose permissions cannot be derived "
                "from the definition (supported: Lambda, SQS sendMessage, SNS publish, "
                "DynamoDB get/put/update/deleteItem, Step Functions startExecution, "
                "EventBridge putEvents): give state_machine_arn (a state machine with your "
                "own role) instead of definition"
            )
        grants.setdefault(action, [])
        grants[action] += [r for r in resources if r not in grants[action]]
    return [allow([action], resources) for action, resources in sorted(grants.items())]


def target_state_machine(
    name: str,
    arn: pulumi.Input[str] | None,
    definition: pulumi.Input[str] | dict[str, Any] | None,
    parent: pulumi.Resource,
    platform: Platform | None = None,
) -> pulumi.Output[str]:
    """The ARN of the given state machine, or of one created from `definition` (exactly
    one is given: `require_target`), whose role may do what its Tasks need
    (`task_statements`)."""
    if arn is not None:
        return pulumi.Output.from_input(arn)
    assert definition is not None
    if isinstance(definition, str | dict):
        statements = task_statements(definition)
        return state_machine(f"{name}-workflow", definition, parent, statements, platform).arn
    # Known only at deploy (an Output): its Tasks' statements are derived then (a
    # definition needing none gets a role that may do nothing).
    # (pulumi.Input includes Awaitable, which from_input accepts but its stub does not)
    derived: Any = pulumi.Output.from_input(definition).apply(  # type: ignore[arg-type]
        lambda text: task_statements(text) or [DENY_ALL]
    )
    return state_machine(f"{name}-workflow", definition, parent, derived, platform).arn


DENY_ALL = {"Effect": "Deny", "Action": "*", "Resource": "*"}


def executions_of(state_machine_arn: pulumi.Output[str]) -> pulumi.Output[str]:
    """The ARN pattern of every execution of one state machine (for IAM)."""
    return state_machine_arn.apply(lambda arn: execution_arn(arn, "*"))
