"""Pattern 2 on LocalStack: POST through the VTL template, and S3 -> EventBridge -> API Gateway."""

from __future__ import annotations

from typing import Any

import pytest

from deploy.clients import client, eventually, execution_input, executions, http, new_tag, steady


@pytest.fixture
def api(stack: dict[str, Any]) -> dict[str, Any]:
    return stack["apiStarter"]


def post(api: dict[str, Any], body: Any, **headers: str) -> tuple[int, Any]:
    return http("POST", api["url"], body, {"x-api-key": api["apiKey"], **headers})


def count(api: dict[str, Any], tag: str) -> int:
    return len(executions(api["stateMachineArn"], tag))


def test_same_body_twice_starts_one_execution_and_the_second_is_409(api: dict[str, Any]) -> None:
    tag = new_tag()
    body = {"detail": {"object": {"key": f'in/{tag}/it\'s "quoted" é.csv'}}, "note": "naïve '中'"}
    first_status, first = post(api, body)
    second_status, second = post(api, body)
    assert (first_status, first["duplicate"]) == (200, False)
    assert (second_status, second["duplicate"]) == (409, True)
    [execution] = executions(api["stateMachineArn"], tag)
    assert execution["executionArn"] == first["executionArn"]
    # the escaped input arrives intact
    assert execution_input(execution["executionArn"]) == body


def test_body_without_the_key_is_400_and_starts_nothing(api: dict[str, Any]) -> None:
    before = len(executions(api["stateMachineArn"]))
    status, answer = post(api, {"detail": {"object": {"size": 1}}})
    assert status == 400
    assert answer["message"]  # LocalStack: "Invalid request body"; AWS: the schema error
    status, _ = post(api, b"not json at all")
    assert status == 400
    assert len(executions(api["stateMachineArn"])) == before


def test_bad_attempt_header_is_400_with_a_reason(api: dict[str, Any]) -> None:
    tag = new_tag()
    status, answer = post(api, {"detail": {"object": {"key": tag}}}, **{"X-Attempt": "abc"})
    assert status == 400
    assert "X-Attempt" in answer["message"]
    assert count(api, tag) == 0


def test_without_the_api_key_is_forbidden(api: dict[str, Any]) -> None:
    tag = new_tag()
    status, _ = http("POST", api["url"], {"detail": {"object": {"key": tag}}})
    assert status == 403
    assert count(api, tag) == 0


def test_retry_with_the_attempt_suffix_is_a_new_execution(api: dict[str, Any]) -> None:
    tag = new_tag()
    body = {"detail": {"object": {"key": f"in/{tag}.csv"}}}
    assert post(api, body)[0] == 200
    status, retry = post(api, body, **{"X-Attempt": "1"})
    assert (status, retry["duplicate"]) == (200, False)
    assert retry["executionArn"].endswith("-r1")
    assert post(api, body, **{"X-Attempt": "1"})[0] == 409
    assert count(api, tag) == 2


def test_s3_put_reaches_step_functions_through_eventbridge_and_api_gateway(
    api: dict[str, Any],
) -> None:
    tag = new_tag()
    client("s3").put_object(Bucket=api["bucket"], Key=f"api/{tag}.csv", Body=b"x")
    eventually(lambda: count(api, tag))
    assert steady(lambda: count(api, tag)) == 1
