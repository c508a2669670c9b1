"""Which botocore each AWS API the handlers call needs, where that is newer than what a
Lambda Python runtime may ship.

The handlers run on the runtime's own SDK (AWS's Python runtimes include boto3, often a
version behind), except where a function packages its own. Every API they call is in
botocore at pyproject's floor (boto3 1.35.16; `tests/package/test_wheel.py` checks each
call the fault explorer records against that botocore's models), except these, each with
the first botocore that has it and how the handlers cope with an older one.
"""

from __future__ import annotations

NEWER: dict[str, tuple[str, str]] = {
    # service.Operation[.Parameter]: (first botocore with it, what happens before it)
    "lambda.Invoke.DurableExecutionName": (
        "1.42.1",
        "packaged: the durable starter carries boto3>=1.42.1 (handlers/backends.py "
        "DURABLE_API_SDK) and names an older one at cold start",
    ),
    "lambda.ListDurableExecutionsByFunction": ("1.42.1", "packaged, as Invoke's name"),
    "lambda.GetDurableExecution": (
        "1.42.1",
        "packaged: the durable resumable function carries the durable SDK and its boto3",
    ),
}
"""Newer than boto3 1.35.16. S3's `IfNoneMatch` (PutObject, CompleteMultipartUpload)
arrived in 1.35.16 itself; on an older runtime SDK handlers/s3_publish.py sends the
header through a hook."""
