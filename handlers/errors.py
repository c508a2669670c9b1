"""One error model for every handler: what a failure means for the event that caused it.

- `Permanent`: no redelivery can fix it. An event handler parks the event in its DLQ
  with the message as the reason; an API answers 400 (`Conflict`: 409). Never retried.
- `Retryable`: it may succeed later (another invocation holds the work, a throttle).
  Raised out of the handler so the event source redelivers it.
- `NotFound`: what a request names does not exist (an API's 404).
Anything else (a bug, an AWS error nobody classified) propagates like `Retryable`: it is
redelivered, never dropped and never taken for a duplicate.

AWS errors are botocore `ClientError`s; `aws_code` reads their code, so call sites catch
`ClientError` and test the code in one place.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

__all__ = [
    "BadEvent",
    "BadInput",
    "ClientError",
    "Conflict",
    "NotFound",
    "Permanent",
    "Retryable",
    "aws_code",
    "object_missing",
]


class Permanent(Exception):
    """No redelivery can fix this: a DLQ entry (or a 400) with this message as the reason."""


class BadEvent(Permanent):
    """The event itself is unusable: not the shape its source sends, or no key in it."""


class BadInput(Permanent):
    """The data the event points at is unusable (an ETL input that cannot be transformed)."""


class Conflict(Permanent):
    """The request contradicts what is stored (an API's 409)."""


class NotFound(Exception):
    """What the request names does not exist (an API's 404)."""


class Retryable(Exception):
    """It may succeed later: raise it so the event is redelivered."""


def aws_code(exc: ClientError) -> str:
    """The AWS error code of a ClientError (e.g. "ConditionalCheckFailedException")."""
    return str(exc.response.get("Error", {}).get("Code", ""))


def object_missing(exc: ClientError) -> bool:
    """Whether S3 says the object is not there (HeadObject has no body: a bare 404)."""
    return aws_code(exc) in ("404", "NoSuchKey", "NotFound")
