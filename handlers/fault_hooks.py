"""Test-stack entry points: an unchanged production handler with a fault injected around it.

A component selects one of these instead of its handler only when a test stack asks for a
fault (`IdempotentEtlArgs.fault_injection`); no production handler imports this module.
Faults are injected through botocore's event hooks on the handler's own clients, so the
code under test is exactly what a real stack runs.
"""

from __future__ import annotations

import os
from typing import Any

from exactly_once.handlers import etl
from exactly_once.handlers.errors import ClientError, object_missing
from exactly_once.handlers.runtime import client, log

CRASH_MARK = "crash-once"  # only keys with this in them crash, and only on their first run


def _die() -> None:
    os._exit(137)  # as if the sandbox were killed: no cleanup, no error report


def _first_put(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """Before a PUT of a marked key: crash after it unless an earlier run wrote it."""
    key = str(params.get("Key", ""))
    if CRASH_MARK not in key:
        return
    try:
        client("s3").head_object(Bucket=params["Bucket"], Key=key)
    except ClientError as exc:
        if not object_missing(exc):
            raise
        context["crash_after_write"] = key


def _first_part(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """Before the first part of a marked key's multipart upload: crash after it unless an
    earlier run's upload is still there (a crashed run never aborts its own)."""
    key = str(params.get("Key", ""))
    if CRASH_MARK not in key or params.get("PartNumber") != 1:
        return
    listing = client("s3").list_multipart_uploads(Bucket=params["Bucket"], Prefix=key)
    if len([u for u in listing.get("Uploads", []) if u["Key"] == key]) == 1:  # ours alone
        context["crash_after_write"] = key


def _crash_after_write(context: dict[str, Any], **_: Any) -> None:
    if "crash_after_write" in context:
        log("ERROR", "fault injection: crashing after a write", key=context["crash_after_write"])
        _die()


def arm_crash_after_write() -> None:
    events = client("s3").meta.events
    events.register("before-parameter-build.s3.PutObject", _first_put, "crash-first-put")
    events.register("after-call.s3.PutObject", _crash_after_write, "crash-put")
    events.register("before-parameter-build.s3.UploadPart", _first_part, "crash-first-part")
    events.register("after-call.s3.UploadPart", _crash_after_write, "crash-part")


def etl_crash_after_write(event: Any, context: Any) -> dict[str, Any]:
    """The ETL handler, dying right after the first PUT of a marked key's output, or after
    the first part of its multipart upload: the retry must then publish exactly once."""
    arm_crash_after_write()  # idempotent: botocore keeps one handler per unique id
    return etl.handler(event, context)
