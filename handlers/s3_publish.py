"""Write a stream of chunks as one S3 object, atomically, in bounded memory.

Nothing is visible under the key until the whole object is: a small output is one
PutObject, a large one a multipart upload, which S3 assembles into the object only on
CompleteMultipartUpload (S3 User Guide, mpuoverview). So there is no staging copy, and a
failure part-way leaves no object: the upload is aborted here, and one a crash left
behind is invisible to readers and removed by the bucket's AbortIncompleteMultipartUpload
lifecycle rule. Memory stays at about one part, whatever the object's size.

`only_if_absent` adds `If-None-Match: *` to the PUT or the completion: S3 writes the object
only if no object has the key, answering 412 PreconditionFailed otherwise and 409
ConditionalRequestConflict to a concurrent conditional write (PutObject and
CompleteMultipartUpload in the S3 API reference; S3 User Guide, conditional-writes).
The SDK a Lambda runtime includes may predate the parameter (botocore 1.35.16; Lambda
developer guide, "Runtime-included SDK versions"), so on an older botocore the header is
added by a hook on the client (`conditional`): no SDK is vendored into the function.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from exactly_once.handlers.errors import ClientError
from exactly_once.handlers.runtime import log

CONDITIONAL_OPERATIONS = ("PutObject", "CompleteMultipartUpload")
_FLAG = "exactly_once_if_none_match"

MIN_PART_SIZE = 5 * 1024 * 1024  # S3's smallest part but the last
DEFAULT_PART_SIZE = 8 * 1024 * 1024


def publish(
    s3: Any,
    bucket: str,
    key: str,
    chunks: Iterable[bytes],
    *,
    content_type: str,
    only_if_absent: bool = False,
    part_size: int = DEFAULT_PART_SIZE,
) -> int:
    """Write `chunks` as the object `key`: all of it, or nothing; its size in bytes.
    ClientErrors are S3's."""
    if part_size < MIN_PART_SIZE:
        raise ValueError(f"part_size must be at least {MIN_PART_SIZE} bytes, got {part_size}")
    condition = {"IfNoneMatch": "*"} if only_if_absent else {}
    if only_if_absent:
        conditional(s3)
    buffer = bytearray()
    upload: dict[str, Any] | None = None
    parts: list[dict[str, Any]] = []
    size = 0
    try:
        for chunk in chunks:
            buffer += chunk
            size += len(chunk)
            if len(buffer) < part_size:
                continue
            if upload is None:
                upload = s3.create_multipart_upload(
                    Bucket=bucket, Key=key, ContentType=content_type
                )
            parts.append(_part(s3, upload, len(parts) + 1, buffer))
            buffer.clear()
        if upload is None:  # it all fitted in one part: one PUT
            s3.put_object(
                Bucket=bucket, Key=key, Body=bytes(buffer), ContentType=content_type, **condition
            )
            return size
        if buffer:
            parts.append(_part(s3, upload, len(parts) + 1, buffer))
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key=key,
            UploadId=upload["UploadId"],
            MultipartUpload={"Parts": parts},
            **condition,
        )
        return size
    except BaseException:
        if upload is not None:
            _abort(s3, upload)
        raise


def _part(s3: Any, upload: dict[str, Any], number: int, data: bytearray) -> dict[str, Any]:
    answer = s3.upload_part(
        Bucket=upload["Bucket"],
        Key=upload["Key"],
        UploadId=upload["UploadId"],
        PartNumber=number,
        Body=bytes(data),
    )
    return {"PartNumber": number, "ETag": answer["ETag"]}


def _abort(s3: Any, upload: dict[str, Any]) -> None:
    """Drop the parts now; if this fails too, the lifecycle rule drops them later (the
    error being handled is the one to report)."""
    try:
        s3.abort_multipart_upload(
            Bucket=upload["Bucket"], Key=upload["Key"], UploadId=upload["UploadId"]
        )
    except ClientError as exc:
        log("WARNING", "could not abort a multipart upload", key=upload["Key"], exc=exc)


def _knows_if_none_match(s3: Any) -> bool:
    shape = s3.meta.service_model.operation_model("PutObject").input_shape
    return "IfNoneMatch" in shape.members


def conditional(s3: Any, force_hook: bool = False) -> Any:
    """Make `s3` accept IfNoneMatch on PutObject and CompleteMultipartUpload: as it is with
    botocore 1.35.16+, else (or with `force_hook`, for tests) by taking the parameter out
    before validation and sending it as the `If-None-Match` header. Idempotent."""
    if _knows_if_none_match(s3) and not force_hook:
        return s3
    events = s3.meta.events

    def take(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        value = params.pop("IfNoneMatch", None)
        if value is not None:
            context[_FLAG] = value

    def send(request: Any, **_: Any) -> None:
        value = request.context.get(_FLAG)
        if value is not None:
            request.headers["If-None-Match"] = value

    for operation in CONDITIONAL_OPERATIONS:
        # (unique ids: registering again, for another publish, adds nothing)
        events.register_first(
            f"before-parameter-build.s3.{operation}", take, unique_id=f"{_FLAG}-take-{operation}"
        )
        events.register(f"before-sign.s3.{operation}", send, unique_id=f"{_FLAG}-send-{operation}")
    return s3
