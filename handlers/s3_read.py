"""Read one exact S3 object version as a stream that survives a dropped connection.

A streaming transform holds its GetObject response open for as long as it takes to
transform and upload the output, reading only as fast as it writes. A connection that
breaks part way (a reset, a server closing a stalled response) would otherwise fail the
whole run and start it again from byte 0; instead the read resumes where it stopped with
a ranged GetObject of the same version (`Range: bytes=<offset>-`; S3 API_GetObject), so
the bytes are those of the one version the event names.
"""

from __future__ import annotations

import io
from typing import Any

from botocore.exceptions import (
    ConnectionClosedError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)

from exactly_once.handlers.runtime import log

BROKEN_STREAM = (
    ConnectionClosedError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)
MAX_RESUMES = 5
READ_BUFFER = 1024 * 1024


class ObjectStream(io.RawIOBase):
    """The body of `s3.get_object(**request)` (which must name one version: VersionId, or
    IfMatch on an ETag), reopened at the current offset when the connection breaks."""

    def __init__(self, s3: Any, request: dict[str, Any]) -> None:
        super().__init__()
        self._s3, self._request = s3, request
        self._body = s3.get_object(**request)["Body"]  # ClientErrors are the caller's
        self._position = 0
        self._resumes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while True:
            try:
                data = self._body.read(len(view))
            except BROKEN_STREAM as exc:
                if self._resumes == MAX_RESUMES:
                    raise
                self._resume(exc)
                continue
            view[: len(data)] = data
            self._position += len(data)
            return len(data)

    def _resume(self, exc: Exception) -> None:
        self._resumes += 1
        log(
            "WARNING",
            "the input stream broke; resuming where it stopped",
            key=self._request.get("Key"),
            offset=self._position,
            exc=exc,
        )
        self._body.close()
        request = {**self._request, "Range": f"bytes={self._position}-"}
        self._body = self._s3.get_object(**request)["Body"]

    def close(self) -> None:
        if not self.closed:
            self._body.close()
        super().close()


def open_version(s3: Any, request: dict[str, Any]) -> io.BufferedReader:
    """A buffered, resuming reader of the version `request` names."""
    return io.BufferedReader(ObjectStream(s3, request), buffer_size=READ_BUFFER)
