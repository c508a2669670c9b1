"""The scheduler's REST API (Lambda proxy integration).

    POST   /messages        {publishTime, channel, parameters}  -> 201 {id, status}
                            (Idempotency-Key header: a retry returns the same message, 200)
    GET    /messages/{id}   -> 200 the message | 404
    DELETE /messages/{id}   -> 200 cancelled | 404 | 409 already firing or done
Bad input -> 400 {"message": <why>}; nothing is stored. A publish time is judged against
when API Gateway received the request: up to the scheduler's late tolerance in the past
is accepted and fired at once (`lateOnArrival` in the message).
"""

from __future__ import annotations

import json
from typing import Any

from exactly_once.handlers import metrics, scheduler
from exactly_once.handlers.errors import BadEvent, Conflict, NotFound
from exactly_once.handlers.runtime import log


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


PATTERN = "scheduler"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return serve(event, scheduler.SchedulerSettings.current(), context)


def serve(
    event: dict[str, Any], config: scheduler.SchedulerSettings, context: Any = None
) -> dict[str, Any]:
    method = event.get("httpMethod", "")
    message_id = (event.get("pathParameters") or {}).get("id")
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    try:
        if method == "POST" and not message_id:
            try:
                body = json.loads(event.get("body") or "")
            except json.JSONDecodeError as exc:
                raise BadEvent(f"the body is not JSON: {exc.msg}") from None
            registered, created = scheduler.register(
                config,
                body,
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
