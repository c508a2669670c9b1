"""If-None-Match without a new SDK: the hook sends the header itself (moto checks it)."""

from __future__ import annotations

import pytest

from exactly_once.handlers import runtime
from exactly_once.handlers.errors import ClientError, aws_code
from exactly_once.handlers.s3_publish import MIN_PART_SIZE, conditional, publish


@pytest.fixture
def s3(moto: None) -> object:
    client = runtime.client("s3")
    client.create_bucket(Bucket="out")
    return client


@pytest.mark.parametrize("size", [10, MIN_PART_SIZE + 10])  # one PUT, a multipart upload
def test_the_hook_makes_a_second_conditional_write_fail_as_s3_answers(
    s3: object, size: int
) -> None:
    # GIVEN a client whose If-None-Match goes through the hook (as on an old botocore)
    conditional(s3, force_hook=True)
    conditional(s3, force_hook=True)  # registering twice adds nothing

    def write_once() -> None:
        publish(
            s3,
            "out",
            "k",
            [b"x" * size],
            content_type="text/plain",
            only_if_absent=True,
            part_size=MIN_PART_SIZE,
        )

    write_once()
    # WHEN the same key is written again, conditionally
    with pytest.raises(ClientError) as refused:
        write_once()
    # THEN S3 refused it: the header was sent
    assert aws_code(refused.value) in ("PreconditionFailed", "412")


def test_an_unconditional_write_through_the_hooked_client_sends_no_header(s3: object) -> None:
    conditional(s3, force_hook=True)
    publish(s3, "out", "k", [b"a"], content_type="text/plain")
    publish(s3, "out", "k", [b"b"], content_type="text/plain")  # overwrites: no condition
    assert s3.get_object(Bucket="out", Key="k")["Body"].read() == b"b"  # type: ignore[attr-defined]
