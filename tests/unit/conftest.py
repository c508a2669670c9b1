"""Unit-test fixtures: fake credentials, moto, and fresh handler clients per test."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from exactly_once.handlers import name_dedup, receiver, runtime, scheduler, scheduler_slots
from tooling import events

REGION = "us-east-1"
FAIL_DEFINITION = {"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Boom"}}}
WAIT_DEFINITION = {
    "StartAt": "W",
    "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}},
}


@pytest.fixture(autouse=True)
def atomic_dynamodb_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """DynamoDB writes an item atomically, its condition checked in the same step (DynamoDB
    developer guide, "Condition expressions": a conditional write succeeds only if the
    item's attributes meet the condition). moto checks, then writes, unlocked: two threads
    claiming one message could both pass its condition (a duplicate delivery the service
    would never allow: test_two_clocks_of_one_slot_fire_each_message_once failed 3 in 20).
    One lock around moto's item writes restores AWS's behaviour."""
    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.RLock()
    for name in ("put_item", "update_item", "delete_item", "transact_write_items"):
        write = getattr(DynamoDBBackend, name)

        def atomic(self: Any, *args: Any, _write: Any = write, **kwargs: Any) -> Any:
            with lock:
                return _write(self, *args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, atomic)


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    runtime.client.cache_clear()
    receiver._counter.cache_clear()
    scheduler_slots._client.cache_clear()
    scheduler_slots._renewals.cache_clear()
    scheduler.forget_sandbox()
    name_dedup.unusable.cache_clear()
    yield
    runtime.client.cache_clear()


@pytest.fixture
def moto() -> Iterator[None]:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield


def make_state_machine(definition: dict[str, Any], name: str = "target") -> str:
    iam = runtime.client("iam")
    role = iam.create_role(RoleName=f"{name}-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    return runtime.client("stepfunctions").create_state_machine(
        name=name, definition=json.dumps(definition), roleArn=role
    )["stateMachineArn"]


def s3_event(
    key: str = "in/a.csv",
    sequencer: str = "0001",
    version: str | None = "v1",
    bucket: str = "uploads",
    event_id: str = "e-1",
) -> dict[str, Any]:
    return events.eventbridge(bucket, key, version, sequencer=sequencer, event_id=event_id)
