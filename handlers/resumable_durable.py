"""Pattern 4 as a Lambda durable function (ResumableWorkflow, backend 'durable-function').

The same checkpoint item per business key as the state machine form, through the same
functions (handlers/resumable.py: the lease, the entries, completion, the TTLs; so
`python -m exactly_once.ops show|mark` read and write it alike), run as durable steps
instead of states:

    Load          take the key's lease; every step's entry (KeyInProgress: the run fails
                  at once, no step runs; a completed key comes back all done)
    <step>        invoke the step's Lambda with the state (input + `results`): its result is
                  the step's output (STEP: 3 attempts, 1 s then 2 s apart; then the run
                  fails, and a re-run resumes here)
    Save<step>    write the step's entry while this execution holds the lease (LeaseLost
                  otherwise), and take every entry back: a step marked done by hand
                  meanwhile is skipped
    Finish        mark the key completed for the retention, release the lease

A re-run (a new execution) skips the steps done; a replay of this execution after a crash
gets every finished durable step's checkpointed result back without running it again. A
step that crashes after its effect and before its durable checkpoint runs again, as in
the state machine form: make steps idempotent on the business key.

Needs aws-durable-execution-sdk-python in the function (the component vendors it).
"""

from __future__ import annotations

import functools
import json
from typing import Any

from aws_durable_execution_sdk_python.config import Duration, StepConfig
from aws_durable_execution_sdk_python.context import DurableContext, StepContext, durable_step
from aws_durable_execution_sdk_python.exceptions import StepError
from aws_durable_execution_sdk_python.execution import durable_execution
from aws_durable_execution_sdk_python.retries import (
    JitterStrategy,
    RetryDecision,
    RetryPresets,
    RetryStrategyConfig,
    create_retry_strategy,
)

from exactly_once.handlers import metrics, resumable
from exactly_once.handlers.checkpoints import attribute
from exactly_once.handlers.errors import ClientError, aws_code
from exactly_once.handlers.resumable import (
    KeyInProgress,
    LeaseLost,
    ResumableDurableSettings,
    ResumableSettings,
)
from exactly_once.handlers.runtime import client, lambda_handler, log


class StepFailed(Exception):
    """The step's Lambda answered with an error (its type and message follow)."""


_TRANSIENT = RetryPresets.transient()


def _checkpoint_retry(error: Exception, attempt: int) -> RetryDecision:
    """A lease held by a running execution, or lost, fails the run at once; anything else
    (a throttle, a 5xx) is retried."""
    if isinstance(error, KeyInProgress | LeaseLost):
        return RetryDecision.no_retry()
    return _TRANSIENT(error, attempt)


CHECKPOINT = StepConfig(retry_strategy=_checkpoint_retry)
# A step's Lambda failed: two more tries soon, then the run fails (its checkpoint keeps
# what is done; a re-run resumes) rather than holding the key for minutes.
STEP = StepConfig(
    retry_strategy=create_retry_strategy(
        RetryStrategyConfig(
            max_attempts=3,
            initial_delay=Duration.from_seconds(1),
            backoff_rate=2,
            jitter_strategy=JitterStrategy.NONE,
        )
    )
)


def _checkpoint(context: DurableContext, func: Any, name: str) -> Any:
    """A checkpoint step; its KeyInProgress or LeaseLost fails the run under that name, as
    the state machine's run fails (the SDK wraps a step's error in StepError)."""
    try:
        return context.step(func, name=name, config=CHECKPOINT)
    except StepError as error:
        kind = str(getattr(error.__cause__, "error_type", "") or "")
        for cause in (KeyInProgress, LeaseLost):
            if kind.rsplit(".", 1)[-1] == cause.__name__:
                raise cause(error.message) from None
        raise


def business_key(event: dict[str, Any], key_path: str) -> str:
    value: Any = event
    for field in key_path.removeprefix("$.").split("."):
        if not isinstance(value, dict) or field not in value:
            raise ValueError(f"the input has no {key_path}: it names the business key")
        value = value[field]
    return str(value)


@durable_step
def _load(step: StepContext, config: ResumableSettings, key: str, me: str) -> dict[str, Any]:
    return resumable.load(config, key, me)


# A Lambda runs for up to 900 s; the answer of a synchronous invoke is awaited a little longer.
STEP_READ_TIMEOUT_SECONDS = 900 + 60


@functools.cache
def step_client() -> Any:
    """The Lambda client for step invokes only. botocore retries a read timeout (60 s by
    default) by sending the invoke again while the first still runs: the step would run
    up to 3 times per attempt. So: wait as long as a Lambda may run, and never let the SDK
    resend an invoke (a failed one fails this durable step, whose own retries decide)."""
    import boto3
    from botocore.config import Config

    config = Config(
        read_timeout=STEP_READ_TIMEOUT_SECONDS,
        tcp_keepalive=True,  # a quiet connection held for minutes
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    return boto3.client("lambda", config=config)


def invoke_step(function_arn: str, state: dict[str, Any]) -> Any:
    """The step's Lambda, invoked synchronously with the state, once: its result, or
    StepFailed."""
    answer = step_client().invoke(FunctionName=function_arn, Payload=json.dumps(state))
    payload = json.loads(answer["Payload"].read() or b"null")
    if answer.get("FunctionError"):
        error = payload if isinstance(payload, dict) else {}
        raise StepFailed(f"{error.get('errorType', 'Error')}: {error.get('errorMessage', '')}")
    return payload


@durable_step
def _run(step: StepContext, function_arn: str, state: dict[str, Any]) -> Any:
    return invoke_step(function_arn, state)


@durable_step
def _save(
    step: StepContext,
    config: ResumableSettings,
    key: str,
    me: str,
    name: str,
    entry: dict[str, Any],
) -> dict[str, Any]:
    try:
        item = client("dynamodb").update_item(
            TableName=config.table,
            Key={"pk": {"S": key}},
            UpdateExpression=f"SET {attribute(name)} = :entry",
            ConditionExpression="lease = :me",
            ExpressionAttributeValues={
                ":entry": {"S": json.dumps(entry, separators=(",", ":"))},
                ":me": {"S": me},
            },
            ReturnValues="ALL_NEW",
        )["Attributes"]
    except ClientError as exc:
        if aws_code(exc) == "ConditionalCheckFailedException":
            raise LeaseLost(f"key {key!r}: {me} no longer holds its lease") from None
        raise
    return resumable.entries(config, item)


@durable_step
def _finish(step: StepContext, config: ResumableSettings, key: str, me: str) -> dict[str, Any]:
    return resumable.finish(config, key, me)


@lambda_handler
@durable_execution
def handler(event: dict[str, Any], context: DurableContext) -> dict[str, Any]:
    config = ResumableDurableSettings.current()
    checkpoints = config.checkpoints
    key = business_key(event, config.key_path)
    me = context.state.durable_execution_arn
    results = _checkpoint(context, _load(checkpoints, key, me), "Load")
    for name, function_arn in zip(config.steps, config.step_functions, strict=True):
        if results[name].get("done"):
            continue  # done by an earlier run (or marked by hand)
        state = {**event, "results": results}
        try:
            output = context.step(_run(function_arn, state), name=name, config=STEP)
        except StepError:
            # Its retries spent: the run fails here, once (a replay never gets this far).
            metrics.emit(resumable.PATTERN, {"key": key, "step": name}, RunsFailed=1)
            raise
        entry = {"done": True, "output": output, "by": me}
        results = _checkpoint(context, _save(checkpoints, key, me, name, entry), f"Save{name}")
    _checkpoint(context, _finish(checkpoints, key, me), "Finish")
    log("INFO", "workflow finished", key=key, execution=me)
    return {**event, "results": results}
