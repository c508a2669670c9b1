"""The host executor's fault wrappers: a test stack's fault around an unchanged handler."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from host_executor import lambda_wrappers


def test_a_wrapper_arms_the_clients_the_handler_creates_afterwards(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN a handler, and the default session its boto3.client() calls use
    def handler(event: object, context: object) -> str:
        return "ran"

    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    monkeypatch.setenv(lambda_wrappers.MARKS, str(tmp_path))
    # WHEN the worker wraps it, as HOST_EXECUTOR_WRAPPER=crash-after-write asks
    wrapped = lambda_wrappers.wrap(handler, "crash-after-write")
    # THEN the handler runs unchanged, and a client it creates later carries the fault
    assert wrapped(None, None) == "ran"
    s3 = boto3.client("s3", region_name="us-east-1")
    context: dict[str, object] = {}
    key = f"out/{lambda_wrappers.CRASH_MARK}.csv"
    s3.meta.events.emit(
        "before-parameter-build.s3.PutObject",
        params={"Bucket": "b", "Key": key},
        context=context,
        model=s3.meta.service_model.operation_model("PutObject"),
    )
    assert context["crash_after_write"] == key


def test_a_marked_key_crashes_on_its_first_run_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(lambda_wrappers.MARKS, str(tmp_path))
    params = {"Bucket": "b", "Key": f"out/{lambda_wrappers.CRASH_MARK}.csv"}
    first: dict[str, object] = {}
    lambda_wrappers._arm(params, first)
    again: dict[str, object] = {}
    lambda_wrappers._arm(params, again)  # a retry, in a fresh sandbox: the mark is on disk
    assert first == {"crash_after_write": params["Key"]} and again == {}
    later_part: dict[str, object] = {}
    lambda_wrappers._arm({**params, "Key": "other-crash-once", "PartNumber": 2}, later_part)
    assert later_part == {}  # only the first part of an upload


def test_an_unknown_wrapper_is_refused_with_the_names_it_knows() -> None:
    with pytest.raises(ValueError, match="crash-after-write"):
        lambda_wrappers.wrap(lambda event, context: None, "crash-after-read")
