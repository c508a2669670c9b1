"""Lambda durable functions on LocalStack, whose community Lambda accepts DurableConfig and
DurableExecutionName and ignores both.

The durable-execution service itself is AWS's local runner (`dex-local-runner`, from
aws-durable-execution-sdk-python-testing), started beside LocalStack by `localstack/up`
at EXACTLY_ONCE_DEX_ENDPOINT. This request handler makes LocalStack's Lambda API behave as
AWS's does for durable functions and hands the runner what is its:

- CreateFunction with DurableConfig marks the function durable (GetFunctionConfiguration
  then shows it, as on AWS); DeleteFunction forgets it.
- An Invoke of a durable function is a start: DurableExecutionName is the idempotency key
  AWS documents (Lambda developer guide, durable functions, "Idempotency"): a name never
  used, or past its execution's retention, starts an execution; the same name and the same
  payload while it runs answers with that execution; otherwise
  DurableExecutionAlreadyStartedException (409). No name: a fresh one. The runner does not
  deduplicate starts itself, so the names live here, checked and started under one lock.
- The runner's own Invoke of the handler (header X-Dex-Handler-Invoke) runs it as any
  invoke, through the host executor.
- The durable-execution APIs the SDK and callers use (checkpoint, state, get, history,
  list by function, stop, callbacks) are forwarded to the runner as they came.

IAM (iam.py) checks these calls first; an execution's permissions are evaluated against
the ARN AWS would give it (`function:NAME:VERSION/durable-execution/NAME/ID`), recorded
here for each of the runner's opaque execution ARNs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any

from localstack.runtime import hooks

from host_executor import iam_policy
from host_executor.faults import request_body

LOG = logging.getLogger("localstack.exactly_once.durable")
ENDPOINT = "EXACTLY_ONCE_DEX_ENDPOINT"
MARKER = "X-Dex-Handler-Invoke"  # the runner's Invoke of the handler (its invoker.py)
FORWARDED = frozenset(
    {
        "CheckpointDurableExecution",
        "GetDurableExecutionState",
        "GetDurableExecution",
        "GetDurableExecutionHistory",
        "ListDurableExecutionsByFunction",
        "StopDurableExecution",
        "SendDurableExecutionCallbackSuccess",
        "SendDurableExecutionCallbackFailure",
        "SendDurableExecutionCallbackHeartbeat",
    }
)
CLOSED = frozenset({"SUCCEEDED", "FAILED", "TIMED_OUT", "STOPPED"})
DAY_S = 24 * 3600


@dataclasses.dataclass
class Started:
    runner_arn: str
    payload_digest: str
    retention_days: int


class Registry:
    """Durable functions (unqualified ARN -> DurableConfig), names per function, and the
    AWS-shaped ARN of each of the runner's executions."""

    def __init__(self) -> None:
        self.functions: dict[str, dict[str, Any]] = {}
        self.names: dict[tuple[str, str], Started] = {}
        self.aws_arns: dict[str, str] = {}
        self.lock = threading.Lock()

    def aws_arn(self, runner_arn: str) -> str:
        return self.aws_arns.get(runner_arn, runner_arn)


REGISTRY = Registry()


def _endpoint() -> str:
    return os.environ.get(ENDPOINT, "").rstrip("/")


def _runner(method: str, path: str, body: bytes | None = None) -> tuple[int, bytes, str]:
    request = urllib.request.Request(
        _endpoint() + path,
        data=body,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read(), answer.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        return error.code, error.read(), error.headers.get("Content-Type", "")


def _unqualified(arn: str) -> str:
    return ":".join(arn.split(":")[:7])


def _version(qualified: str) -> str:
    """The version a qualified ARN runs: a version or $LATEST as given, an alias resolved
    (execution ARNs always carry a version, never an alias)."""
    parts = qualified.split(":")
    qualifier = parts[7] if len(parts) == 8 else "$LATEST"
    if qualifier == "$LATEST" or qualifier.isdigit():
        return qualifier
    from localstack.services.lambda_.invocation.models import lambda_stores

    function = lambda_stores[parts[4]][parts[3]].functions[parts[6]]
    return str(function.aliases[qualifier].function_version)


def _already_started(name: str) -> Exception:
    from localstack.aws.api import CommonServiceException

    return CommonServiceException(
        "DurableExecutionAlreadyStartedException",
        f"Durable execution with name {name} already exists",
        status_code=409,
        sender_fault=True,
    )


def _execution(runner_arn: str) -> dict[str, Any] | None:
    """The runner's GetDurableExecution answer, None if it knows no such execution."""
    quoted = urllib.parse.quote(runner_arn, "")
    status, body, _ = _runner("GET", f"/2025-12-01/durable-executions/{quoted}")
    return None if status == 404 else dict(json.loads(body or b"{}"))


def _seconds(timestamp: Any) -> float:
    if isinstance(timestamp, int | float):
        return float(timestamp) / (1000 if timestamp > 1e11 else 1)
    from datetime import datetime

    return datetime.fromisoformat(str(timestamp).replace("Z", "+00:00")).timestamp()


def _taken(execution: dict[str, Any] | None, retention_days: int) -> bool:
    """Whether a name's execution still holds it: running, or ended within its retention."""
    if execution is None:
        return False
    ended = execution.get("EndTimestamp")
    if execution.get("Status") not in CLOSED or ended is None:
        return True
    return time.time() < _seconds(ended) + retention_days * DAY_S


def start(context: Any, request: dict[str, Any], qualified: str) -> tuple[str, str]:
    """Start (or find, for the same name and payload) the execution an Invoke of the
    function `qualified` asks for: (the runner's execution ARN, the version run)."""
    config = REGISTRY.functions[_unqualified(qualified)]
    payload = request_body(context)
    name = request.get("DurableExecutionName") or str(uuid.uuid4())
    digest = hashlib.sha256(payload).hexdigest()
    version = _version(qualified)
    key = (_unqualified(qualified), name)
    with REGISTRY.lock:
        started = REGISTRY.names.get(key)
        execution = _execution(started.runner_arn) if started else None
        if started is not None and _taken(execution, started.retention_days):
            assert execution is not None
            if execution.get("Status") == "RUNNING" and started.payload_digest == digest:
                return started.runner_arn, version  # AWS: an idempotent start
            raise _already_started(name)
        body = {
            "AccountId": context.account_id,
            "FunctionName": qualified.split(":")[6],
            "FunctionQualifier": version,
            "ExecutionName": name,
            "ExecutionTimeoutSeconds": int(config.get("ExecutionTimeout") or 900),
            "ExecutionRetentionPeriodDays": int(config.get("RetentionPeriodInDays") or 14),
            "Input": payload.decode() if payload else None,
        }
        status, answer, _ = _runner("POST", "/start-durable-execution", json.dumps(body).encode())
        if status >= 300:
            raise RuntimeError(f"the durable-execution runner refused a start: {answer[:500]!r}")
        runner_arn = json.loads(answer)["ExecutionArn"]
        retention = body["ExecutionRetentionPeriodDays"]
        REGISTRY.names[key] = Started(runner_arn, digest, retention)
        execution_id = runner_arn.rsplit("/", 1)[-1]
        REGISTRY.aws_arns[runner_arn] = (
            f"{_unqualified(qualified)}:{version}/durable-execution/{name}/{execution_id}"
        )
    LOG.info("durable execution %s started: %s", name, runner_arn)
    return runner_arn, version


def forward(chain: Any, context: Any) -> None:
    """Send a durable-execution API call to the runner and answer with its reply."""
    from rolo.request import get_raw_path

    path = get_raw_path(context.request)
    if context.operation.name == "ListDurableExecutionsByFunction":
        # AWS takes a name or an ARN; the runner knows its executions by bare name.
        function = str(context.service_request["FunctionName"]).split(":function:")[-1]
        path = f"/2025-12-01/functions/{urllib.parse.quote(function.split(':')[0], '')}"
        path += "/durable-executions"
    query = context.request.query_string.decode()
    status, body, content_type = _runner(
        context.request.method,
        path + (f"?{query}" if query else ""),
        context.request.get_data() or None,
    )
    chain.respond(status, body, {"Content-Type": content_type or "application/json"})


def _add_config(response: Any, function_arn: str) -> None:
    config = REGISTRY.functions.get(_unqualified(function_arn))
    if config is None or not response.data:
        return
    document = json.loads(response.data)
    target = document.get("Configuration", document)  # GetFunction nests it
    target["DurableConfig"] = config
    response.set_json(document)


def serve_durable(chain: Any, context: Any, response: Any) -> None:
    if not _endpoint() or context.service is None or context.operation is None:
        return
    if context.service.service_name != "lambda":
        return
    operation, request = context.operation.name, context.service_request or {}
    if operation == "CreateFunction" and request.get("DurableConfig"):
        arn = iam_policy.function_arn(
            request["FunctionName"], None, context.region, context.account_id
        )
        REGISTRY.functions[arn] = dict(request["DurableConfig"])
    elif operation == "DeleteFunction" and not request.get("Qualifier"):
        arn = iam_policy.function_arn(
            request["FunctionName"], None, context.region, context.account_id
        )
        REGISTRY.functions.pop(_unqualified(arn), None)
    elif operation in FORWARDED:
        forward(chain, context)
    elif operation == "Invoke" and not context.request.headers.get(MARKER):
        qualified = iam_policy.function_arn(
            request["FunctionName"], request.get("Qualifier"), context.region, context.account_id
        )
        if _unqualified(qualified) not in REGISTRY.functions:
            return
        runner_arn, version = start(context, request, qualified)
        headers = {"X-Amz-Durable-Execution-Arn": runner_arn, "X-Amz-Executed-Version": version}
        if request.get("InvocationType") == "Event":
            chain.respond(202, b"", headers)
            return
        chain.respond(200, json.dumps(_wait(runner_arn)).encode(), headers)


def _wait(runner_arn: str, timeout_s: float = 900) -> Any:
    """A synchronous start's answer: the execution's result once it ends."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        execution = _execution(runner_arn) or {}
        if execution.get("Status") in CLOSED:
            result = execution.get("Result")
            return json.loads(result) if result else execution.get("Error")
        time.sleep(0.2)
    return {"errorType": "TimedOut", "errorMessage": "the durable execution did not end"}


def show_durable_config(chain: Any, context: Any, response: Any) -> None:
    """GetFunctionConfiguration and GetFunction show a durable function's DurableConfig."""
    if not _endpoint() or context.service is None or context.operation is None:
        return
    if context.service.service_name != "lambda" or response.status_code != 200:
        return
    if context.operation.name in ("GetFunctionConfiguration", "GetFunction", "CreateFunction"):
        request = context.service_request or {}
        arn = iam_policy.function_arn(
            request.get("FunctionName", ""), None, context.region, context.account_id
        )
        _add_config(response, arn)


@hooks.on_infra_start()
def register_durable_functions() -> None:
    if not _endpoint():
        return
    from localstack.aws import handlers

    if serve_durable not in handlers.serve_custom_service_request_handlers.handlers:
        handlers.serve_custom_service_request_handlers.append(serve_durable)
        handlers.run_custom_response_handlers.append(show_durable_config)
        iam_policy.durable_execution_arn = REGISTRY.aws_arn
        LOG.info("durable functions: the runner at %s", _endpoint())
