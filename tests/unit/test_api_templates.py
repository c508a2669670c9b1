"""The API Gateway starter's VTL, rendered with airspeed (LocalStack's VTL engine)."""

from __future__ import annotations

import json

import pytest

from components import api_templates as t
from handlers.names import MAX_BODY, is_valid_name
from tests.unit.vtl import render

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:m"


def start_request(
    body: object, headers: dict[str, str] | None = None, key_source: str = "$.detail.object.key"
) -> dict:
    text, _ = render(t.request_template(ARN, key_source), json.dumps(body), headers)
    return json.loads(text)  # the request body must be valid JSON, whatever the input


def s3_body(key: str, **extra: object) -> dict:
    return {"detail": {"object": {"key": key}}, **extra}


def test_name_comes_from_the_key_and_the_whole_body_is_the_input() -> None:
    body = s3_body("in/a.csv", note="x")
    request = start_request(body)
    assert request == {"stateMachineArn": ARN, "name": "in_a_csv", "input": json.dumps(body)}


def test_quotes_backslashes_and_unicode_survive_as_valid_json() -> None:
    body = s3_body('it\'s "q" \\ é 中.csv', text="naïve ' \" \\ \n 中")
    request = start_request(body)
    assert json.loads(request["input"]) == body
    assert is_valid_name(request["name"])


@pytest.mark.parametrize("key", ["a b", "x" * 300, "a/b:c?d", "ünï", "   "])
def test_names_follow_the_shared_rules(key: str) -> None:
    name = start_request(s3_body(key))["name"]
    assert is_valid_name(name)
    assert len(name) <= MAX_BODY


def test_attempt_header_gives_the_retry_name() -> None:
    assert start_request(s3_body("k"), {"X-Attempt": "3"})["name"] == "k-r3"
    assert start_request(s3_body("k"), {"X-Attempt": "0"})["name"] == "k"


@pytest.mark.parametrize("attempt", ["-1", "abc", "12345", "1.5"])
def test_a_bad_attempt_starts_nothing(attempt: str) -> None:
    request = start_request(s3_body("k"), {"X-Attempt": attempt})
    assert request["input"] == t.INVALID_REQUEST  # not JSON: InvalidExecutionInput


def test_a_missing_key_starts_nothing() -> None:
    assert start_request({"detail": {}})["input"] == t.INVALID_REQUEST


def test_header_keys() -> None:
    request = start_request({"a": 1}, {"Idempotency-Key": "order/7"}, "header:Idempotency-Key")
    assert request["name"] == "order_7"


def test_documented_collision_of_replaced_characters() -> None:
    # VTL cannot hash: keys differing only in replaced characters share a name.
    assert start_request(s3_body("a/b"))["name"] == start_request(s3_body("a b"))["name"]


def test_body_schema_requires_a_non_empty_string_at_the_path() -> None:
    schema = t.body_schema("$.detail.object.key")
    assert schema["required"] == ["detail"]
    leaf = schema["properties"]["detail"]["properties"]["object"]["properties"]["key"]
    assert leaf == {"type": "string", "minLength": 1}
    assert t.body_schema("header:X") is None


def test_bad_key_sources_are_refused() -> None:
    with pytest.raises(ValueError, match="key source"):
        t.key_expression("detail.key")


def response(template: str, body: dict, request_time_ms: int = 0) -> tuple[dict, int]:
    text, override = render(template, json.dumps(body), request_time_ms=request_time_ms)
    return json.loads(text), override["status"]


def test_new_execution_is_200_not_duplicate() -> None:
    body, status = response(
        t.SUCCESS_TEMPLATE, {"executionArn": "e", "startDate": 2000.0}, 1_999_000
    )
    assert (body["duplicate"], status) == (False, 0)  # 0: the integration's own 200


def test_same_name_while_running_is_a_409_duplicate() -> None:
    body, status = response(
        t.SUCCESS_TEMPLATE, {"executionArn": "e", "startDate": 1000.0}, 2_000_000
    )
    assert (body["duplicate"], status) == (True, 409)


def test_already_exists_is_409() -> None:
    error = {"__type": "com.amazonaws.swf#ExecutionAlreadyExists", "message": 'it\'s "there"'}
    body, status = response(t.CLIENT_ERROR_TEMPLATE, error)
    assert (body["duplicate"], status) == (True, 409)
    assert body["message"] == 'it\'s "there"'


@pytest.mark.parametrize("error", ["ThrottlingException", "ExecutionLimitExceeded"])
def test_throttles_are_429_and_never_duplicates(error: str) -> None:
    body, status = response(t.CLIENT_ERROR_TEMPLATE, {"__type": error, "message": "slow down"})
    assert (body["duplicate"], body["retryable"], status) == (False, True, 429)


def test_an_invalid_request_is_400_with_a_reason() -> None:
    body, status = response(
        t.CLIENT_ERROR_TEMPLATE, {"__type": "InvalidExecutionInput", "message": "bad"}
    )
    assert status == 0  # the 4xx integration response's own 400
    assert "X-Attempt" in body["message"]


def test_a_refused_role_is_500_retryable_never_a_bad_request() -> None:
    # GIVEN IAM refusing the API's role (a deployment fault the caller cannot fix)
    error = {"__type": "AccessDeniedException", "message": "not authorized"}
    # THEN callers are told to retry (EventBridge retries 5xx), not that they sent garbage
    body, status = response(t.CLIENT_ERROR_TEMPLATE, error)
    assert (status, body["retryable"], body["duplicate"]) == (500, True, False)
    assert body["message"] == "not authorized"


def test_server_errors_say_retry() -> None:
    body = json.loads(render(t.SERVER_ERROR_TEMPLATE)[0])
    assert body["retryable"] is True
