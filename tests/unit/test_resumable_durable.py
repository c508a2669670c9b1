"""Pattern 4 as a durable function, run by AWS's in-process durable-execution runner
against moto's DynamoDB; the steps' Lambdas are recorded stand-ins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from aws_durable_execution_sdk_python.execution import InvocationStatus
from aws_durable_execution_sdk_python_testing.runner import DurableFunctionTestRunner

from exactly_once.handlers import resumable, resumable_durable, runtime
from exactly_once.handlers.resumable import ResumableDurableSettings
from exactly_once.handlers.resumable_durable import StepFailed

STEPS = ["Reserve", "Charge", "Ship"]
CONFIG = ResumableDurableSettings(
    table="checkpoints",
    steps=STEPS,
    step_functions=[f"arn:aws:lambda:us-east-1:123456789012:function:{s}" for s in STEPS],
    key_path="$.orderId",
    checkpoint_ttl_seconds=3600,
    retention_seconds=3600,
)


@pytest.fixture
def world(moto: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    runtime.client("dynamodb").create_table(
        TableName="checkpoints",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    monkeypatch.setattr(ResumableDurableSettings, "current", classmethod(lambda cls: CONFIG))
    world: dict[str, Any] = {"calls": [], "fail": set()}

    def invoke_step(function_arn: str, state: dict[str, Any]) -> Any:
        name = function_arn.rsplit(":", 1)[-1]
        world["calls"].append((name, json.loads(json.dumps(state["results"]))))
        if name in world["fail"]:
            raise StepFailed(f"Boom: {name} failed")
        return {"step": name, "order": state["orderId"]}

    monkeypatch.setattr(resumable_durable, "invoke_step", invoke_step)
    yield world


def run(order: str, execution: str) -> Any:
    with DurableFunctionTestRunner(handler=resumable_durable.handler) as runner:
        return runner.run(input=json.dumps({"orderId": order}), execution_name=execution)


def item(order: str) -> dict[str, Any]:
    found = runtime.client("dynamodb").get_item(TableName="checkpoints", Key={"pk": {"S": order}})
    return dict(found.get("Item", {}))


def test_a_run_runs_every_step_in_order_and_completes_the_key(world: dict[str, Any]) -> None:
    result = run("o-1", "first")
    assert result.status is InvocationStatus.SUCCEEDED
    assert [name for name, _ in world["calls"]] == STEPS
    # each step sees the outputs of the steps before it
    charge = world["calls"][2][1]["Charge"]
    assert charge == {
        "done": True,
        "output": {"step": "Charge", "order": "o-1"},
        "by": charge["by"],  # the run that did it
    }
    assert isinstance(charge["by"], str) and charge["by"]
    output = json.loads(result.result)
    assert output["results"]["Ship"]["output"] == {"step": "Ship", "order": "o-1"}
    stored = item("o-1")
    assert "completed_at" in stored and "lease" not in stored


def test_a_failed_run_is_resumed_by_the_next_run_from_the_failed_step(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a run whose second step fails on every retry
    world["fail"].add("Charge")
    failed = run("o-2", "first")
    assert failed.status is InvocationStatus.FAILED
    assert [name for name, _ in world["calls"]].count("Reserve") == 1
    # WHEN the workflow is run again for the key, the step fixed (the failed run's lease
    # is its holder's, which ended: test_an_ended_durable_holder_gives_up_its_lease)
    monkeypatch.setattr(resumable, "_holder_ended", lambda holder, saved_at: True)
    world["fail"].clear()
    world["calls"].clear()
    again = run("o-2", "second")
    # THEN it takes the ended run's lease, skips Reserve and runs the rest, once each
    assert again.status is InvocationStatus.SUCCEEDED
    assert [name for name, _ in world["calls"]] == ["Charge", "Ship"]
    assert "completed_at" in item("o-2")


def test_a_completed_key_runs_no_step_and_answers_with_the_stored_results(
    world: dict[str, Any],
) -> None:
    first = run("o-3", "first")
    world["calls"].clear()
    second = run("o-3", "second")
    assert second.status is InvocationStatus.SUCCEEDED
    assert world["calls"] == []
    assert json.loads(second.result)["results"] == json.loads(first.result)["results"]


def test_a_key_held_by_a_running_execution_fails_at_once_and_runs_no_step(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the key's lease held by another execution that still runs
    runtime.client("dynamodb").put_item(
        TableName="checkpoints", Item={"pk": {"S": "o-4"}, "lease": {"S": "other-execution"}}
    )
    monkeypatch.setattr(resumable, "_holder_ended", lambda holder, saved_at: False)
    # WHEN a second run of the key starts
    result = run("o-4", "second")
    # THEN it fails with KeyInProgress before any step (no retry: it would not help)
    assert result.status is InvocationStatus.FAILED
    assert "KeyInProgress" in json.dumps(result.error.to_dict() if result.error else {})
    assert world["calls"] == []
    assert item("o-4")["lease"] == {"S": "other-execution"}


def test_an_input_without_the_business_key_is_refused_with_the_path() -> None:
    with pytest.raises(ValueError, match=r"\$\.orderId"):
        resumable_durable.business_key({"id": "x"}, "$.orderId")
    assert resumable_durable.business_key({"a": {"b": 7}}, "$.a.b") == "7"


@pytest.mark.parametrize(
    ("answer", "ended"),
    [({"Status": "FAILED"}, True), ({"Status": "RUNNING"}, False), (None, True)],
    ids=["failed", "running", "past-its-retention"],
)
def test_an_ended_durable_holder_gives_up_its_lease(
    moto: None, answer: dict[str, str] | None, ended: bool
) -> None:
    from botocore.stub import Stubber

    holder = "arn:aws:lambda:us-east-1:123456789012:function:wf:1/durable-execution/k/1"
    with Stubber(runtime.client("lambda")) as stub:
        expected = {"DurableExecutionArn": holder}
        if answer is None:
            stub.add_client_error(
                "get_durable_execution", "ResourceNotFoundException", 404, expected_params=expected
            )
        else:
            stub.add_response(
                "get_durable_execution",
                {
                    **answer,
                    "DurableExecutionArn": holder,
                    "DurableExecutionName": "k",
                    "FunctionArn": holder.split("/")[0],
                    "StartTimestamp": 0,
                },
                expected,
            )
        assert resumable._holder_ended(holder, None) is ended


def test_a_step_invoke_is_sent_once_and_awaited_as_long_as_a_lambda_runs(moto: None) -> None:
    # GIVEN a step's invoke whose answer never comes in time (a step running past the read
    # timeout): botocore's default client would send it again, running the step twice more
    from botocore.exceptions import ReadTimeoutError

    resumable_durable.step_client.cache_clear()
    lam = resumable_durable.step_client()
    sent: list[str] = []

    def timed_out(request: Any, **kwargs: Any) -> None:
        sent.append(request.url)
        raise ReadTimeoutError(endpoint_url=request.url)

    lam.meta.events.register("before-send.lambda.Invoke", timed_out)
    try:
        # WHEN the durable step invokes it
        with pytest.raises(ReadTimeoutError):
            resumable_durable.invoke_step(CONFIG.step_functions[0], {"orderId": "o-1"})
    finally:
        resumable_durable.step_client.cache_clear()
    # THEN it was sent once (the durable step's own retry decides what comes next), and the
    # client waits longer than any Lambda may run
    assert len(sent) == 1
    assert lam.meta.config.read_timeout > 900
    # (the handlers' shared client, which this invoke used before, sends it 4 times)
    shared = runtime.client.__wrapped__("lambda")  # a fresh one: the cached stays clean
    shared.meta.events.register("before-send.lambda.Invoke", timed_out)
    with pytest.raises(ReadTimeoutError):
        shared.invoke(FunctionName=CONFIG.step_functions[0], Payload=b"{}")
    assert len(sent) == 1 + 4
