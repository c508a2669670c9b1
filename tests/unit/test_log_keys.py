"""The functions' log lines carry the keys Powertools for AWS Lambda's Logger writes, so a
team that reads Powertools logs (Logs Insights queries, dashboards, filters) reads ours
without learning: compared with a line its Logger writes for the same invocation."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
from contextlib import redirect_stdout
from typing import Any

import pytest

from exactly_once.handlers import runtime


class Context:
    function_name = "orders-starter"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:orders-starter"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e812345678"


@pytest.fixture
def lambda_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", Context.function_name)
    monkeypatch.setenv("_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "orders")
    monkeypatch.setenv("LOG_LEVEL", "INFO")


def powertools_line() -> dict[str, Any]:
    from aws_lambda_powertools import Logger

    stream = io.StringIO()
    logger = Logger(service="orders", logger_handler=logging.StreamHandler(stream))

    @logger.inject_lambda_context(correlation_id_path="detail.key")
    def handler(event: Any, context: Any) -> None:
        logger.info("started")

    handler({"detail": {"key": "order-7"}}, Context())
    return dict(json.loads(stream.getvalue().splitlines()[-1]))


def our_line() -> dict[str, Any]:
    stream = io.StringIO()

    @runtime.lambda_handler
    def handler(event: Any, context: Any) -> None:
        runtime.correlate(event["detail"]["key"])
        runtime.log("INFO", "started")

    with redirect_stdout(stream):
        handler({"detail": {"key": "order-7"}}, Context())
    return dict(json.loads(stream.getvalue().splitlines()[-1]))


def test_a_log_line_has_every_key_of_a_powertools_line_with_the_same_values(
    lambda_environment: None,
) -> None:
    theirs, ours = powertools_line(), our_line()
    assert set(theirs) <= set(ours), f"missing: {sorted(set(theirs) - set(ours))}"
    same = ("level", "message", "service", "function_name", "function_memory_size")
    same += ("function_arn", "function_request_id", "xray_trace_id", "correlation_id")
    assert {k: ours[k] for k in same} == {k: theirs[k] for k in same}
    assert isinstance(ours["cold_start"], bool) and ours["location"].startswith("handler:")
    # ISO 8601, UTC, to the millisecond
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", ours["timestamp"])


def test_only_the_first_invocation_of_a_sandbox_is_a_cold_start(lambda_environment: None) -> None:
    runtime._COLD[0] = True
    first, second = our_line(), our_line()
    assert (first["cold_start"], second["cold_start"]) == (True, False)
    assert "correlation_id" in second  # set by the handler, per invocation


def test_an_error_line_has_the_exception_keys_of_powertools_logger_exception(
    lambda_environment: None,
) -> None:
    from aws_lambda_powertools import Logger

    stream = io.StringIO()
    # (a service of its own: Powertools keeps one logger, and its first handler, per name)
    logger = Logger(service="orders-errors", logger_handler=logging.StreamHandler(stream))
    ours = io.StringIO()
    try:
        raise ValueError("the table refused")
    except ValueError as exc:
        logger.exception("status not written")
        with redirect_stdout(ours):
            runtime.log("WARNING", "status not written", exc=exc)
    theirs = json.loads(stream.getvalue().splitlines()[-1])
    line = json.loads(ours.getvalue().splitlines()[-1])
    assert (line["exception_name"], line["exception"]) == (
        theirs["exception_name"],
        theirs["exception"],
    )


@pytest.mark.parametrize(
    ("setting", "shown"),
    [
        ("DEBUG", ["DEBUG", "INFO", "WARNING", "ERROR"]),
        ("warn", ["WARNING", "ERROR"]),  # Lambda's spelling of WARNING, any case
        ("ERROR", ["ERROR"]),
        ("CRITICAL", []),  # Python's (and Powertools') level above ERROR: ours are silent
        ("FATAL", []),  # Lambda's
    ],
)
def test_log_level_names_the_lowest_level_written(
    monkeypatch: pytest.MonkeyPatch, setting: str, shown: list[str]
) -> None:
    monkeypatch.setenv("LOG_LEVEL", setting)
    stream = io.StringIO()
    with redirect_stdout(stream):
        for level in ("DEBUG", "INFO", "WARNING", "ERROR"):
            runtime.log(level, "a line")
    assert [json.loads(line)["level"] for line in stream.getvalue().splitlines()] == shown


def test_where_lambda_filters_a_warning_is_written_in_lambda_s_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Lambda's log-level filtering reads a "level" it does not list (TRACE, DEBUG, INFO,
    WARN, ERROR, FATAL) as INFO: under a filter at WARN, Python's WARNING would be dropped."""
    monkeypatch.setenv("LOG_LEVEL", "WARNING")
    stream = io.StringIO()
    with redirect_stdout(stream):
        runtime.log("WARNING", "a line")
        monkeypatch.setenv("AWS_LAMBDA_LOG_LEVEL", "WARN")  # JSON logs: Lambda filters
        for level in ("INFO", "WARNING", "ERROR"):
            runtime.log(level, "a line")
    levels = [json.loads(line)["level"] for line in stream.getvalue().splitlines()]
    assert levels == ["WARNING", "WARN", "ERROR"]


@pytest.mark.parametrize("level", list(runtime.LogLevel))
def test_under_json_our_handlers_powertools_and_lambda_keep_the_same_lines(
    monkeypatch: pytest.MonkeyPatch, level: runtime.LogLevel
) -> None:
    """A function at `level` with JSON logs: the platform sets LOG_LEVEL (our handlers') and
    ApplicationLogLevel (Lambda's filter, and AWS_LAMBDA_LOG_LEVEL, which Powertools' Logger
    takes first: its constructor's level and POWERTOOLS_LOG_LEVEL lose to it)."""
    from aws_lambda_powertools import Logger

    from exactly_once.components.platform import APPLICATION_LOG_LEVEL

    lambdas = APPLICATION_LOG_LEVEL[level]
    monkeypatch.setenv("LOG_LEVEL", str(level))
    monkeypatch.setenv("AWS_LAMBDA_LOG_LEVEL", lambdas)
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "DEBUG")  # a user's, lower: Lambda's wins
    names = {"DEBUG": 10, "INFO": 20, "WARN": 30, "ERROR": 40}
    stream, ours = io.StringIO(), io.StringIO()
    # (Powertools warns that its own level, lower, will be dropped by Lambda's)
    warned = pytest.warns(UserWarning) if lambdas != "DEBUG" else contextlib.nullcontext()
    with warned:
        logger = Logger(service=f"agree-{level}", logger_handler=logging.StreamHandler(stream))
    with redirect_stdout(ours):
        for name in ("DEBUG", "INFO", "WARNING", "ERROR"):
            getattr(logger, name.lower())("a line")
            runtime.log(name, "a line")
    theirs = [json.loads(line)["level"] for line in stream.getvalue().splitlines()]
    mine = [json.loads(line)["level"] for line in ours.getvalue().splitlines()]
    # the same lines, each one Lambda's filter keeps (ours in Lambda's names)
    assert [name.replace("WARNING", "WARN") for name in theirs] == mine
    assert all(names[name] >= names[lambdas] for name in mine), mine


@pytest.mark.parametrize(
    ("explicit", "powertools", "legacy", "effective"),
    [
        (None, None, "ERROR", logging.ERROR),  # LOG_LEVEL, when nothing else is set
        (None, "DEBUG", "ERROR", logging.DEBUG),  # POWERTOOLS_LOG_LEVEL before LOG_LEVEL
        ("WARNING", "DEBUG", "ERROR", logging.WARNING),  # the constructor's before both
    ],
)
def test_under_text_powertools_takes_its_constructor_then_its_variable_then_log_level(
    monkeypatch: pytest.MonkeyPatch,
    explicit: str | None,
    powertools: str | None,
    legacy: str,
    effective: int,
) -> None:
    """Text logs: no AWS_LAMBDA_LOG_LEVEL; the order docs/platform.md gives, as the
    installed Powertools has it."""
    from aws_lambda_powertools import Logger

    monkeypatch.delenv("AWS_LAMBDA_LOG_LEVEL", raising=False)
    monkeypatch.setenv("LOG_LEVEL", legacy)
    if powertools:
        monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", powertools)
    else:
        monkeypatch.delenv("POWERTOOLS_LOG_LEVEL", raising=False)
    logger = Logger(service=f"text-{explicit}-{powertools}", level=explicit)
    assert logger.log_level == effective
