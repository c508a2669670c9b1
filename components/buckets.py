"""Private, encrypted S3 buckets, optionally versioned and publishing to EventBridge."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws


def secure_bucket(
    name: str,
    parent: pulumi.Resource | None = None,
    versioned: bool = False,
    eventbridge: bool = False,
    force_destroy: bool = False,
    abort_uploads_after_days: int | None = None,
    opts: pulumi.ResourceOptions | None = None,
) -> aws.s3.Bucket:
    """SSE-S3 encryption and a public access block, always; versioning, EventBridge
    notifications ("Object Created" events on the default bus) and a lifecycle rule that
    removes incomplete multipart uploads on request."""
    child = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=parent))
    bucket = aws.s3.Bucket(name, force_destroy=force_destroy, opts=child)
    aws.s3.BucketPublicAccessBlock(
        f"{name}-public-access",
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=child,
    )
    aws.s3.BucketServerSideEncryptionConfiguration(
        f"{name}-sse",
        bucket=bucket.id,
        rules=[
            aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                    sse_algorithm="AES256"
                )
            )
        ],
        opts=child,
    )
    if versioned:
        aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                status="Enabled"
            ),
            opts=child,
        )
    if abort_uploads_after_days is not None:
        # The parts of an upload that was never completed (its writer crashed) are stored
        # and billed until aborted (S3 User Guide, mpu-abort-incomplete-mpu-lifecycle-config).
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-lifecycle",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="abort-incomplete-multipart-uploads",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=abort_uploads_after_days
                    ),
                )
            ],
            opts=child,
        )
    if eventbridge:
        aws.s3.BucketNotification(f"{name}-events", bucket=bucket.id, eventbridge=True, opts=child)
    return bucket
