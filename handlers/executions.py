"""Start an execution at most once per name, and say what happened: a Step Functions
execution (`start_once`) or a Lambda durable function's (`start_durable_once`).

STANDARD state machines keep execution names unique for 90 days, so StartExecution
with a derived name is an atomic "insert if absent": no table, no lock.
- new name            -> STARTED
- name already in use -> ExecutionAlreadyExists: a DUPLICATE, unless the reuse policy
  allows a retry of a failed execution (next attempt name)
Every call's input carries its own request id, so no two calls send the same input:
StartExecution's "same name and same input while running" success can only answer a
retry of the very call that started it (a Lambda retry keeps its request id), and a
concurrent twin always gets ExecutionAlreadyExists. No clocks are compared.
Everything else (throttling, 5xx, timeouts) propagates so the event is redelivered;
it is never reported as a duplicate.

A durable function's Invoke takes the name as DurableExecutionName (64 characters of the
same set, scoped to the function: names.durable_execution_name), an idempotency key kept
for the function's retention period (Lambda developer guide, durable functions,
"Idempotency"): a new name starts an execution; the same name
and payload while it runs returns that execution; any other payload raises
DurableExecutionAlreadyStartedException. The same per-call request id makes a concurrent
twin always the exception, so the same rules hold.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, Literal

from exactly_once.handlers.errors import ClientError, aws_code
from exactly_once.handlers.names import durable_execution_name, execution_name
from exactly_once.handlers.runtime import client
from exactly_once.handlers.settings import choice

STARTED = "STARTED"
DUPLICATE = "DUPLICATE"
REDRIVEN = "REDRIVEN"  # a failed attempt resumed under its own name (RedriveExecution)


class ReusePolicy(enum.StrEnum):
    """What a second start of the same name does: nothing (REJECT_DUPLICATE), or, after
    a failed, timed-out or aborted run, a deliberate re-run under the next attempt's name."""

    REJECT_DUPLICATE = "REJECT_DUPLICATE"
    ALLOW_DUPLICATE_FAILED_ONLY = "ALLOW_DUPLICATE_FAILED_ONLY"


ReusePolicyName = Literal["REJECT_DUPLICATE", "ALLOW_DUPLICATE_FAILED_ONLY"]  # its values


class Backend(enum.StrEnum):
    """What a starter starts: a STANDARD state machine's execution, or a Lambda durable
    function's (docs/choosing.md compares them)."""

    STEP_FUNCTIONS = "step-functions"
    DURABLE_FUNCTION = "durable-function"


BackendName = Literal["step-functions", "durable-function"]  # its values (components/config.py)


RETRYABLE_STATUSES = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})
DURABLE_RETRYABLE_STATUSES = frozenset({"FAILED", "TIMED_OUT", "STOPPED"})
DURABLE_ALREADY_STARTED = "DurableExecutionAlreadyStartedException"
# Errors no redelivery can fix: the event goes to the DLQ instead of being retried.
PERMANENT_ERRORS = frozenset(
    {
        "InvalidName",
        "InvalidExecutionInput",
        "InvalidArn",
        # Invoke: a payload over the asynchronous limit, or a malformed request
        "RequestTooLargeException",
        "InvalidParameterValueException",
    }
)


@dataclasses.dataclass(frozen=True)
class Outcome:
    status: str  # STARTED | DUPLICATE | REDRIVEN
    name: str
    execution_arn: str
    attempt: int
    existing_status: str | None = None  # of the execution a DUPLICATE collided with

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def execution_arn(state_machine_arn: str, name: str) -> str:
    return f"{state_machine_arn.replace(':stateMachine:', ':execution:', 1)}:{name}"


def canonical_input(document: dict[str, Any]) -> str:
    """Byte-stable JSON, so a redelivered event gets the same-input idempotent success."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)


def start_once(
    state_machine_arn: str,
    key: str,
    document: dict[str, Any],
    request_id: str,
    reuse_policy: ReusePolicy = ReusePolicy.REJECT_DUPLICATE,
    hide_key: bool = False,
    sfn: Any = None,
    redrive: bool = False,
) -> Outcome:
    """Start `document` (plus its attempt number and `request_id`, which must be unique
    per delivery, e.g. the Lambda request id) under the name derived from `key`.

    `redrive` (with ALLOW_DUPLICATE_FAILED_ONLY): a failed attempt that Step Functions can
    still redrive (`redriveStatus` REDRIVABLE: within 14 days of its end) is redriven
    rather than followed by the next attempt's name. So the key has one execution at a
    time whoever retries it: an operator's RedriveExecution and ours are the same call on
    the same ARN (the second finds it running: ExecutionNotRedrivable, a DUPLICATE), and
    the next name is started only for an attempt nobody can redrive any more. Without it,
    `-r1` could run beside a redriven `-r0`."""
    reuse_policy = choice(ReusePolicy, reuse_policy, "reuse policy")
    sfn = sfn or client("stepfunctions")
    attempt = 0
    while True:
        name = execution_name(key, attempt, hide_key)
        arn = execution_arn(state_machine_arn, name)
        try:
            response = sfn.start_execution(
                stateMachineArn=state_machine_arn,
                name=name,
                input=canonical_input({**document, "attempt": attempt, "requestId": request_id}),
            )
        except ClientError as exc:
            if aws_code(exc) != "ExecutionAlreadyExists":
                raise
            if reuse_policy == ReusePolicy.REJECT_DUPLICATE:
                return Outcome(DUPLICATE, name, arn, attempt)
            described = sfn.describe_execution(executionArn=arn)
            status = described["status"]
            if status not in RETRYABLE_STATUSES:
                return Outcome(DUPLICATE, name, arn, attempt, status)
            if redrive and described.get("redriveStatus") == "REDRIVABLE":
                return _redrive(sfn, name, arn, attempt, status, request_id)
            attempt += 1  # a deliberate re-run of a failed attempt: deterministic next name
            continue
        return Outcome(STARTED, name, response["executionArn"], attempt)


def _redrive(sfn: Any, name: str, arn: str, attempt: int, status: str, token: str) -> Outcome:
    """RedriveExecution of a failed attempt; a DUPLICATE if it was redriven meanwhile. The
    token makes a retry of this very call (Lambda's, same request id) the same redrive."""
    try:
        sfn.redrive_execution(executionArn=arn, clientToken=token[:64])
    except ClientError as exc:
        if aws_code(exc) != "ExecutionNotRedrivable":
            raise
        return Outcome(DUPLICATE, name, arn, attempt, status)
    return Outcome(REDRIVEN, name, arn, attempt, status)


def start_durable_once(
    function_arn: str,
    key: str,
    document: dict[str, Any],
    request_id: str,
    reuse_policy: ReusePolicy = ReusePolicy.REJECT_DUPLICATE,
    hide_key: bool = False,
    lam: Any = None,
) -> Outcome:
    """start_once for a durable function (`function_arn`: a version or alias): an
    asynchronous Invoke named by `key`, its payload `document` plus attempt and request id."""
    reuse_policy = choice(ReusePolicy, reuse_policy, "reuse policy")
    lam = lam or client("lambda")
    attempt = 0
    while True:
        name = durable_execution_name(function_arn, key, attempt, hide_key)
        payload = {**document, "attempt": attempt, "requestId": request_id}
        try:
            response = lam.invoke(
                FunctionName=function_arn,
                InvocationType="Event",
                DurableExecutionName=name,
                Payload=canonical_input(payload).encode(),
            )
        except ClientError as exc:
            if aws_code(exc) != DURABLE_ALREADY_STARTED:
                raise
            if reuse_policy == ReusePolicy.REJECT_DUPLICATE:
                return Outcome(DUPLICATE, name, "", attempt)
            arn, status = durable_execution(lam, function_arn, name)
            if status not in DURABLE_RETRYABLE_STATUSES:
                return Outcome(DUPLICATE, name, arn, attempt, status)
            attempt += 1  # a deliberate re-run of a failed attempt: deterministic next name
            continue
        return Outcome(STARTED, name, str(response.get("DurableExecutionArn", "")), attempt)


def durable_execution(lam: Any, function_arn: str, name: str) -> tuple[str, str]:
    """The ARN and status of the function's execution of this name ("" if none is kept)."""
    parts = function_arn.split(":")  # arn:aws:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER]
    qualifier = {"Qualifier": parts[7]} if len(parts) == 8 else {}
    listed = lam.list_durable_executions_by_function(
        FunctionName=":".join(parts[:7]), DurableExecutionName=name, **qualifier
    )
    for execution in listed.get("DurableExecutions", []):
        if execution.get("DurableExecutionName") == name:
            return str(execution["DurableExecutionArn"]), str(execution["Status"])
    return "", ""
