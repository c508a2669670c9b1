"""Generate the checkpointed state machine of pattern 4 (JSONPath only, no Lambda of ours).

The state is the execution input plus `results` (a reserved field): one entry per step,
`{}` until the step is done and `{"done": true, "output": ...}` after, so every step
(and a re-run) sees the outputs of the steps before it.

One DynamoDB item per business key holds the same entries, one attribute per step
(`out_<step>`, the entry as a JSON string). The layout, and what each state costs in
state transitions (n steps, a fresh run):

    Load      UpdateItem: create the item if absent, return it (ALL_NEW)     1
    Resume    Choice: jump to the first step not done                       1
    <step>    the step's Lambda                                             n
    Save<k>   UpdateItem: write the step's entry; conditional on the next   n
              step not being done already, so the common case goes straight
              on to the next step (a step marked done by hand fails the
              condition and takes the Resync path back to Resume)
    Finish    DeleteItem, the end                                           1
                                                                    = 2n + 3

against the reference layout's 3n + 4 (GetItem, Choice, PutItem, then Choice, Lambda
and UpdateItem per step, DeleteItem). A re-run skips the done steps in that one
Choice. Entries live in one item, so all outputs together must stay under
DynamoDB's 400 KB item limit.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from exactly_once.components.asl import (
    CONDITION_FAILED,
    DYNAMODB_RETRY,
    LAMBDA_RETRY,
    dynamodb_update,
)
from exactly_once.handlers.checkpoints import EMPTY, attribute

_STEP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")


@dataclasses.dataclass(frozen=True)
class Step:
    """`function_arn` is invoked with the whole state; its Payload is the step's output.
    `retry`: extra Step Functions Retry rules (e.g. for your function's own errors)."""

    name: str
    function_arn: str
    retry: tuple[dict[str, object], ...] = ()


def validate(steps: list[Step], key_path: str) -> None:
    if not steps:
        raise ValueError("a resumable workflow needs at least one step")
    names = [step.name for step in steps]
    for name in names:
        if not _STEP_NAME.match(name):
            raise ValueError(f"step name {name!r} must match {_STEP_NAME.pattern}")
    if len(set(names)) != len(names):
        raise ValueError(f"step names must be unique: {names}")
    if {"Load", "Resume", "Finish"} & set(names):
        raise ValueError("step names Load, Resume and Finish are reserved")
    if not key_path.startswith("$.") or key_path.startswith("$.results"):
        raise ValueError(
            f"key path must be a JSONPath like $.orderId (not $.results), got {key_path!r}"
        )


def definition(steps: list[Step], table_name: str, key_path: str) -> dict[str, Any]:
    """The state machine definition (a dict; json.dumps it)."""
    validate(steps, key_path)
    key = {"pk": {"S.$": f"States.Format('{{}}', {key_path})"}}
    names = [step.name for step in steps]
    load_results = {
        f"{name}.$": f"States.StringToJson($.Attributes.{attribute(name)}.S)" for name in names
    }

    def load(state_name: str, update: str, values: dict[str, Any]) -> dict[str, Any]:
        state = dynamodb_update(table_name, key, update, values)
        state["Parameters"]["ReturnValues"] = "ALL_NEW"
        return {
            **state,
            "ResultSelector": load_results,
            "ResultPath": "$.results",
            "Next": "Resume",
            "Comment": f"{state_name}: (re)read every step's entry into $.results",
        }

    initial = ", ".join(
        ["first_execution = if_not_exists(first_execution, :execution)"]
        + [f"{attribute(n)} = if_not_exists({attribute(n)}, :empty)" for n in names]
    )
    states: dict[str, Any] = {
        "Load": load(
            "Load",
            f"SET {initial}",
            {":execution": {"S.$": "$$.Execution.Id"}, ":empty": {"S": EMPTY}},
        ),
        "Resume": {
            "Type": "Choice",
            "Choices": [
                {"Not": {"Variable": f"$.results.{name}.done", "IsPresent": True}, "Next": name}
                for name in names
            ],
            "Default": "Finish",
        },
    }
    for index, step in enumerate(steps):
        following = names[index + 1] if index + 1 < len(names) else None
        save = f"Save{step.name}"
        states[step.name] = {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {"FunctionName": step.function_arn, "Payload.$": "$"},
            "ResultSelector": {"done": True, "output.$": "$.Payload"},
            "ResultPath": f"$.results.{step.name}",
            "Retry": [LAMBDA_RETRY, *step.retry],
            "Next": save,
        }
        entry = {":entry": {"S.$": f"States.JsonToString($.results.{step.name})"}}
        update = f"SET {attribute(step.name)} = :entry"
        saved = {
            **dynamodb_update(table_name, key, update, entry),
            "Next": following or "Finish",
        }
        if following:
            # Straight on to the next step unless it was marked done meanwhile.
            saved["Parameters"]["ConditionExpression"] = f"{attribute(following)} = :empty"
            saved["Parameters"]["ExpressionAttributeValues"] = {**entry, ":empty": {"S": EMPTY}}
            saved["Catch"] = [
                {
                    "ErrorEquals": [CONDITION_FAILED],
                    "ResultPath": None,
                    "Next": f"Resync{step.name}",
                }
            ]
            states[f"Resync{step.name}"] = load(
                f"Resync{step.name}", f"SET {attribute(step.name)} = :entry", entry
            )
        states[save] = saved
    states["Finish"] = {
        "Type": "Task",
        "Resource": "arn:aws:states:::dynamodb:deleteItem",
        "Parameters": {"TableName": table_name, "Key": key},
        "ResultPath": None,
        "Retry": [DYNAMODB_RETRY],
        "End": True,
        "Comment": "All steps done: the checkpoint goes; the output is the state with every result",
    }
    return {
        "Comment": f"Resumable: {' -> '.join(names)} (components/resumable_asl.py)",
        "StartAt": "Load",
        "States": states,
    }


def reference_transitions(steps: int, skipped: int = 0, first_run: bool = True) -> int:
    """State transitions of the reference layout (for the benchmark's ratio)."""
    start = 3 if first_run else 2  # GetItem, Choice, (PutItem)
    return start + skipped + 3 * (steps - skipped) + 1


def transitions(steps: int, skipped: int = 0) -> int:
    """State transitions of the generated layout when no step was marked by hand mid-run."""
    return 2 + 2 * (steps - skipped) + 1
