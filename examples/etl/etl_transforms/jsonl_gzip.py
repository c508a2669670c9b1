"""JSON lines -> gzip, checked line by line and streamed: a team's own transform, as the
e2e tests deploy it from this folder (`outputSuffix: .jsonl.gz`).

The gzip header carries no time or name, so the same input gives the same bytes (which the
deterministic strategy needs). A line that is not a JSON object raises BadInput.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import IO

from exactly_once.handlers.errors import BadInput
from exactly_once.handlers.s3_events import ObjectRef

READ_SIZE = 1024 * 1024
GZIP = 16 + zlib.MAX_WBITS  # zlib writes a gzip container with mtime 0 and no file name


def transform(source: IO[bytes], obj: ObjectRef) -> Iterator[bytes]:
    compressor = zlib.compressobj(6, zlib.DEFLATED, GZIP)
    number = 0
    for number, line in enumerate(_lines(source), start=1):
        try:
            parsed = json.loads(line)
        except ValueError as exc:
            raise BadInput(f"line {number} is not JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise BadInput(f"line {number} is {type(parsed).__name__}, not an object")
        if compressed := compressor.compress(line + b"\n"):
            yield compressed
    if number == 0:
        raise BadInput("input has no lines")
    yield compressor.flush()


def _lines(source: IO[bytes]) -> Iterator[bytes]:
    """Non-blank lines without their ending, read a megabyte at a time."""
    rest = b""
    while chunk := source.read(READ_SIZE):
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        yield from (line.rstrip(b"\r") for line in lines if line.strip())
    if rest.strip():
        yield rest.rstrip(b"\r")
