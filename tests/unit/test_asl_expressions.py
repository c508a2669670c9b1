"""Every DynamoDB task of every generated state machine names only placeholders it defines,
and defines only placeholders it uses: DynamoDB refuses both (ValidationException), and
the refusal comes only when the task runs, e.g. on the rare path that marks a failure."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from exactly_once.components import resumable_asl

EXPRESSIONS = ("UpdateExpression", "ConditionExpression", "KeyConditionExpression")
PLACEHOLDER = re.compile(r"[#:][A-Za-z0-9_]+")
TABLE, ARN = "t", "arn:aws:lambda:us-east-1:123456789012:function:f"


def dynamodb_tasks(definition: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for name, state in definition["States"].items():
        if "dynamodb" in str(state.get("Resource", "")):
            yield name, state["Parameters"]


def placeholders(parameters: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(used in the expressions, defined in the attribute names and values)."""
    used = {
        token for field in EXPRESSIONS for token in PLACEHOLDER.findall(parameters.get(field, ""))
    }
    defined = set(parameters.get("ExpressionAttributeNames", {})) | set(
        parameters.get("ExpressionAttributeValues", {})
    )
    return used, defined


def definitions() -> Iterator[tuple[str, dict[str, Any]]]:
    for count in (1, 3):
        steps = [resumable_asl.Step(f"s{i}", ARN) for i in range(count)]
        yield f"resumable-{count}", resumable_asl.definition(steps, TABLE, ARN, "$.orderId")


@pytest.mark.parametrize(("machine", "definition"), list(definitions()))
def test_every_placeholder_is_defined_and_every_definition_used(
    machine: str, definition: dict[str, Any]
) -> None:
    tasks = list(dynamodb_tasks(definition))
    assert tasks, f"{machine} has no DynamoDB task"
    for state, parameters in tasks:
        used, defined = placeholders(parameters)
        assert used == defined, f"{machine}.{state}: used {sorted(used)}, defined {sorted(defined)}"


def test_the_checker_sees_the_old_mark_failed_bug() -> None:
    # GIVEN the scheduler's old failure write: `#e` used, only `#s` defined
    parameters = {
        "UpdateExpression": "SET #s = :new, #e = :error",
        "ConditionExpression": "#s = :expected",
        "ExpressionAttributeNames": {"#s": "status"},
        "ExpressionAttributeValues": {":new": {}, ":expected": {}, ":error": {}},
    }
    used, defined = placeholders(parameters)
    assert used - defined == {"#e"}
