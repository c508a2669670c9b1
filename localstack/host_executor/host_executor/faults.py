"""Fault injection for the e2e reliability suite: LocalStack answers chosen calls with an
AWS error (LocalStack's own chaos API is not in the community edition).

    POST   /_localstack/exactly-once/faults  {"operation": "stepfunctions.StartExecution",
               "error": "ThrottlingException", "times": 2, "contains": ["<tag>", "<arn>"]}
    GET    /_localstack/exactly-once/faults  -> {"rules": [...]} (what is still armed)
    DELETE /_localstack/exactly-once/faults  -> disarm everything
    DELETE /_localstack/exactly-once/faults?id=<id>  -> disarm one rule (POST answers its id;
               tests run side by side, each disarming its own)

A rule fails the next `times` requests to `operation` whose raw body contains every
string of `contains` (so a test only hits its own calls) with `error`, `message` and
`status` (default 400: AWS answers throttles as client errors). The request never reaches
the service, as with a real throttle. It is a request handler on LocalStack's gateway
chain, so it sees every call that crosses the gateway: from clients, Lambda handlers,
API Gateway integrations and Step Functions tasks alike.
"""

from __future__ import annotations

import io
import logging
import threading
import uuid
from typing import Any

from localstack.runtime import hooks

LOG = logging.getLogger("localstack.exactly_once.faults")  # LocalStack shows its own loggers
PATH = "/_localstack/exactly-once/faults"
DEFAULT_MESSAGES = {"ThrottlingException": "Rate exceeded"}

_rules: list[dict[str, Any]] = []
_lock = threading.Lock()


def _rule(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    operation, error = body.get("operation"), body.get("error")
    if not isinstance(operation, str) or operation.count(".") != 1:
        raise ValueError("operation is required, as service.Operation")
    if not isinstance(error, str) or not error:
        raise ValueError("error is required: the AWS error code to answer with")
    times = body.get("times", 1)
    if not isinstance(times, int) or isinstance(times, bool) or times < 1:
        raise ValueError("times must be a positive integer")
    contains = body.get("contains", [])
    contains = [contains] if isinstance(contains, str) else contains
    if not isinstance(contains, list) or not all(isinstance(c, str) for c in contains):
        raise ValueError("contains must be a string or a list of strings")
    return {
        "operation": operation,
        "error": error,
        "message": str(body.get("message") or DEFAULT_MESSAGES.get(error, error)),
        "status": int(body.get("status", 400)),
        "times": times,
        "contains": contains,
        "injected": 0,
        "id": uuid.uuid4().hex,
    }


def request_body(context: Any) -> bytes:
    """The request's body, left readable for the service. A Lambda Invoke that LocalStack
    makes itself (EventBridge's, S3's) carries its payload as a stream already parsed
    into the service request: read it there and put it back."""
    parsed = context.service_request
    payload = parsed.get("Payload") if isinstance(parsed, dict) else None
    if hasattr(payload, "read"):
        data: bytes = payload.read()
        parsed["Payload"] = io.BytesIO(data)
        return data
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    return bytes(context.request.get_data())


def _take(operation: str, context: Any) -> dict[str, Any] | None:
    """The armed rule this request trips, spending one of its `times`; None if none.
    The body is read only for an armed operation: reading a streamed body (an S3 upload)
    here would consume it before the service does."""
    body: bytes | None = None  # read once, and only for an armed operation
    with _lock:
        for rule in _rules:
            if rule["operation"] != operation:
                continue
            body = request_body(context) if body is None else body
            if all(text.encode() in body for text in rule["contains"]):
                rule["times"] -= 1
                rule["injected"] += 1
                if rule["times"] == 0:
                    _rules.remove(rule)
                return dict(rule)
    return None


def inject_faults(chain: Any, context: Any, response: Any) -> None:
    if not _rules or context.service is None or context.operation is None:
        return
    from localstack.aws.api import CommonServiceException

    operation = f"{context.service.service_name}.{context.operation.name}"
    rule = _take(operation, context)
    if rule is not None:
        LOG.info(
            "fault injected: %s %s (%d left): %.300r",
            operation,
            rule["error"],
            rule["times"],
            request_body(context),
        )
        raise CommonServiceException(
            rule["error"], rule["message"], status_code=rule["status"], sender_fault=True
        )


class FaultsResource:
    def on_get(self, request: Any) -> dict[str, Any]:
        with _lock:
            return {"rules": [dict(rule) for rule in _rules]}

    def on_post(self, request: Any) -> Any:
        from localstack.http import Response

        try:
            rule = _rule(request.get_json(force=True, silent=True))
        except ValueError as exc:
            return Response.for_json({"message": str(exc)}, status=400)
        with _lock:
            _rules.append(rule)
        return Response.for_json(rule, status=201)

    def on_delete(self, request: Any) -> dict[str, Any]:
        one = request.args.get("id")
        with _lock:
            kept = [rule for rule in _rules if one and rule["id"] != one]
            cleared = len(_rules) - len(kept)
            _rules[:] = kept
        return {"cleared": cleared}


@hooks.on_infra_start()
def register_fault_injection() -> None:
    from localstack.aws import handlers
    from localstack.http import Resource
    from localstack.services.internal import get_internal_apis

    from host_executor.durable import serve_durable

    chain = handlers.serve_custom_service_request_handlers.handlers
    if inject_faults not in chain:
        # Before the durable-functions handler, which answers some calls itself (durable.py
        # appends itself: whichever hook runs first, faults come first).
        chain.insert(
            chain.index(serve_durable) if serve_durable in chain else len(chain), inject_faults
        )
        get_internal_apis().add(Resource(PATH, FaultsResource()))
