"""Test-stack entry points: an unchanged production handler with a fault injected around it.

A component selects one of these instead of its handler only when a test stack asks for a
fault (`IdempotentEtlArgs.fault_injection`); no production handler imports this module.
Faults are injected through botocore's event hooks on the handler's own clients, so the
code under test is exactly what a real stack runs.
"""

from __future__ import annotations

import os
from typing import Any

from handlers import etl
from handlers.errors import ClientError, object_missing
from handlers.runtime import client, log

CRASH_MARK = "crash-once"  # only keys with this in them crash, and only on their first run


def _die() -> None:
    os._exit(137)  # as if the sandbox were killed: no cleanup, no error report


def _first_put(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """Before a PUT of a marked key (a staging object, or a conditional-write output):
    crash after it unless an earlier run wrote it."""
    key = str(params.get("Key", ""))
    if CRASH_MARK not in key:
        return
    try:
        client("s3").head_object(Bucket=params["Bucket"], Key=key)
    except ClientError as exc:
        if not object_missing(exc):
            raise
        context["crash_after_put"] = key


def _crash_after_put(context: dict[str, Any], **_: Any) -> None:
    if "crash_after_put" in context:
        log("ERROR", "fault injection: crashing after a PUT", key=context["crash_after_put"])
        _die()


def arm_crash_after_put() -> None:
    events = client("s3").meta.events
    events.register("before-parameter-build.s3.PutObject", _first_put, "crash-first-put")
    events.register("after-call.s3.PutObject", _crash_after_put, "crash-put")


def etl_crash_after_put(event: Any, context: Any) -> dict[str, Any]:
    """The ETL handler, dying right after its first PUT of a marked key's output (staged,
    or written conditionally): the retry must then publish exactly once."""
    arm_crash_after_put()  # idempotent: botocore keeps one handler per unique id
    return etl.handler(event, context)
