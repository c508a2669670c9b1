"""Render API Gateway mapping templates in-process (airspeed, the engine LocalStack uses).

A test double of API Gateway's `$input`, `$util` and `$context` with AWS's documented
semantics, shared by the unit tests (tests/unit/test_api_templates.py) and the fault
explorer's API Gateway model (tests/explore/scenarios/api_starter.py); the e2e tests run
the same templates in LocalStack's API Gateway.
"""

from __future__ import annotations

import base64
import functools
import json
import re
from typing import Any

import airspeed


def _path(document: Any, path: str) -> Any:
    value = document
    for part in [p for p in re.split(r"\.", path.removeprefix("$")) if p]:
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


class Input:
    def __init__(self, body: str, headers: dict[str, str] | None = None) -> None:
        self._body = body
        self._headers = headers or {}

    def _document(self) -> Any:
        return json.loads(self._body) if self._body else {}

    def path(self, path: str) -> Any:
        return _path(self._document(), path)

    def json(self, path: str) -> str:
        return json.dumps(_path(self._document(), path))

    def params(self, name: str | None = None) -> Any:
        if name is not None:
            return self._headers.get(name, "")
        return {"header": dict(self._headers), "querystring": {}, "path": {}}


class Util:
    @staticmethod
    def escapeJavaScript(value: Any) -> str:
        """As AWS: JSON string escapes, plus `'` as `\\'` (hence our replaceAll)."""
        if value is None:
            return ""
        return json.dumps(str(value))[1:-1].replace("'", "\\'")

    @staticmethod
    def base64Encode(value: Any) -> str:
        """As AWS: standard base64 (with '+', '/' and '=') of the string's UTF-8 bytes."""
        return base64.b64encode(str(value).encode("utf-8")).decode()


@functools.lru_cache(maxsize=64)
def _parsed(template: str) -> airspeed.Template:
    """A template parsed once (parsing is most of a render's time; a merge leaves it as it
    was)."""
    return airspeed.Template(template)


def render(
    template: str, body: str = "", headers: dict[str, str] | None = None, request_id: str = "r"
) -> tuple[str, dict[str, Any]]:
    """(rendered text, $context.responseOverride)."""
    context: dict[str, Any] = {
        "requestId": request_id,
        "responseOverride": {"status": 0, "header": {}},
        "error": {"validationErrorString": ""},
    }
    text = _parsed(template).merge(
        {"input": Input(body, headers), "util": Util(), "context": context}
    )
    return text, context["responseOverride"]
