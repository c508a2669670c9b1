"""Pattern 2 on LocalStack: POST through the VTL template, and S3 -> EventBridge -> API Gateway."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from exactly_once.components.api_templates import execution_name
from tooling.clients import (
    api_executions,
    client,
    eventually,
    execution_input,
    executions,
    http,
    new_tag,
    steady,
)


@pytest.fixture
def api(stack: dict[str, Any]) -> dict[str, Any]:
    return stack["apiStarter"]


def post(api: dict[str, Any], body: Any, **headers: str) -> tuple[int, Any]:
    return http("POST", api["url"], body, {"x-api-key": api["apiKey"], **headers})


def s3_body(key: str, **extra: Any) -> dict[str, Any]:
    return {"detail": {"object": {"key": key}}, **extra}


def count(api: dict[str, Any], key: str) -> int:
    return len(api_executions(api["stateMachineArn"], key))


def test_same_body_twice_starts_one_execution_and_the_second_is_409(api: dict[str, Any]) -> None:
    tag = new_tag()
    key = f'in/{tag}/it\'s "quoted" é.csv'
    body = s3_body(key, note="naïve '中'")
    first_status, first = post(api, body)
    second_status, second = post(api, body)
    assert (first_status, first["duplicate"]) == (200, False)
    assert (second_status, second["duplicate"]) == (409, True)
    [execution] = api_executions(api["stateMachineArn"], key)
    assert execution["executionArn"] == first["executionArn"]
    # the workflow gets the key, the attempt, the request's id and the body, intact
    document = execution_input(execution["executionArn"])
    assert (document["key"], document["attempt"], document["body"]) == (key, 0, body)
    assert document["requestId"]


def test_the_same_body_after_the_execution_completed_is_409_and_starts_nothing(
    api: dict[str, Any],
) -> None:
    tag = new_tag()
    body = s3_body(f"in/{tag}/done.csv")
    status, first = post(api, body)
    assert status == 200
    sfn = client("stepfunctions")
    arn = first["executionArn"]
    eventually(lambda: sfn.describe_execution(executionArn=arn)["status"] == "SUCCEEDED")
    status, again = post(api, body)
    assert (status, again["duplicate"]) == (409, True)
    assert count(api, body["detail"]["object"]["key"]) == 1


def test_ten_concurrent_identical_posts_get_one_200_and_nine_409(api: dict[str, Any]) -> None:
    # GIVEN ten identical requests at once (an upload's event, redelivered in a burst)
    key = f"in/{new_tag()}/burst.csv"
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda _: post(api, s3_body(key)), range(10)))
    # THEN exactly one says it started the execution; the nine others say duplicate
    statuses = sorted((status, answer["duplicate"]) for status, answer in answers)
    assert statuses == [(200, False)] + [(409, True)] * 9, answers
    assert steady(lambda: count(api, key), seconds=2) == 1


def test_keys_the_old_template_merged_start_one_execution_each(api: dict[str, Any]) -> None:
    # GIVEN keys that differ only in characters a name cannot hold (the old template
    # replaced each run of them with '_', so the second answered 409 and was lost)
    tag = new_tag()
    keys = [f"t/{tag}/a b.csv", f"t/{tag}/a_b.csv", f"t/{tag}/a/b.csv", f"t/{tag}/a-b.csv"]
    # WHEN each is posted
    answers = [post(api, s3_body(key)) for key in keys]
    # THEN each started its own execution, under its own name
    assert [(status, answer["duplicate"]) for status, answer in answers] == [(200, False)] * 4
    names = {answer["executionArn"].rsplit(":", 1)[1] for _, answer in answers}
    assert names == {execution_name(key) for key in keys} and len(names) == 4


@pytest.mark.exclusive  # counts every execution of the machine
def test_a_key_too_long_to_name_injectively_is_400_with_the_reason(api: dict[str, Any]) -> None:
    # GIVEN a key whose encoded name would leave a retry no room (over 53 UTF-8 bytes)
    key = f"in/{new_tag()}/" + "é" * 30
    assert execution_name(key) is None
    before = len(executions(api["stateMachineArn"]))
    status, answer = post(api, s3_body(key))
    # THEN it is refused with the reason, never cut short into another key's name
    assert (status, answer["error"]) == (400, "KeyTooLong"), answer
    assert "53 UTF-8 bytes" in answer["message"]
    assert len(executions(api["stateMachineArn"])) == before


@pytest.mark.exclusive  # counts every execution of the machine
def test_body_without_the_key_is_400_and_starts_nothing(api: dict[str, Any]) -> None:
    before = len(executions(api["stateMachineArn"]))
    status, answer = post(api, {"detail": {"object": {"size": 1}}})
    assert status == 400
    assert answer["message"]  # "Invalid request body" (the schema detail cannot be embedded)
    status, _ = post(api, b"not json at all")
    assert status == 400
    assert len(executions(api["stateMachineArn"])) == before


@pytest.mark.parametrize("attempt", ["abc", "01"])
def test_bad_attempt_header_is_400_with_a_reason(api: dict[str, Any], attempt: str) -> None:
    tag = new_tag()
    status, answer = post(api, s3_body(tag), **{"X-Attempt": attempt})
    assert status == 400
    assert "X-Attempt" in answer["message"]
    assert count(api, tag) == 0


def test_without_the_api_key_is_forbidden(api: dict[str, Any]) -> None:
    tag = new_tag()
    status, _ = http("POST", api["url"], s3_body(tag))
    assert status == 403
    assert count(api, tag) == 0


def test_retry_with_the_attempt_suffix_is_a_new_execution(api: dict[str, Any]) -> None:
    key = f"in/{new_tag()}.csv"
    body = s3_body(key)
    assert post(api, body)[0] == 200
    status, retry = post(api, body, **{"X-Attempt": "1"})
    assert (status, retry["duplicate"]) == (200, False)
    assert retry["executionArn"].endswith(f":{execution_name(key, 1)}")
    assert post(api, body, **{"X-Attempt": "1"})[0] == 409
    assert count(api, key) == 2


def test_s3_put_reaches_step_functions_through_eventbridge_and_api_gateway(
    api: dict[str, Any],
) -> None:
    # GIVEN a key with a space, a '+' and non-ASCII letters
    key = f"api/{new_tag()}/a b+c é.csv"
    # WHEN it is uploaded (S3 -> EventBridge -> API Gateway -> Step Functions)
    client("s3").put_object(Bucket=api["bucket"], Key=key, Body=b"x")
    # THEN one execution starts, named for the real key, which reaches the workflow intact
    [execution] = eventually(lambda: api_executions(api["stateMachineArn"], key))
    assert steady(lambda: count(api, key)) == 1
    document = execution_input(execution["executionArn"])
    assert document["key"] == document["body"]["detail"]["object"]["key"] == key
