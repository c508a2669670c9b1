"""Outcome classification against moto's Step Functions and exact botocore stubs."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from exactly_once.handlers import runtime
from exactly_once.handlers.executions import (
    DUPLICATE,
    REDRIVEN,
    STARTED,
    ReusePolicy,
    canonical_input,
    execution_arn,
    start_once,
)
from tests.unit.conftest import FAIL_DEFINITION, WAIT_DEFINITION, make_state_machine

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:target"


def new_id() -> str:
    return str(uuid.uuid4())


def wait_for_status(arn: str, status: str) -> None:
    sfn = runtime.client("stepfunctions")
    for _ in range(100):
        if sfn.describe_execution(executionArn=arn)["status"] == status:
            return
        time.sleep(0.05)
    raise AssertionError(f"{arn} never reached {status}")


def test_first_start_is_started_and_a_redelivery_is_a_duplicate(moto: None) -> None:
    machine = make_state_machine(WAIT_DEFINITION)
    first = start_once(machine, "k1", {"key": "k1"}, new_id())
    again = start_once(machine, "k1", {"key": "k1"}, new_id())
    assert first.status == STARTED
    assert again.status == DUPLICATE
    assert again.execution_arn == first.execution_arn
    executions = runtime.client("stepfunctions").list_executions(stateMachineArn=machine)
    assert len(executions["executions"]) == 1


def test_other_input_under_the_same_name_is_a_duplicate(moto: None) -> None:
    machine = make_state_machine(WAIT_DEFINITION)
    start_once(machine, "k1", {"key": "k1", "event": {"id": "a"}}, new_id())
    second = start_once(machine, "k1", {"key": "k1", "event": {"id": "b"}}, new_id())
    assert second.status == DUPLICATE


def test_failed_execution_is_retried_under_the_next_attempt_name(moto: None) -> None:
    machine = make_state_machine(FAIL_DEFINITION)
    first = start_once(
        machine, "k1", {"key": "k1"}, new_id(), ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
    )
    wait_for_status(first.execution_arn, "FAILED")
    retry = start_once(
        machine, "k1", {"key": "k1"}, new_id(), ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
    )
    assert (retry.status, retry.attempt, retry.name) == (STARTED, 1, "k1-r1")


def test_reject_duplicate_never_retries_a_failure(moto: None) -> None:
    machine = make_state_machine(FAIL_DEFINITION)
    first = start_once(machine, "k1", {"key": "k1"}, new_id())
    wait_for_status(first.execution_arn, "FAILED")
    assert start_once(machine, "k1", {"key": "k1"}, new_id()).status == DUPLICATE


def stubbed() -> tuple[Stubber, dict[str, str]]:
    stub = Stubber(runtime.client("stepfunctions"))
    expected = {
        "stateMachineArn": ARN,
        "name": "k1",
        "input": canonical_input({"key": "k1", "attempt": 0, "requestId": "req-1"}),
    }
    return stub, expected


def test_a_retry_of_the_call_that_started_it_is_still_started() -> None:
    # GIVEN StartExecution's same-name-same-input success: only this request's own retry
    # (a Lambda retry keeps its request id) can send the same input
    stub, expected = stubbed()
    earlier = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    stub.add_response(
        "start_execution",
        {"executionArn": execution_arn(ARN, "k1"), "startDate": earlier},
        expected,
    )
    with stub:
        outcome = start_once(ARN, "k1", {"key": "k1"}, "req-1")
    stub.assert_no_pending_responses()
    assert outcome.status == STARTED


def test_concurrent_twins_get_one_started_and_the_rest_duplicates(moto: None) -> None:
    # GIVEN ten deliveries of one event at once, while its execution runs
    machine = make_state_machine(WAIT_DEFINITION)
    with ThreadPoolExecutor(10) as pool:
        outcomes = list(
            pool.map(lambda n: start_once(machine, "k1", {"key": "k1"}, f"req-{n}"), range(10))
        )
    # THEN exactly one says it started it, whatever the clocks say
    assert sorted(o.status for o in outcomes) == [DUPLICATE] * 9 + [STARTED]
    executions = runtime.client("stepfunctions").list_executions(stateMachineArn=machine)
    assert len(executions["executions"]) == 1


@pytest.mark.parametrize(
    "code", ["ThrottlingException", "ExecutionLimitExceeded", "ServiceUnavailable"]
)
def test_throttles_and_unknown_errors_propagate_and_are_never_duplicates(code: str) -> None:
    stub, expected = stubbed()
    stub.add_client_error("start_execution", code, http_status_code=400, expected_params=expected)
    with stub, pytest.raises(ClientError) as raised:
        start_once(ARN, "k1", {"key": "k1"}, "req-1")
    assert raised.value.response["Error"]["Code"] == code


def test_unknown_reuse_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="reuse policy"):
        start_once(ARN, "k1", {}, "req-1", "ALLOW_ALL")


def test_a_failed_attempt_still_redrivable_is_redriven_never_followed_by_a_new_name() -> None:
    # GIVEN attempt 0 FAILED and still redrivable (within Step Functions' 14 days)
    stub, expected = stubbed()
    arn = execution_arn(ARN, "k1")
    described = {
        "executionArn": arn,
        "stateMachineArn": ARN,
        "status": "FAILED",
        "startDate": dt.datetime.now(dt.UTC),
        "redriveStatus": "REDRIVABLE",
    }
    policy = ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY
    stub.add_client_error("start_execution", "ExecutionAlreadyExists", expected_params=expected)
    stub.add_response("describe_execution", described, {"executionArn": arn})
    stub.add_response(
        "redrive_execution",
        {"redriveDate": dt.datetime.now(dt.UTC)},
        {"executionArn": arn, "clientToken": "req-1"},
    )
    # WHEN the starter retries the key, redriving
    with stub:
        outcome = start_once(ARN, "k1", {"key": "k1"}, "req-1", policy, redrive=True)
    stub.assert_no_pending_responses()
    # THEN that execution is resumed: no `-r1` beside it (an operator's redrive of it and
    # ours are the same call: one run of the key at a time)
    assert (outcome.status, outcome.name, outcome.attempt) == (REDRIVEN, "k1", 0)
    # AND one redriven meanwhile (RUNNING again) is a DUPLICATE
    stub, expected = stubbed()
    stub.add_client_error("start_execution", "ExecutionAlreadyExists", expected_params=expected)
    stub.add_response("describe_execution", described, {"executionArn": arn})
    stub.add_client_error("redrive_execution", "ExecutionNotRedrivable")
    with stub:
        outcome = start_once(ARN, "k1", {"key": "k1"}, "req-1", policy, redrive=True)
    assert outcome.status == DUPLICATE
    # AND one past its redrive window (NOT_REDRIVABLE, or no such field: older APIs,
    # LocalStack) is followed by the next attempt's name, which nobody can run beside it
    stub, expected = stubbed()
    stub.add_client_error("start_execution", "ExecutionAlreadyExists", expected_params=expected)
    stub.add_response(
        "describe_execution",
        {**described, "redriveStatus": "NOT_REDRIVABLE"},
        {"executionArn": arn},
    )
    again = {**expected, "name": "k1-r1"}
    again["input"] = canonical_input({"key": "k1", "attempt": 1, "requestId": "req-1"})
    stub.add_response(
        "start_execution",
        {"executionArn": execution_arn(ARN, "k1-r1"), "startDate": dt.datetime.now(dt.UTC)},
        again,
    )
    with stub:
        outcome = start_once(ARN, "k1", {"key": "k1"}, "req-1", policy, redrive=True)
    assert (outcome.status, outcome.name) == (STARTED, "k1-r1")
