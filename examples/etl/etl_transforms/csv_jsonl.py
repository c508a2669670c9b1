"""CSV with a header row -> JSON lines, typed by a schema, streamed row by row.

The schema (column -> int | float | str) is the environment variable CSV_SCHEMA, JSON;
without it, `DEFAULT_SCHEMA`. A malformed row anywhere raises BadInput: the ETL then
publishes nothing for this input (a multipart upload is aborted), never half an output.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
from collections.abc import Callable, Iterator
from typing import IO, Any

from exactly_once.handlers.errors import BadInput
from exactly_once.handlers.s3_events import ObjectRef

DEFAULT_SCHEMA = {"id": "int", "name": "str", "amount": "float"}
ROWS_PER_CHUNK = 2000
_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "float": float, "str": str}


def check_schema(schema: dict[str, str]) -> None:
    unknown = {column: kind for column, kind in schema.items() if kind not in _TYPES}
    if not schema or unknown:
        raise ValueError(f"schema types must be one of {sorted(_TYPES)}; got {unknown or schema}")


@functools.cache
def configured_schema() -> dict[str, str]:
    schema: dict[str, str] = json.loads(os.environ.get("CSV_SCHEMA") or "null") or DEFAULT_SCHEMA
    check_schema(schema)
    return schema


def transform(source: IO[bytes], obj: ObjectRef) -> Iterator[bytes]:
    """The ETL's entry point: this function's schema."""
    return json_lines(source, configured_schema())


def json_lines(source: IO[bytes], schema: dict[str, str] = DEFAULT_SCHEMA) -> Iterator[bytes]:
    """JSON lines, one object per CSV row (keys sorted: the same input, the same bytes)."""
    text = io.TextIOWrapper(source, encoding="utf-8-sig", newline="")
    try:
        yield from _rows(csv.DictReader(text), schema)
    except UnicodeDecodeError as exc:
        raise BadInput(f"input is not UTF-8: {exc}") from None


def _rows(reader: csv.DictReader[str], schema: dict[str, str]) -> Iterator[bytes]:
    header = reader.fieldnames or []
    missing = [column for column in schema if column not in header]
    if missing:
        raise BadInput(f"header {header} lacks required columns {missing}")
    lines: list[str] = []
    number = 1
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
        if len(lines) == ROWS_PER_CHUNK:
            yield ("\n".join(lines) + "\n").encode()
            lines.clear()
    if number == 1:
        raise BadInput("input has a header but no rows")
    if lines:
        yield ("\n".join(lines) + "\n").encode()
