"""Run each Lambda execution environment as a long-lived host Python process.

LocalStack only ships a Docker executor; our machines have no Docker engine. This
executor keeps LocalStack's own lifecycle (one environment per concurrent invoke,
environment variables, credentials, async retries, DLQs) and swaps only the
sandbox: a `worker.py` process per environment, run with the interpreter named by
LAMBDA_HOST_PYTHON, talking JSON lines over pipes.

What it honours, as Lambda does: the function timeout (the process is killed and
the invoke fails with "Task timed out"), environment variables, a context object
with get_remaining_time_in_millis, init errors, and crashes (a process that dies
mid-invoke fails that invoke and the next invoke gets a fresh process).
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from localstack.runtime import hooks
from localstack.services.lambda_.invocation.lambda_models import (
    FunctionVersion,
    InvocationResult,
)
from localstack.services.lambda_.invocation.runtime_executor import (
    LambdaRuntimeException,
    RuntimeExecutor,
)

from localstack import config

LOG = logging.getLogger(__name__)

WORKER = Path(__file__).with_name("worker.py")
STARTUP_TIMEOUT_S = 30
# Host variables a handler process needs; everything else comes from LocalStack.
PASSTHROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")


def host_python() -> str:
    python = os.environ.get("LAMBDA_HOST_PYTHON") or shutil.which("python3") or ""
    if not python or not os.access(python, os.X_OK):
        raise LambdaRuntimeException(
            f"LAMBDA_HOST_PYTHON={python!r} is not an executable Python interpreter"
        )
    return python


class HostRuntimeExecutor(RuntimeExecutor):
    def __init__(self, id: str, function_version: FunctionVersion) -> None:
        super().__init__(id=id, function_version=function_version)
        self._env: dict[str, str] = {}
        self._proc: subprocess.Popen[str] | None = None
        self._replies: queue.Queue[dict | None] = queue.Queue()
        self._logs: collections.deque[str] = collections.deque(maxlen=2000)
        self._lock = threading.Lock()
        self.client_context: str | None = None  # this invoke's (pass_client_context)

    # -- lifecycle -------------------------------------------------------------
    def start(self, env_vars: dict[str, str]) -> None:
        self._env = {key: str(value) for key, value in env_vars.items()}
        self._spawn()

    def stop(self) -> None:
        self._kill()

    def _code_dir(self) -> str:
        return str(self.function_version.config.code.get_unzipped_code_location())

    def _spawn(self) -> None:
        code_dir = self._code_dir()
        env = {key: os.environ[key] for key in PASSTHROUGH if key in os.environ}
        env.update(self._env)
        env.update(
            LAMBDA_TASK_ROOT=code_dir,
            PYTHONPATH=code_dir,
            PYTHONUNBUFFERED="1",
            PYTHONDONTWRITEBYTECODE="1",
            _HOST_EXECUTOR_ARN=self.function_version.qualified_arn,
        )
        self._replies = queue.Queue()
        self._proc = subprocess.Popen(
            [host_python(), "-u", str(WORKER)],
            cwd=code_dir,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # so a timeout kills the handler's children too
        )
        threading.Thread(target=self._read_replies, args=(self._proc,), daemon=True).start()
        threading.Thread(target=self._read_logs, args=(self._proc,), daemon=True).start()
        try:
            ready = self._replies.get(timeout=STARTUP_TIMEOUT_S)
        except queue.Empty:
            ready = None
        if not ready or "ready" not in ready:
            self._kill()
            raise LambdaRuntimeException(
                f"host worker for {self.function_version.qualified_arn} did not start:\n"
                + "\n".join(list(self._logs)[-20:])
            )

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)

    def _read_replies(self, proc: subprocess.Popen[str]) -> None:
        for line in proc.stdout:
            try:
                self._replies.put(json.loads(line))
            except json.JSONDecodeError:
                self._logs.append(line.rstrip("\n"))
        self._replies.put(None)  # EOF: the process died

    def _read_logs(self, proc: subprocess.Popen[str]) -> None:
        for line in proc.stderr:
            self._logs.append(line.rstrip("\n"))

    # -- invocation ------------------------------------------------------------
    def invoke(self, payload: dict[str, str]) -> InvocationResult:
        request_id = payload["invoke-id"]
        timeout_s = float(self.function_version.config.timeout)
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._spawn()  # a fresh sandbox after a timeout or crash
            message = {
                "request_id": request_id,
                "invoked_arn": payload["invoked-function-arn"],
                "payload": payload["payload"],
                "deadline_ms": int((time.time() + timeout_s) * 1000),
                "trace_id": payload.get("trace-id", ""),
                "client_context": self.client_context,
            }
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
            try:
                reply = self._replies.get(timeout=timeout_s + 0.5)
            except queue.Empty:
                self._kill()
                return self._error(
                    request_id,
                    "Sandbox.Timedout",
                    f"{request_id} Task timed out after {timeout_s:.2f} seconds",
                )
            if reply is None:
                self._kill()
                return self._error(
                    request_id,
                    "Runtime.ExitError",
                    f"RequestId: {request_id} Error: Runtime exited without providing a reason",
                )
        return InvocationResult(
            request_id=request_id,
            payload=reply["payload"].encode(),
            is_error=reply["is_error"],
            logs=reply.get("logs", ""),
        )

    def _error(self, request_id: str, error_type: str, message: str) -> InvocationResult:
        body = {"errorType": error_type, "errorMessage": message}
        logs = "\n".join(list(self._logs)[-50:])
        return InvocationResult(request_id, json.dumps(body).encode(), is_error=True, logs=logs)

    # -- addressing: everything is on this host --------------------------------
    def get_address(self) -> str:
        return "127.0.0.1"

    def get_endpoint_from_executor(self) -> str:
        return "127.0.0.1"

    def get_runtime_endpoint(self) -> str:
        port = config.GATEWAY_LISTEN[0].port
        return f"http://127.0.0.1:{port}/_localstack_lambda/{self.id}"

    def get_logs(self) -> str:
        return "\n".join(self._logs)

    # -- versions --------------------------------------------------------------
    @classmethod
    def prepare_version(cls, function_version: FunctionVersion) -> None:
        runtime = function_version.config.runtime or ""
        if not runtime.startswith("python"):
            raise LambdaRuntimeException(
                f"the host executor runs Python runtimes only, not {runtime!r}"
            )
        if function_version.config.code:
            function_version.config.code.prepare_for_execution()

    @classmethod
    def cleanup_version(cls, function_version: FunctionVersion) -> None:
        pass

    @classmethod
    def validate_environment(cls) -> bool:
        try:
            host_python()
        except LambdaRuntimeException as exc:
            LOG.warning("%s", exc)
            return False
        return True


@hooks.on_infra_start()
def pass_client_context() -> None:
    """Invoke's ClientContext reaches the handler's `context.client_context`, as in AWS
    (LocalStack 2026.3 keeps it on the invocation but leaves it out of what it hands an
    executor)."""
    from localstack.services.lambda_.invocation.execution_environment import (
        ExecutionEnvironment,
    )

    original = ExecutionEnvironment.invoke
    if getattr(original, "passes_client_context", False):
        return

    def invoke(self: Any, invocation: Any) -> InvocationResult:
        runtime = self.runtime_executor
        if isinstance(runtime, HostRuntimeExecutor):
            runtime.client_context = invocation.client_context
        return original(self, invocation)

    invoke.passes_client_context = True  # type: ignore[attr-defined]
    ExecutionEnvironment.invoke = invoke
