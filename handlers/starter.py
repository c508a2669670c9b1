"""Pattern 1, the name-dedup starter: EventBridge event -> StartExecution, exactly once.

Configured by environment (set by components.NameDedupStarter):
STATE_MACHINE_ARN, KEY_STRATEGY, REUSE_POLICY, HIDE_KEY, DLQ_URL, LOG_LEVEL.
"""

from __future__ import annotations

import os
from typing import Any

from handlers.errors import BadEvent, ClientError, aws_code
from handlers.executions import PERMANENT_ERRORS, start_once
from handlers.keys import key_extractor
from handlers.names import key_hash
from handlers.runtime import dead_letter, log, request_id

STATE_MACHINE_ARN = os.environ.get("STATE_MACHINE_ARN", "")
REUSE_POLICY = os.environ.get("REUSE_POLICY", "REJECT_DUPLICATE")
HIDE_KEY = os.environ.get("HIDE_KEY", "false").lower() == "true"
extract_key = key_extractor(os.environ.get("KEY_STRATEGY", "object-key"))


def handler(event: Any, context: Any) -> dict[str, Any]:
    event_id = event.get("id") if isinstance(event, dict) else None
    try:
        key = extract_key(event)
    except BadEvent as exc:
        dead_letter(event, str(exc), event_id=event_id)
        return {"status": "REJECTED", "reason": str(exc)}
    shown = {"key_hash": key_hash(key)} if HIDE_KEY else {"key": key}
    try:
        outcome = start_once(
            STATE_MACHINE_ARN,
            key,
            {"key": key, "event": event},
            request_id(context),
            reuse_policy=REUSE_POLICY,
            hide_key=HIDE_KEY,
        )
    except ClientError as exc:
        code = aws_code(exc)
        if code in PERMANENT_ERRORS:
            dead_letter(event, f"{code}: {exc}", event_id=event_id, **shown)
            return {"status": "REJECTED", "reason": f"{code}: {exc}"}
        # Throttling, 5xx and unknown AWS errors: raise so Lambda's async retry redelivers
        # (so does anything that is not an AWS error).
        log(
            "WARNING",
            "StartExecution failed; the event will be retried",
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
