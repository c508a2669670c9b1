"""The scheduler's REST API (Lambda proxy integration).

    POST   /messages        {publishTime, channel, parameters}  -> 201 {id, status}
                            (Idempotency-Key header: a retry returns the same message, 200)
    POST   /messages/batch  {entries: [{id, idempotencyKey, publishTime, channel,
                            parameters}], 1 to 100}  -> 200 {successful: [{id, created,
                            message (without its parameters)}], failed: [{id, code,
                            message, senderFault}]}, as SQS's batch calls answer: each
                            entry on its own, by its own key
    GET    /messages/{id}   -> 200 the message | 404
    DELETE /messages/{id}   -> 200 cancelled | 404 | 409 already firing or done
Bad input -> 400 {"message": <why>}; nothing is stored. A publish time is judged against
when API Gateway received the request: up to the scheduler's late tolerance in the past
is accepted and fired at once (`lateOnArrival` in the message).
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from exactly_once.handlers import metrics, scheduler
from exactly_once.handlers.errors import BadEvent, ClientError, Conflict, NotFound, aws_code
from exactly_once.handlers.runtime import lambda_handler, log


def respond(status: int, body: Any) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json"},
        "body": json.dumps(body, default=str),
    }


def public(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != "fingerprint"}


def received_at(event: dict[str, Any]) -> float | None:
    """When API Gateway received the request (the proxy event's `requestTimeEpoch`, in
    milliseconds), or None outside API Gateway."""
    epoch = (event.get("requestContext") or {}).get("requestTimeEpoch")
    if isinstance(epoch, int | float) and not isinstance(epoch, bool) and epoch > 0:
        return epoch / 1000
    return None


PATTERN = scheduler.PATTERN  # one pattern: the API, the sweep and the stream starter
BATCH = "/messages/batch"
MAX_ENTRIES = 100  # as SQS's batch calls take 10, and API Gateway's 10 MB body allows
ENTRY_ID = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
PARALLEL = 10  # entries registered at once (each one PutItem, and a start if due soon)
# The largest batch body taken. Lambda takes at most 6 MB (6,291,456 bytes) in a
# synchronous invoke (Lambda API reference, Invoke), and API Gateway's proxy event carries
# the body as a JSON string, in which each quote and backslash of the body becomes two
# bytes, beside the request's headers (twice: headers and multiValueHeaders, under 64 KB
# with API Gateway's 10 KB of headers): a body of half what is left always arrives. Over
# it, a 400 with the reason; one too large to reach the function at all (API Gateway takes
# 10 MB) is API Gateway's 5xx. Nothing is stored either way.
MAX_BATCH_BYTES = (6 * 1024 * 1024 - 64 * 1024) // 2  # 3,112,960


def _body(event: dict[str, Any]) -> Any:
    try:
        return json.loads(event.get("body") or "")
    except json.JSONDecodeError as exc:
        raise BadEvent(f"the body is not JSON: {exc.msg}") from None


def register_batch(
    config: scheduler.SchedulerSettings, body: Any, received: float | None, context: Any
) -> dict[str, Any]:
    """Register up to 100 messages, each by its own Idempotency-Key, each answered on its
    own: a retried batch, or a key twice in one batch, returns the message the key first
    registered (created: false), never a second one. A malformed batch is a 400 with
    nothing stored; a bad entry fails alone (senderFault: true); an AWS error an entry
    met fails it with senderFault: false, for the caller to retry that entry."""
    entries = body.get("entries") if isinstance(body, dict) else None
    if isinstance(body, dict) and set(body) - {"entries"}:
        unknown = ", ".join(sorted(set(body) - {"entries"}))
        raise BadEvent(f'unknown fields {unknown}: a batch is {{"entries": [...]}} only')
    if not isinstance(entries, list) or not 1 <= len(entries) <= MAX_ENTRIES:
        raise BadEvent(f'the body must be {{"entries": [...]}} with 1 to {MAX_ENTRIES} entries')
    ids = [entry.get("id") if isinstance(entry, dict) else None for entry in entries]
    bad = [i for i in ids if not isinstance(i, str) or not ENTRY_ID.match(i)]
    if bad:
        raise BadEvent(f"every entry needs an id of 1 to 80 letters, digits, - or _: {bad[:3]}")
    if len(set(ids)) != len(ids):
        raise BadEvent("entry ids must be distinct within a batch")
    keys = [entry.get("idempotencyKey") for entry in entries]
    if not all(isinstance(key, str) and key for key in keys):
        raise BadEvent("every entry needs its own idempotencyKey (a retried batch is safe)")

    def one(entry: dict[str, Any]) -> dict[str, Any]:
        fields = {k: v for k, v in entry.items() if k not in ("id", "idempotencyKey")}
        try:
            message, created = scheduler.register(
                config, fields, entry["idempotencyKey"], context=context, received=received
            )
        except BadEvent as exc:
            return _failed(entry["id"], "InvalidMessage", str(exc), sender=True)
        except Conflict as exc:
            return _failed(entry["id"], "IdempotencyKeyConflict", str(exc), sender=True)
        except ClientError as exc:
            return _failed(entry["id"], aws_code(exc), "retry this entry", sender=False)
        # The message without its parameters: the caller sent them, and echoing a batch's
        # parameters back made its answer as large as the request.
        brief = {k: v for k, v in public(message).items() if k != "parameters"}
        return {"id": entry["id"], "created": created, "message": brief}

    # Entries sharing a key go in batch order (the first one's content is the message, a
    # later different one a conflict); different keys go side by side.
    by_key: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        by_key.setdefault(key, []).append(index)
    answers: list[dict[str, Any]] = [{} for _ in entries]

    def in_order(indexes: list[int]) -> None:
        for index in indexes:
            answers[index] = one(entries[index])

    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(in_order, by_key.values()))
    successful = [a for a in answers if "code" not in a]
    failed = [a for a in answers if "code" in a]
    created = sum(1 for a in successful if a["created"])
    scheduler.warm_dense(config, [a["message"] for a in successful if a["created"]], context)
    log("INFO", "batch registered", entries=len(entries), created=created, failed=len(failed))
    metrics.emit(
        PATTERN,
        Registered=created,
        DuplicateSuppressed=len(successful) - created,
        Rejected=sum(1 for f in failed if f["senderFault"]),
    )
    return {"successful": successful, "failed": failed}


def _failed(entry_id: str, code: str, message: str, sender: bool) -> dict[str, Any]:
    return {"id": entry_id, "code": code, "message": message, "senderFault": sender}


@lambda_handler
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return serve(event, scheduler.SchedulerSettings.current(), context)


def serve(
    event: dict[str, Any], config: scheduler.SchedulerSettings, context: Any = None
) -> dict[str, Any]:
    method = event.get("httpMethod", "")
    message_id = (event.get("pathParameters") or {}).get("id")
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    try:
        if method == "POST" and str(event.get("resource", "")).endswith(BATCH):
            size = len((event.get("body") or "").encode())
            if size > MAX_BATCH_BYTES:
                raise BadEvent(
                    f"the batch is {size} bytes, over {MAX_BATCH_BYTES}: send it as smaller "
                    "batches (Lambda takes at most 6 MB, the body escaped inside it)"
                )
            return respond(200, register_batch(config, _body(event), received_at(event), context))
        if method == "POST" and not message_id:
            registered, created = scheduler.register(
                config,
                _body(event),
                headers.get("idempotency-key"),
                context=context,
                received=received_at(event),
            )
            log(
                "INFO",
                "registered" if created else "registration replayed",
                id=registered["id"],
                status=registered["status"],
            )
            metrics.emit(PATTERN, **{"Registered" if created else "DuplicateSuppressed": 1})
            if created:
                scheduler.warm_dense(config, [registered], context)
            return respond(201 if created else 200, public(registered))
        if method == "GET" and message_id:
            found = scheduler.get(config, message_id)
            return (
                respond(200, public(found))
                if found
                else respond(404, {"message": "no such message"})
            )
        if method == "DELETE" and message_id:
            cancelled = scheduler.cancel(config, message_id)
            metrics.emit(PATTERN, Cancelled=1)
            return respond(200, public(cancelled))
        return respond(405, {"message": f"{method} is not supported here"})
    except Conflict as exc:
        metrics.emit(PATTERN, Rejected=1)
        return respond(409, {"message": str(exc)})
    except BadEvent as exc:
        metrics.emit(PATTERN, Rejected=1)
        return respond(400, {"message": str(exc)})
    except NotFound:
        return respond(404, {"message": "no such message"})
