"""Generate the checkpointed state machine of pattern 4 (JSONPath only).

The state is the execution input plus `results` (a reserved field): one entry per step,
`{}` until the step is done and `{"done": true, "output": ..., "by": <run>}` after, so every step
(and a re-run) sees the outputs of the steps before it.

One DynamoDB item per business key holds the same entries, one attribute per step
(`out_<step>`, the entry as a JSON string), the lease and the TTL. The layout, and what
each state costs in state transitions (n steps, a fresh run):

    Load      the checkpoint function (handlers/resumable.py): take the key's 1
              lease (KeyInProgress if a running execution holds it), return
              every entry; a completed key returns them all done
    Resume    Choice: jump to the first step not done                       1
    <step>    the step's Lambda                                             n
    Save<k>   UpdateItem: write the step's entry; conditional on the lease  n
              (this execution's) and on the next step not being done
              already, so the common case goes straight on to the next step
              (a step marked done by hand fails the condition and takes the
              Resync path back to Resume; a lost lease fails LeaseLost)
    Finish    the checkpoint function: completed, kept for the retention,   1
              lease released
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

from exactly_once.components.asl import CONDITION_FAILED, LAMBDA_RETRY, dynamodb_update
from exactly_once.components.targets import deliver, retries
from exactly_once.handlers.checkpoints import EMPTY, SAVED_AT, attribute
from exactly_once.handlers.targets import FIFO, address, kind_of

_STEP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,47}$")


@dataclasses.dataclass(frozen=True)
class Step:
    """`function_arn` (any kind in components/targets.py) is given the whole state: a
    Lambda function's result is the step's output; a queue, topic, state machine (started,
    not awaited) or event bus is delivered to, its answer the output. `retry`: extra Step
    Functions Retry rules (e.g. for your function's own errors)."""

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


def definition(
    steps: list[Step],
    table_name: str,
    checkpoint_arn: str,
    key_path: str,
    timeout_seconds: int | None = None,
) -> dict[str, Any]:
    """The state machine definition (a dict; json.dumps it); `checkpoint_arn` is the
    checkpoint function's (handlers/resumable.py); `timeout_seconds` bounds a run, and so
    how long a stuck run holds its key."""
    validate(steps, key_path)
    key_text = f"States.Format('{{}}', {key_path})"
    key = {"pk": {"S.$": key_text}}
    names = [step.name for step in steps]

    def checkpoint(action: str) -> dict[str, Any]:
        return {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {
                "FunctionName": checkpoint_arn,
                "Payload": {"action": action, "key.$": key_text, "execution.$": "$$.Execution.Id"},
            },
            # Only the invoke's own transient errors: KeyInProgress and LeaseLost fail the run.
            "Retry": [LAMBDA_RETRY],
        }

    # A Save or Resync whose lease condition failed: another execution holds the key.
    lease_lost = {"ErrorEquals": [CONDITION_FAILED], "ResultPath": "$.error", "Next": "LeaseLost"}

    def resync(state_name: str, update: str, values: dict[str, Any]) -> dict[str, Any]:
        state = dynamodb_update(table_name, key, update, values, condition="lease = :me")
        state["Parameters"]["ReturnValues"] = "ALL_NEW"
        return {
            **state,
            "ResultSelector": {
                f"{name}.$": f"States.StringToJson($.Attributes.{attribute(name)}.S)"
                for name in names
            },
            "ResultPath": "$.results",
            "Next": "Resume",
            "Comment": f"{state_name}: re-read every step's entry into $.results",
        }

    states: dict[str, Any] = {
        "Load": {
            **checkpoint("load"),
            "ResultSelector": {f"{name}.$": f"$.Payload.{name}" for name in names},
            "ResultPath": "$.results",
            "Next": "Resume",
            "Comment": "Take the key's lease; every step's entry into $.results",
        },
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
        kind = kind_of(step.function_arn, f"step {step.name!r}'s target")
        # A FIFO queue or topic drops a step's retried delivery within an execution by this
        # id (a started state machine's name could exceed 80 characters: no name there).
        dedup = f"States.Format('{{}}-{step.name}', $$.Execution.Name)"
        fifo = kind in FIFO
        task = deliver(kind, address(step.function_arn), "$", dedup=dedup if fifo else None)
        states[step.name] = {
            **task,
            # A Lambda's result is the step's output; other kinds' is what they answer
            # (a message id, an execution ARN, an event id).
            # `by`: which run did it (the checkpoint function counts steps run and skipped
            # by it; an operator's mark says "operator").
            "ResultSelector": {
                "done": True,
                "output.$": task["ResultSelector"]["response.$"],
                "by.$": "$$.Execution.Id",
            },
            "ResultPath": f"$.results.{step.name}",
            "Retry": [*retries(kind), *step.retry],
            "Next": save,
        }
        entry = {
            ":entry": {"S.$": f"States.JsonToString($.results.{step.name})"},
            ":at": {"S.$": "$$.State.EnteredTime"},
        }
        # saved_at: when this execution last wrote. A run taking the lease over from an
        # ended holder reads it first (handlers/resumable.py, load): a holder that wrote
        # after its stopDate was redriven and is running again.
        update = f"SET {attribute(step.name)} = :entry, {SAVED_AT} = :at"
        # Every write is this execution's only while it holds the key's lease: a run that
        # failed, was taken over by another and then redriven (RedriveExecution reopens a
        # FAILED run for 14 days, under the same ARN) fails LeaseLost at its first Save,
        # instead of going on to run the steps after it a second time.
        mine = {**entry, ":me": {"S.$": "$$.Execution.Id"}}
        saved = {
            **dynamodb_update(table_name, key, update, mine, condition="lease = :me"),
            "Next": following or "Finish",
        }
        if following:
            # Straight on to the next step unless it was marked done meanwhile (or the
            # lease is gone: Resync tells which).
            saved["Parameters"]["ConditionExpression"] = (
                f"lease = :me AND {attribute(following)} = :empty"
            )
            saved["Parameters"]["ExpressionAttributeValues"] = {**mine, ":empty": {"S": EMPTY}}
            states[f"Resync{step.name}"] = {
                **resync(f"Resync{step.name}", update, mine),
                "Catch": [lease_lost],
            }
            saved["Catch"] = [
                {
                    "ErrorEquals": [CONDITION_FAILED],
                    "ResultPath": None,
                    "Next": f"Resync{step.name}",
                }
            ]
        else:
            saved["Catch"] = [lease_lost]
        states[save] = saved
    states["Finish"] = {
        **checkpoint("finish"),
        "ResultPath": None,
        "End": True,
        "Comment": "All steps done: the key is completed (kept for the retention), its lease "
        "released; the output is the state with every result",
    }
    states["LeaseLost"] = {
        "Type": "Fail",
        "Error": "LeaseLost",
        "Cause": "another execution holds this key's lease (it took over after this run "
        "ended; this run was redriven or resumed since): this run writes nothing more",
    }
    machine: dict[str, Any] = {
        "Comment": f"Resumable: {' -> '.join(names)} (components/resumable_asl.py)",
        "StartAt": "Load",
        "States": states,
    }
    if timeout_seconds:
        machine["TimeoutSeconds"] = timeout_seconds
    return machine


def reference_transitions(steps: int, skipped: int = 0, first_run: bool = True) -> int:
    """State transitions of the reference layout (for the benchmark's ratio)."""
    start = 3 if first_run else 2  # GetItem, Choice, (PutItem)
    return start + skipped + 3 * (steps - skipped) + 1


def transitions(steps: int, skipped: int = 0) -> int:
    """State transitions of the generated layout when no step was marked by hand mid-run."""
    return 2 + 2 * (steps - skipped) + 1
