"""What every handler shares: lazy boto3 clients, structured JSON logs, the DLQ."""

from __future__ import annotations

import enum
import functools
import json
import os
import sys
import time
import traceback
from typing import Any, Literal

from exactly_once.handlers import timestamps


class LogLevel(enum.StrEnum):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"


LogLevelName = Literal["DEBUG", "INFO", "WARNING", "ERROR"]  # its values (components/config.py)

# LOG_LEVEL as Python's logging (and so Powertools) reads it, and as Lambda's advanced
# logging controls spell levels (WARN, FATAL): CRITICAL or FATAL silences our lines, where
# an unknown name would be taken for INFO
_LEVELS: dict[str, int] = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "WARN": 30, "ERROR": 40}
_LEVELS |= {"CRITICAL": 50, "FATAL": 50}
# A line's level as Lambda names it, where Lambda filters lines by level (JSON logs: it sets
# AWS_LAMBDA_LOG_LEVEL to the function's ApplicationLogLevel). Its log-level filtering lists
# TRACE, DEBUG, INFO, WARN, ERROR and FATAL, and reads a line whose "level" is any other as
# INFO (Lambda developer guide, "Log-level filtering"): Python's WARNING would be dropped by
# a filter at WARN. Elsewhere lines keep Python's names, as Powertools' Logger writes them.
_LAMBDA_NAMES = {"WARNING": "WARN", "CRITICAL": "FATAL"}


@functools.cache
def client(service: str) -> Any:
    """One boto3 client per service per process, created on first use (cold start stays small).

    boto3 honours AWS_ENDPOINT_URL, which LocalStack sets for every function.
    """
    import boto3
    from botocore.config import Config

    # Three retries (four sends: botocore's max_attempts counts retries): every call made
    # through these clients is safe to send again (conditional writes, named starts, reads);
    # a throttle past them surfaces, so the event is redelivered. Pooled connections for the
    # sweep's lanes, each on its own thread (botocore keeps 10).
    # Service names are dynamic here; boto3-stubs type clients per literal name.
    config = Config(retries={"max_attempts": 3, "mode": "standard"}, max_pool_connections=20)
    return boto3.client(service, config=config)  # type: ignore[call-overload]


# Logs a Powertools for AWS Lambda user reads without learning: every line has its
# Logger's keys (level, location, message, timestamp, service, cold_start, function_name,
# function_memory_size, function_arn, function_request_id, xray_trace_id, and
# correlation_id once set; a key without a value left out, as Powertools does), the
# timestamp in ISO 8601 to the millisecond (Powertools' default is "2026-12-05
# 23:49:28,624+0000": a query on @timestamp reads both alike). The keys, not
# the library: importing Powertools' Logger and Metrics took 32-64 ms of a cold start
# here, and 1 MB of every function's zip, against 1-4 ms for this module and metrics.py.
_INVOCATION: dict[str, Any] = {}  # this sandbox's invocation (Lambda runs one at a time)
_COLD = [True]


def lambda_handler(handler: Any) -> Any:
    """A Lambda entry point's decorator: its invocation's fields on every log line."""

    @functools.wraps(handler)
    def invoked(event: Any, context: Any) -> Any:
        invocation(context)
        return handler(event, context)

    return invoked


def invocation(context: Any) -> None:
    """An invocation begins: what every line of its logs says about it."""
    _INVOCATION.clear()
    _INVOCATION.update(
        cold_start=_COLD[0],
        function_name=getattr(context, "function_name", None)
        or os.environ.get("AWS_LAMBDA_FUNCTION_NAME"),
        function_memory_size=getattr(context, "memory_limit_in_mb", None),
        function_arn=getattr(context, "invoked_function_arn", None),
        function_request_id=getattr(context, "aws_request_id", None),
    )
    _COLD[0] = False


def correlate(correlation_id: str | None) -> None:
    """The business key (a key, a message id) the invocation's lines are about."""
    _INVOCATION["correlation_id"] = correlation_id


def log(level: str, message: str, **fields: Any) -> None:
    """One JSON object per line, as CloudWatch Logs Insights and Powertools read them; with
    `exc=` an exception, two of the keys Powertools' `logger.exception` writes
    (`exception_name`, and `exception`: the formatted traceback; not its structured
    `stack_trace`), so a query for Powertools' errors finds ours."""
    exc = fields.pop("exc", None)
    threshold = _LEVELS.get(os.environ.get("LOG_LEVEL", "INFO").upper(), 20)
    if _LEVELS.get(level, 20) < threshold:
        return
    caller = sys._getframe(1)
    now = time.time()
    trace = os.environ.get("_X_AMZN_TRACE_ID", "")
    if os.environ.get("AWS_LAMBDA_LOG_LEVEL"):
        level = _LAMBDA_NAMES.get(level, level)
    record = {
        "level": level,
        "location": f"{caller.f_code.co_name}:{caller.f_lineno}",
        "message": message,
        "timestamp": timestamps.iso_ms(now),
        "service": os.environ.get("POWERTOOLS_SERVICE_NAME")
        or os.environ.get("METRICS_COMPONENT")
        or "exactly-once",
        # (in Powertools' order: the invocation's values fill these places; one left
        # None, outside an invocation, is dropped below)
        "cold_start": None,
        "function_name": os.environ.get("AWS_LAMBDA_FUNCTION_NAME"),
        "function_memory_size": None,
        "function_arn": None,
        "function_request_id": None,
        **_INVOCATION,
        "xray_trace_id": trace.split(";")[0].replace("Root=", "") or None,
        **fields,
    }
    if isinstance(exc, BaseException):
        record["exception_name"] = type(exc).__name__
        # (as logging.Formatter.formatException: one trailing newline dropped)
        record["exception"] = "".join(traceback.format_exception(exc)).removesuffix("\n")
    # as Powertools does, a key without a value is left out (no trace id without tracing)
    record = {k: v for k, v in record.items() if v is not None}
    sys.stdout.write(json.dumps(record, default=str) + "\n")
    sys.stdout.flush()


REDRIVE = "exactlyOnceRedrive"  # the ClientContext key `ops redrive-dlq` invokes with


def redriven(context: Any) -> bool:
    """Whether this invocation is `ops redrive-dlq` sending a dead letter back: the tool
    then keeps the message, with every reason, should it fail again."""
    client_context = getattr(context, "client_context", None)
    custom = getattr(client_context, "custom", None) or {}
    return bool(isinstance(custom, dict) and custom.get(REDRIVE))


def dead_letter(
    event: Any,
    reason: str,
    *,
    queue_url: str | None = None,
    context: Any = None,
    **fields: Any,
) -> None:
    """Park an event that can never succeed in a DLQ (`queue_url`, else env DLQ_URL), with
    the reason; unless it is being redriven from there (its message is still there)."""
    if redriven(context):
        log("ERROR", "redriven event rejected again", reason=reason, **fields)
        return
    body = json.dumps({"reason": reason, "event": event, **fields}, default=str)
    client("sqs").send_message(QueueUrl=queue_url or os.environ["DLQ_URL"], MessageBody=body)
    log("ERROR", "event sent to the DLQ", reason=reason, **fields)


def request_id(context: Any) -> str:
    """This delivery's id: the Lambda request id (kept by Lambda's own retries), or a fresh
    one outside Lambda."""
    found = getattr(context, "aws_request_id", None)
    if found:
        return str(found)
    import uuid

    return str(uuid.uuid4())


def remaining_seconds(context: Any, default: float = 900.0) -> float:
    """The invocation's time left (Lambda's context), or `default` outside Lambda (its
    longest timeout)."""
    if context is None or not hasattr(context, "get_remaining_time_in_millis"):
        return default
    return float(context.get_remaining_time_in_millis()) / 1000
