"""Load, one at a time, every LocalStack service the stacks use, before anything else does.

LocalStack loads a service on its first request; concurrent first requests (a deploy
creating many roles at once) can race that load, and one of them gets 501 "no handler for
operation". A single read call per service, retried until it answers, loads each first.
Run by localstack/up with LocalStack's own Python (boto3 comes with localstack-core).
"""

from __future__ import annotations

import sys
import time

import boto3

CALLS = [
    ("iam", "list_roles"),
    ("sts", "get_caller_identity"),
    ("s3", "list_buckets"),
    ("sqs", "list_queues"),
    ("sns", "list_topics"),
    ("dynamodb", "list_tables"),
    ("dynamodbstreams", "list_streams"),
    ("kinesis", "list_streams"),
    ("lambda", "list_functions"),
    ("logs", "describe_log_groups"),
    ("cloudwatch", "list_metrics"),
    ("events", "list_rules"),
    ("stepfunctions", "list_state_machines"),
    ("apigateway", "get_rest_apis"),
]


def main(url: str) -> int:
    for service, call in CALLS:
        client = boto3.client(  # type: ignore[call-overload]
            service,
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                getattr(client, call)()
                break
            except Exception as exc:  # not loaded yet: 501, a reset connection, a timeout
                if time.monotonic() > deadline:
                    print(f"localstack: {service} did not answer: {exc}", file=sys.stderr)
                    return 1
                time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
