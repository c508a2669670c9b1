"""Faults injected around an unchanged Lambda handler, for the e2e reliability suite.

A function whose environment has `HOST_EXECUTOR_WRAPPER=<name>` runs its handler through
the wrapper of that name (worker.py applies it once, after the handler's import), as
Lambda's `AWS_LAMBDA_EXEC_WRAPPER` wraps a runtime. On AWS the variable means nothing, so
a test stack sets it like any of its function's variables and the product never knows.

Faults go through botocore's event hooks on the boto3 default session, whose emitter every
client the handler creates afterwards copies: the code under test is exactly what a real
stack runs, and the wrapper needs no permission the function does not already have.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

CRASH_MARK = "crash-once"  # only keys with this in them crash, and only on their first run
# Where a crash is remembered: the host's, so a fresh sandbox after the crash sees it.
MARKS = "HOST_EXECUTOR_FAULT_DIR"

Handler = Callable[[Any, Any], Any]


def _die() -> None:
    os._exit(137)  # as if the sandbox were killed: no cleanup, no error report


def _first(bucket: str, key: str) -> bool:
    """True once per output key, across processes: the first run of a marked key claims it."""
    marks = Path(os.environ.get(MARKS) or Path(tempfile.gettempdir(), "exactly-once-faults"))
    marks.mkdir(parents=True, exist_ok=True)
    mark = marks / hashlib.sha256(f"{bucket}/{key}".encode()).hexdigest()
    try:
        os.close(os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _arm(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
    """Before a PUT of a marked key, or the first part of its multipart upload: crash after
    it, on the key's first run only."""
    key = str(params.get("Key", ""))
    if CRASH_MARK not in key or params.get("PartNumber", 1) != 1:
        return
    if _first(str(params.get("Bucket", "")), key):
        context["crash_after_write"] = key


def _crash(context: dict[str, Any], **_: Any) -> None:
    if "crash_after_write" in context:
        print(
            f'{{"level": "ERROR", "message": "fault: crashing after a write", '
            f'"key": "{context["crash_after_write"]}"}}',
            flush=True,
        )
        _die()


HOOKS = {  # (botocore event, unique id) -> hook
    ("before-parameter-build.s3.PutObject", "crash-first-put"): _arm,
    ("after-call.s3.PutObject", "crash-put"): _crash,
    ("before-parameter-build.s3.UploadPart", "crash-first-part"): _arm,
    ("after-call.s3.UploadPart", "crash-part"): _crash,
}


def arm_crash_after_write(events: Any) -> None:
    """Register the crash on a botocore event emitter (a session's or a client's)."""
    for (event, unique_id), hook in HOOKS.items():
        events.register(event, hook, unique_id)


def crash_after_write(handler: Handler) -> Handler:
    """The handler, dying right after the first PUT of a marked key's output, or after the
    first part of its multipart upload: the retry must then publish exactly once."""
    import boto3

    boto3.setup_default_session()
    arm_crash_after_write(boto3.DEFAULT_SESSION.events)  # type: ignore[union-attr]
    return handler


WRAPPERS: dict[str, Callable[[Handler], Handler]] = {"crash-after-write": crash_after_write}


def wrap(handler: Handler, name: str) -> Handler:
    if name not in WRAPPERS:
        raise ValueError(f"HOST_EXECUTOR_WRAPPER={name!r}: not one of {sorted(WRAPPERS)}")
    return WRAPPERS[name](handler)
