"""The AWS clients of the ops commands: the caller's credentials, one region, one endpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config

LOCAL_KEYS = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}


def clients(
    endpoint_url: str | None = None, region: str | None = None, profile: str | None = None
) -> Callable[..., Any]:
    """(service, config=None) -> client. Credentials come from the standard chain (or
    `profile`); only an `endpoint_url` with no credentials anywhere (LocalStack, a test)
    gets LocalStack's test keys, never instead of the caller's own."""
    session = boto3.Session(profile_name=profile, region_name=region)
    options: dict[str, Any] = {}
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
        if session.get_credentials() is None:
            options.update(LOCAL_KEYS)

    def client(service: str, config: Config | None = None) -> Any:
        return session.client(service, config=config, **options)  # type: ignore[call-overload]

    return client
