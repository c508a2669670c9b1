"""The starter handler end to end in-process: moto for Step Functions and SQS."""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from exactly_once.handlers import name_dedup, runtime
from exactly_once.handlers.executions import Backend, ReusePolicy
from exactly_once.handlers.name_dedup import StarterSettings
from exactly_once.handlers.names import durable_execution_name
from exactly_once.handlers.settings import SettingsError
from tests.unit.conftest import WAIT_DEFINITION, make_state_machine, s3_event


def settings(
    target: str,
    hide_key: bool = False,
    backend: Backend = Backend.STEP_FUNCTIONS,
    reuse_policy: str = "REJECT_DUPLICATE",
) -> StarterSettings:
    return StarterSettings(
        backend=backend,
        target_arn=target,
        key_strategy="object-key",
        reuse_policy=ReusePolicy(reuse_policy),
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
        name_dedup.start(event, None, settings(deployed["machine"]))["status"] for _ in range(3)
    ]
    assert outcomes == ["STARTED", "DUPLICATE", "DUPLICATE"]
    assert len(executions(deployed["machine"])) == 1


def test_a_bad_event_goes_to_the_dlq_with_a_reason_and_starts_nothing(
    deployed: dict[str, str],
) -> None:
    result = name_dedup.start({"detail": {"object": {}}}, None, settings(deployed["machine"]))
    assert result["status"] == "REJECTED"
    [message] = dlq_messages(deployed["queue"])
    assert "detail.object.key" in message["reason"]
    assert message["event"] == {"detail": {"object": {}}}
    assert executions(deployed["machine"]) == []


def test_hidden_keys_are_not_logged(
    deployed: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    name_dedup.start(s3_event(key="alice@example.com"), None, settings(deployed["machine"], True))
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
    monkeypatch.setattr(name_dedup, "dead_letter", lambda *a, **k: sent.append("dlq"))
    sfn = runtime.client("stepfunctions")
    monkeypatch.setattr(name_dedup, "unusable", lambda backend, arn: None)
    with Stubber(sfn) as stub:
        # The Stubber answers before botocore's retry loop, so this throttle surfaces at
        # once; the SDK's own retries are exercised through LocalStack (e2e test_faults).
        stub.add_client_error("start_execution", "ThrottlingException", http_status_code=400)
        with pytest.raises(ClientError, match="ThrottlingException"):
            name_dedup.start(
                s3_event(), None, settings("arn:aws:states:us-east-1:1:stateMachine:m")
            )
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
    result = name_dedup.start(s3_event(), None, settings(express))
    # THEN nothing starts, and the event waits in the DLQ with the reason
    assert result["status"] == "REJECTED"
    [message] = dlq_messages(deployed["queue"])
    assert "not a STANDARD state machine" in message["reason"]
    assert executions(express) == []


def test_settings_come_from_the_environment_the_component_sets() -> None:
    env = StarterSettings.environment(
        backend="durable-function",
        target_arn="arn:f:1",
        key_strategy="object-key",
        reuse_policy="REJECT_DUPLICATE",
        hide_key="true",
    )
    assert env == {
        "BACKEND": "durable-function",
        "TARGET_ARN": "arn:f:1",
        "KEY_STRATEGY": "object-key",
        "REUSE_POLICY": "REJECT_DUPLICATE",
        "HIDE_KEY": "true",
    }
    assert StarterSettings.from_env(env) == StarterSettings(
        Backend.DURABLE_FUNCTION, "arn:f:1", "object-key", ReusePolicy.REJECT_DUPLICATE, True
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
        "BACKEND": "step-functions",
        "TARGET_ARN": "arn:m",
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
            backend="step-functions",
            target_arn="arn:m",
            key_strategy="object-key",
            reuse_policy="REJECT_DUPLICATE",
        )


# -- the durable-function backend: Lambda's Invoke, asserted exactly with a Stubber ----
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:orders:live"
DURABLE = {"FunctionName": FUNCTION, "DurableConfig": {"ExecutionTimeout": 900}}


def durable_invoke(name: str, payload: dict) -> dict:
    """The Invoke the starter must send for this name and payload."""
    from exactly_once.handlers.executions import canonical_input

    return {
        "FunctionName": FUNCTION,
        "InvocationType": "Event",
        "DurableExecutionName": name,
        "Payload": canonical_input(payload).encode(),
    }


def test_a_durable_backend_names_the_invoke_and_counts_a_redelivery_as_a_duplicate(
    deployed: dict[str, str],
) -> None:
    from botocore.stub import Stubber

    event = s3_event()  # its key: "uploads/in/a.csv"
    config = settings(FUNCTION, backend=Backend.DURABLE_FUNCTION)
    sent = {"key": "uploads/in/a.csv", "event": event, "attempt": 0}
    with Stubber(runtime.client("lambda")) as stub:
        # GIVEN a version of a durable function (asked once per cold start)
        stub.add_response("get_function_configuration", DURABLE, {"FunctionName": FUNCTION})
        # WHEN the event comes, and comes again (another delivery, another request id)
        arn = f"{FUNCTION}/durable-execution/in_a_csv--x/1"
        stub.add_response(
            "invoke",
            {"StatusCode": 202, "DurableExecutionArn": arn},
            durable_invoke(
                durable_execution_name(FUNCTION, "uploads/in/a.csv"), {**sent, "requestId": "r1"}
            ),
        )
        stub.add_client_error(
            "invoke",
            "DurableExecutionAlreadyStartedException",
            http_status_code=409,
            expected_params=durable_invoke(
                durable_execution_name(FUNCTION, "uploads/in/a.csv"), {**sent, "requestId": "r2"}
            ),
        )
        first = name_dedup.start(event, SimpleNamespace(aws_request_id="r1"), config)
        second = name_dedup.start(event, SimpleNamespace(aws_request_id="r2"), config)
        stub.assert_no_pending_responses()
    # THEN one execution started; the redelivery is a counted duplicate, nothing dead-lettered
    assert (first["status"], first["execution_arn"]) == ("STARTED", arn)
    assert second["status"] == "DUPLICATE"
    assert dlq_messages(deployed["queue"]) == []


def test_a_durable_backend_retries_a_failed_execution_under_the_next_name(
    deployed: dict[str, str],
) -> None:
    from botocore.stub import Stubber

    event = s3_event()
    config = settings(
        FUNCTION, backend=Backend.DURABLE_FUNCTION, reuse_policy="ALLOW_DUPLICATE_FAILED_ONLY"
    )
    name = durable_execution_name(FUNCTION, "uploads/in/a.csv")
    sent = {"key": "uploads/in/a.csv", "event": event, "requestId": "r3"}
    with Stubber(runtime.client("lambda")) as stub:
        stub.add_response("get_function_configuration", DURABLE, {"FunctionName": FUNCTION})
        stub.add_client_error(
            "invoke",
            "DurableExecutionAlreadyStartedException",
            http_status_code=409,
            expected_params=durable_invoke(name, {**sent, "attempt": 0}),
        )
        # GIVEN the name's execution failed: the policy allows a deliberate re-run
        stub.add_response(
            "list_durable_executions_by_function",
            {
                "DurableExecutions": [
                    {
                        "DurableExecutionArn": f"{FUNCTION}/durable-execution/{name}/1",
                        "DurableExecutionName": name,
                        "FunctionArn": FUNCTION,
                        "Status": "FAILED",
                        "StartTimestamp": 0,
                    }
                ]
            },
            {
                "FunctionName": FUNCTION.rsplit(":", 1)[0],
                "Qualifier": "live",
                "DurableExecutionName": name,
            },
        )
        stub.add_response(
            "invoke",
            {"StatusCode": 202, "DurableExecutionArn": "arn-r1"},
            durable_invoke(f"{name}-r1", {**sent, "attempt": 1}),
        )
        outcome = name_dedup.start(event, SimpleNamespace(aws_request_id="r3"), config)
        stub.assert_no_pending_responses()
    assert (outcome["status"], outcome["name"], outcome["attempt"]) == ("STARTED", f"{name}-r1", 1)


def test_a_durable_backend_raises_a_throttle_for_redelivery_and_refuses_a_plain_function(
    deployed: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from botocore.exceptions import ClientError
    from botocore.stub import Stubber

    config = settings(FUNCTION, backend=Backend.DURABLE_FUNCTION)
    with Stubber(runtime.client("lambda")) as stub:
        stub.add_response("get_function_configuration", DURABLE, {"FunctionName": FUNCTION})
        stub.add_client_error("invoke", "TooManyRequestsException", http_status_code=429)
        # a throttle is never a duplicate and never dead-lettered: Lambda retries the event
        with pytest.raises(ClientError, match="TooManyRequestsException"):
            name_dedup.start(s3_event(), SimpleNamespace(aws_request_id="r4"), config)
    assert dlq_messages(deployed["queue"]) == []
    # a plain (not durable) function would ignore the name: every event is dead-lettered
    name_dedup.unusable.cache_clear()
    with Stubber(runtime.client("lambda")) as stub:
        plain = {"FunctionName": FUNCTION}
        stub.add_response("get_function_configuration", plain, {"FunctionName": FUNCTION})
        result = name_dedup.start(s3_event(), SimpleNamespace(aws_request_id="r5"), config)
    assert result["status"] == "REJECTED"
    [message] = dlq_messages(deployed["queue"])
    assert "not a durable function" in message["reason"]


def test_a_botocore_without_the_durable_api_is_named_at_cold_start_not_taken_for_a_plain_target(
    deployed: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the function runs on a botocore older than the durable-execution APIs (a Lambda
    # runtime's own SDK): its model has no DurableExecutionName, and its parser would drop
    # DurableConfig, so every target looked "not a durable function"
    lam = runtime.client("lambda")
    invoke = lam.meta.service_model.operation_model("Invoke").input_shape.members
    monkeypatch.delitem(invoke, "DurableExecutionName")
    name_dedup.unusable.cache_clear()
    config = settings(FUNCTION, backend=Backend.DURABLE_FUNCTION)
    try:
        result = name_dedup.start(s3_event(), SimpleNamespace(aws_request_id="r6"), config)
    finally:
        name_dedup.unusable.cache_clear()
    # THEN the event waits in the DLQ with the real reason, and nothing was called
    assert result["status"] == "REJECTED"
    [message] = dlq_messages(deployed["queue"])
    assert "no durable-execution API" in message["reason"]
    assert name_dedup.DURABLE_API_BOTOCORE in message["reason"]
    # AND the botocore this project runs has it
    monkeypatch.undo()
    assert name_dedup.missing_durable_api(lam) is None
