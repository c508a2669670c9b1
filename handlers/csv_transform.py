"""The ETL's transform: CSV with a header row -> JSON lines, checked against a schema.

The whole output is built in memory before anything is written, so a malformed
input can never leave a half-written output behind.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from typing import Any

from handlers.errors import BadInput

DEFAULT_SCHEMA = {"id": "int", "name": "str", "amount": "float"}
MAX_INPUT_BYTES = 50 * 1024 * 1024
_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str}


def check_schema(schema: dict[str, str]) -> None:
    unknown = {column: kind for column, kind in schema.items() if kind not in _TYPES}
    if not schema or unknown:
        raise ValueError(f"schema types must be one of {sorted(_TYPES)}; got {unknown or schema}")


def transform(data: bytes, schema: dict[str, str] = DEFAULT_SCHEMA) -> bytes:
    """JSON lines, one object per CSV row, typed by `schema`; MalformedInput otherwise."""
    if len(data) > MAX_INPUT_BYTES:
        raise BadInput(f"input is {len(data)} bytes; the limit is {MAX_INPUT_BYTES}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadInput(f"input is not UTF-8: {exc}") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    missing = [column for column in schema if column not in header]
    if missing:
        raise BadInput(f"header {header} lacks required columns {missing}")
    lines = []
    for number, row in enumerate(reader, start=2):
        if None in row or any(value is None for value in row.values()):
            raise BadInput(f"line {number}: expected {len(header)} fields")
        record: dict[str, Any] = {}
        for column, kind in schema.items():
            try:
                record[column] = _TYPES[kind](row[column])
            except ValueError:
                raise BadInput(
                    f"line {number}: column {column!r} is not {kind}: {row[column]!r}"
                ) from None
        lines.append(json.dumps(record, sort_keys=True))
    if not lines:
        raise BadInput("input has a header but no rows")
    return ("\n".join(lines) + "\n").encode()
