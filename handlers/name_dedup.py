"""Pattern 1, the name-dedup starter: EventBridge event -> StartExecution, exactly once
(or, with the durable-function backend, an Invoke named by DurableExecutionName: the
backend, whichever, is `handlers/backends.py`'s).

Configured by `StarterSettings` (set by components.NameDedupStarter), DLQ_URL, LOG_LEVEL.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from exactly_once.handlers import metrics
from exactly_once.handlers.backends import (  # re-exported: the starter's cold-start checks
    BACKENDS,
    DURABLE_API_BOTOCORE,
    missing_durable_api,
    unusable,
)
from exactly_once.handlers.errors import BadEvent, ClientError, aws_code
from exactly_once.handlers.executions import (
    DUPLICATE,
    PERMANENT_ERRORS,
    REDRIVEN,
    STARTED,
    Backend,
    ReusePolicy,
)
from exactly_once.handlers.keys import key_extractor
from exactly_once.handlers.names import key_hash
from exactly_once.handlers.runtime import correlate, dead_letter, lambda_handler, log, request_id
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


@lambda_handler
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


def start(event: Any, context: Any, config: StarterSettings) -> dict[str, Any]:
    event_id = event.get("id") if isinstance(event, dict) else None
    try:
        key = config.extract_key(event)
    except BadEvent as exc:
        dead_letter(event, str(exc), event_id=event_id, context=context)
        return {"status": "REJECTED", "reason": str(exc)}
    correlate(key_hash(key) if config.hide_key else key)  # a hidden key is never logged
    reason = unusable(config.backend, config.target_arn)
    if reason is not None:
        # Every event waits in the DLQ, with the reason, to be redriven once it is fixed.
        dead_letter(event, reason, event_id=event_id, context=context)
        return {"status": "REJECTED", "reason": reason}
    shown = {"key_hash": key_hash(key)} if config.hide_key else {"key": key}
    try:
        outcome = BACKENDS[config.backend].start(
            config.target_arn,
            key,
            {"key": key, "event": event},
            request_id(context),
            config.reuse_policy,
            config.hide_key,
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
            exc=exc,
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


__all__ = ["DURABLE_API_BOTOCORE", "handler", "missing_durable_api", "start", "unusable"]
