"""Start a Step Functions execution at most once per name, and say what happened.

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
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any

from exactly_once.handlers.errors import ClientError, aws_code
from exactly_once.handlers.names import execution_name
from exactly_once.handlers.runtime import client
from exactly_once.handlers.settings import choice

STARTED = "STARTED"
DUPLICATE = "DUPLICATE"


class ReusePolicy(enum.StrEnum):
    """What a second start of the same name does: nothing (REJECT_DUPLICATE), or, after
    a failed, timed-out or aborted run, a deliberate re-run under the next attempt's name."""

    REJECT_DUPLICATE = "REJECT_DUPLICATE"
    ALLOW_DUPLICATE_FAILED_ONLY = "ALLOW_DUPLICATE_FAILED_ONLY"


RETRYABLE_STATUSES = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})
# Errors no redelivery can fix: the event goes to the DLQ instead of being retried.
PERMANENT_ERRORS = frozenset({"InvalidName", "InvalidExecutionInput", "InvalidArn"})


@dataclasses.dataclass(frozen=True)
class Outcome:
    status: str  # STARTED | DUPLICATE
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
) -> Outcome:
    """Start `document` (plus its attempt number and `request_id`, which must be unique
    per delivery, e.g. the Lambda request id) under the name derived from `key`."""
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
            status = sfn.describe_execution(executionArn=arn)["status"]
            if status not in RETRYABLE_STATUSES:
                return Outcome(DUPLICATE, name, arn, attempt, status)
            attempt += 1  # a deliberate re-run of a failed attempt: deterministic next name
            continue
        return Outcome(STARTED, name, response["executionArn"], attempt)
