"""Pattern 1, the name-dedup starter: EventBridge event -> StartExecution, exactly once
(or, with the durable-function backend, an Invoke named by DurableExecutionName).

Configured by `StarterSettings` (set by components.NameDedupStarter), DLQ_URL, LOG_LEVEL.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from exactly_once.handlers import metrics
from exactly_once.handlers.errors import BadEvent, ClientError, aws_code
from exactly_once.handlers.executions import (
    DUPLICATE,
    PERMANENT_ERRORS,
    REDRIVEN,
    STARTED,
    Backend,
    Outcome,
    ReusePolicy,
    start_durable_once,
    start_once,
)
from exactly_once.handlers.keys import key_extractor
from exactly_once.handlers.names import key_hash
from exactly_once.handlers.runtime import client, dead_letter, log, request_id
from exactly_once.handlers.settings import Settings


@dataclasses.dataclass(frozen=True)
class StarterSettings(Settings):
    backend: Backend
    target_arn: str  # the state machine, or the durable function's version or alias
    key_strategy: str  # see handlers.keys
    reuse_policy: ReusePolicy
    hide_key: bool

    @functools.cached_property
    def extract_key(self) -> Callable[[Any], str]:
        return key_extractor(self.key_strategy)


def handler(event: Any, context: Any) -> dict[str, Any]:
    try:
        result = start(event, context, StarterSettings.current())
    except Exception:
        metrics.emit(PATTERN, Failed=1)  # Lambda retries it (and then dead-letters it)
        raise
    metrics.emit(PATTERN, **{OUTCOME_METRICS[result["status"]]: 1})
    return result


PATTERN = "name-dedup"
OUTCOME_METRICS = {
    STARTED: "Started",
    DUPLICATE: "DuplicateSuppressed",
    REDRIVEN: "Redriven",
    "REJECTED": "Rejected",
}


@functools.cache
def unusable(backend: Backend, target_arn: str) -> str | None:
    """Why the target cannot deduplicate by name, or None; asked once per cold start
    (errors propagate: retried)."""
    if backend == Backend.DURABLE_FUNCTION:
        missing = missing_durable_api(client("lambda"))
        if missing:
            return missing
        configuration = client("lambda").get_function_configuration(FunctionName=target_arn)
        if not configuration.get("DurableConfig"):
            return f"{target_arn} is not a durable function: no name dedup"
        return None
    described = client("stepfunctions").describe_state_machine(stateMachineArn=target_arn)
    if described["type"] != "STANDARD":
        # EXPRESS keeps no execution names: the same name would start it again and again.
        return f"{target_arn} is not a STANDARD state machine: no name dedup"
    return None


DURABLE_API_BOTOCORE = "1.42.1"  # the first botocore with the durable-execution APIs


def missing_durable_api(lam: Any) -> str | None:
    """Why this function's botocore cannot start durable executions, or None. A Lambda
    runtime's own SDK may predate them: Invoke would refuse DurableExecutionName, and
    GetFunctionConfiguration's answer would drop DurableConfig (every target "not
    durable"). The component packages a newer one (components/functions.py)."""
    model = lam.meta.service_model
    invoke = model.operation_model("Invoke").input_shape.members
    if "DurableExecutionName" in invoke and "ListDurableExecutionsByFunction" in (
        model.operation_names
    ):
        return None
    import botocore

    return (
        f"this function's botocore {botocore.__version__} has no durable-execution API (it "
        f"needs {DURABLE_API_BOTOCORE} or later): deploy it with NameDedupStarter, which "
        "packages one"
    )


def start(event: Any, context: Any, config: StarterSettings) -> dict[str, Any]:
    event_id = event.get("id") if isinstance(event, dict) else None
    try:
        key = config.extract_key(event)
    except BadEvent as exc:
        dead_letter(event, str(exc), event_id=event_id, context=context)
        return {"status": "REJECTED", "reason": str(exc)}
    reason = unusable(config.backend, config.target_arn)
    if reason is not None:
        # Every event waits in the DLQ, with the reason, to be redriven once it is fixed.
        dead_letter(event, reason, event_id=event_id, context=context)
        return {"status": "REJECTED", "reason": reason}
    shown = {"key_hash": key_hash(key)} if config.hide_key else {"key": key}
    starter: Callable[..., Outcome] = (
        # a failed attempt still redrivable is redriven, never run beside a redrive of it
        functools.partial(start_once, redrive=True)
        if config.backend == Backend.STEP_FUNCTIONS
        else start_durable_once  # durable executions have no redrive: the next name
    )
    try:
        outcome = starter(
            config.target_arn,
            key,
            {"key": key, "event": event},
            request_id(context),
            reuse_policy=config.reuse_policy,
            hide_key=config.hide_key,
        )
    except ClientError as exc:
        code = aws_code(exc)
        if code in PERMANENT_ERRORS:
            dead_letter(event, f"{code}: {exc}", event_id=event_id, context=context, **shown)
            return {"status": "REJECTED", "reason": f"{code}: {exc}"}
        # Throttling, 5xx and unknown AWS errors: raise so Lambda's async retry redelivers
        # (so does anything that is not an AWS error).
        log(
            "WARNING",
            "the start failed; the event will be retried",
            error=code,
            event_id=event_id,
            **shown,
        )
        raise
    log(
        "INFO",
        outcome.status,
        event_id=event_id,
        execution=outcome.name,
        attempt=outcome.attempt,
        existing_status=outcome.existing_status,
        **shown,
    )
    return outcome.as_dict()
