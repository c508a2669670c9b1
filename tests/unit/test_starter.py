"""The starter handler end to end in-process: moto for Step Functions and SQS."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from exactly_once.handlers import runtime, starter
from exactly_once.handlers.settings import SettingsError
from exactly_once.handlers.starter import StarterSettings
from tests.unit.conftest import WAIT_DEFINITION, make_state_machine, s3_event


def settings(machine: str, hide_key: bool = False) -> StarterSettings:
    return StarterSettings(
        state_machine_arn=machine,
        key_strategy="object-key",
        reuse_policy="REJECT_DUPLICATE",
        hide_key=hide_key,
    )


@pytest.fixture
def deployed(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    machine = make_state_machine(WAIT_DEFINITION)
    queue = runtime.client("sqs").create_queue(QueueName="dlq")["QueueUrl"]
    monkeypatch.setenv("DLQ_URL", queue)
    yield {"machine": machine, "queue": queue}


def executions(machine: str) -> list[dict]:
    return runtime.client("stepfunctions").list_executions(stateMachineArn=machine)["executions"]


def dlq_messages(queue: str) -> list[dict]:
    response = runtime.client("sqs").receive_message(QueueUrl=queue, MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in response.get("Messages", [])]


def test_an_event_starts_one_execution_however_often_it_comes(deployed: dict[str, str]) -> None:
    event = s3_event()
    outcomes = [
        starter.start(event, None, settings(deployed["machine"]))["status"] for _ in range(3)
    ]
    assert outcomes == ["STARTED", "DUPLICATE", "DUPLICATE"]
    assert len(executions(deployed["machine"])) == 1


def test_a_bad_event_goes_to_the_dlq_with_a_reason_and_starts_nothing(
    deployed: dict[str, str],
) -> None:
    result = starter.start({"detail": {"object": {}}}, None, settings(deployed["machine"]))
    assert result["status"] == "REJECTED"
    [message] = dlq_messages(deployed["queue"])
    assert "detail.object.key" in message["reason"]
    assert message["event"] == {"detail": {"object": {}}}
    assert executions(deployed["machine"]) == []


def test_hidden_keys_are_not_logged(
    deployed: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    starter.start(s3_event(key="alice@example.com"), None, settings(deployed["machine"], True))
    logged = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert logged[-1]["message"] == "STARTED"
    assert "key_hash" in logged[-1]
    assert "alice" not in json.dumps(logged)


def test_a_throttled_start_is_raised_for_redelivery_never_dead_lettered_or_counted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from botocore.exceptions import ClientError
    from botocore.stub import Stubber

    sent: list[str] = []
    monkeypatch.setattr(starter, "dead_letter", lambda *a, **k: sent.append("dlq"))
    sfn = runtime.client("stepfunctions")
    monkeypatch.setattr(starter, "workflow_type", lambda arn: "STANDARD")
    with Stubber(sfn) as stub:
        # The Stubber answers before botocore's retry loop, so this throttle surfaces at
        # once; the SDK's own retries are exercised through LocalStack (e2e test_faults).
        stub.add_client_error("start_execution", "ThrottlingException", http_status_code=400)
        with pytest.raises(ClientError, match="ThrottlingException"):
            starter.start(s3_event(), None, settings("arn:aws:states:us-east-1:1:stateMachine:m"))
    assert sent == []


def test_an_express_target_dead_letters_every_event_with_the_reason(
    deployed: dict[str, str],
) -> None:
    # GIVEN a starter pointed at an EXPRESS state machine (it keeps no execution names)
    iam = runtime.client("iam")
    role = iam.create_role(RoleName="express-role", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    express = runtime.client("stepfunctions").create_state_machine(
        name="express", definition=json.dumps(WAIT_DEFINITION), roleArn=role, type="EXPRESS"
    )["stateMachineArn"]
    # WHEN an event comes
    result = starter.start(s3_event(), None, settings(express))
    # THEN nothing starts, and the event waits in the DLQ with the reason
    assert result["status"] == "REJECTED"
    [message] = dlq_messages(deployed["queue"])
    assert "not a STANDARD state machine" in message["reason"]
    assert executions(express) == []


def test_settings_come_from_the_environment_the_component_sets() -> None:
    env = StarterSettings.environment(
        state_machine_arn="arn:m",
        key_strategy="object-key",
        reuse_policy="REJECT_DUPLICATE",
        hide_key="true",
    )
    assert env == {
        "STATE_MACHINE_ARN": "arn:m",
        "KEY_STRATEGY": "object-key",
        "REUSE_POLICY": "REJECT_DUPLICATE",
        "HIDE_KEY": "true",
    }
    assert StarterSettings.from_env(env) == StarterSettings(
        "arn:m", "object-key", "REJECT_DUPLICATE", True
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"HIDE_KEY": None}, "HIDE_KEY is not set"),
        ({"HIDE_KEY": "yes"}, "true or false"),
        ({"REUSE_POLICY": "ALWAYS"}, "REJECT_DUPLICATE"),
    ],
)
def test_a_missing_or_malformed_setting_fails_the_cold_start_by_name(
    change: dict[str, str | None], message: str
) -> None:
    env = {
        "STATE_MACHINE_ARN": "arn:m",
        "KEY_STRATEGY": "object-key",
        "REUSE_POLICY": "REJECT_DUPLICATE",
        "HIDE_KEY": "false",
    }
    for name, value in change.items():
        if value is None:
            del env[name]
        else:
            env[name] = value
    with pytest.raises(SettingsError, match=message):
        StarterSettings.from_env(env)


def test_the_component_cannot_forget_a_setting() -> None:
    with pytest.raises(SettingsError, match="hide_key"):
        StarterSettings.environment(
            state_machine_arn="arn:m", key_strategy="object-key", reuse_policy="REJECT_DUPLICATE"
        )
