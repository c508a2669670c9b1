"""One Lambda execution environment: imports the handler once, then serves invokes.

Started by executor.py with the project's interpreter. Protocol: one JSON line per
message on stdin / on the original stdout; handler prints go to stderr and are
also captured per invocation, like CloudWatch Logs.
"""

from __future__ import annotations

import base64
import importlib
import io
import json
import os
import sys
import time
import traceback
from typing import Any


class Tee(io.TextIOBase):
    """Writes to the real stream and to a per-invocation buffer."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buffer_ = io.StringIO()

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.stream.flush()
        return self.buffer_.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def take(self) -> str:
        text = self.buffer_.getvalue()
        self.buffer_ = io.StringIO()
        return text


class ClientContext:
    """Invoke's ClientContext (base64 JSON), as the Python runtime gives it: client, custom
    and env, or None when the caller sent none."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.client = document.get("client")
        self.custom = document.get("custom")
        self.env = document.get("env")

    @classmethod
    def decode(cls, text: str | None) -> ClientContext | None:
        if not text:
            return None
        try:
            return cls(json.loads(base64.b64decode(text)))
        except ValueError:
            return None


class Context:
    """The Lambda context object, with a real remaining-time clock."""

    def __init__(
        self, request_id: str, invoked_arn: str, deadline_ms: int, client_context: str | None
    ) -> None:
        self.aws_request_id = request_id
        self.invoked_function_arn = invoked_arn
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128")
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = ClientContext.decode(client_context)
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


def error_body(exc: BaseException, error_type: str | None = None) -> dict[str, Any]:
    return {
        "errorMessage": str(exc),
        "errorType": error_type or type(exc).__name__,
        "stackTrace": traceback.format_tb(exc.__traceback__.tb_next if exc.__traceback__ else None),
    }


def load_handler() -> tuple[Any, dict[str, Any] | None]:
    spec = os.environ.get("_HANDLER", "")
    module_name, _, function_name = spec.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # Lambda reports import failures on the first invoke
        return None, error_body(exc, "Runtime.ImportModuleError")
    handler = getattr(module, function_name, None)
    if handler is None:
        message = f"Handler '{function_name}' missing on module '{module_name}'"
        return None, {"errorMessage": message, "errorType": "Runtime.HandlerNotFound"}
    wrapper = os.environ.get("HOST_EXECUTOR_WRAPPER")
    if wrapper:  # a test stack's fault around the unchanged handler (lambda_wrappers.py)
        import lambda_wrappers  # beside this script, so first on sys.path

        return lambda_wrappers.wrap(handler, wrapper), None
    return handler, None


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray writes to fd 1 must not corrupt the protocol
    tee = Tee(sys.__stderr__)
    sys.stdout = sys.stderr = tee
    os.environ.setdefault("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001")

    handler, init_error = load_handler()
    protocol.write(json.dumps({"ready": True}) + "\n")

    for line in sys.stdin:
        request = json.loads(line)
        request_id = request["request_id"]
        os.environ["_X_AMZN_TRACE_ID"] = request.get("trace_id", "")
        print(f"START RequestId: {request_id} Version: $LATEST")
        started = time.monotonic()
        if init_error:
            body, is_error = init_error, True
        else:
            context = Context(
                request_id,
                request["invoked_arn"],
                request["deadline_ms"],
                request.get("client_context"),
            )
            try:
                event = json.loads(request["payload"]) if request["payload"] else {}
                body, is_error = handler(event, context), False
            except Exception as exc:
                body, is_error = error_body(exc), True
                print(json.dumps({**body, "requestId": request_id}))
        elapsed_ms = (time.monotonic() - started) * 1000
        print(f"END RequestId: {request_id}")
        print(f"REPORT RequestId: {request_id}\tDuration: {elapsed_ms:.2f} ms")
        try:
            payload = json.dumps(body)
        except (TypeError, ValueError) as exc:
            payload, is_error = json.dumps(error_body(exc, "Runtime.MarshalError")), True
        reply = {"payload": payload, "is_error": is_error, "logs": tee.take()}
        protocol.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
