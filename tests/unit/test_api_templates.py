"""The API Gateway starter's VTL, rendered with airspeed (LocalStack's VTL engine)."""

from __future__ import annotations

import json

import pytest

from exactly_once.components import api_templates as t
from exactly_once.handlers.names import MAX_BODY, is_valid_name
from tests.vtl import render

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:m"


def start_request(
    body: object,
    headers: dict[str, str] | None = None,
    key_source: str = "$.detail.object.key",
    request_id: str = "req-1",
) -> dict:
    text, _ = render(
        t.request_template(ARN, key_source), json.dumps(body), headers, request_id=request_id
    )
    return json.loads(text)  # the request body must be valid JSON, whatever the input


def s3_body(key: str, **extra: object) -> dict:
    return {"detail": {"object": {"key": key}}, **extra}


def name_of(key: str, attempt: int = 0) -> str:
    headers = {"X-Attempt": str(attempt)} if attempt else None
    return start_request(s3_body(key), headers)["name"]


def test_the_input_is_the_key_attempt_request_id_and_body() -> None:
    body = s3_body("in/a.csv", note="x")
    request = start_request(body, request_id="r-7")
    assert request["stateMachineArn"] == ARN
    assert json.loads(request["input"]) == {
        "key": "in/a.csv",
        "attempt": 0,
        "requestId": "r-7",
        "body": body,
    }


def test_two_requests_never_have_the_same_input() -> None:
    # so the second one for a name gets ExecutionAlreadyExists, never a same-input 200
    first, second = (start_request(s3_body("k"), request_id=r) for r in ("r-1", "r-2"))
    assert first["name"] == second["name"] and first["input"] != second["input"]


def test_quotes_backslashes_and_unicode_survive_as_valid_json() -> None:
    key = 'it\'s "q" \\ é 中.csv'
    body = s3_body(key, text="naïve ' \" \\ \n 中")
    document = json.loads(start_request(body)["input"])
    assert (document["key"], document["body"]) == (key, body)


# Keys the old sanitizing template merged (a/b, a b, a_b; cut at 74), and the edges of the
# new rule: what is verbatim, what is encoded, what is refused.
KEYS = [
    "a/b",
    "a b",
    "a_b",
    "a-b",
    "a.b",
    "in/données/é.csv",
    "中",
    "k",
    "k-r1",
    "k--x",
    "--k",
    "-",
    "_",
    "x" * 74,
    "x" * 75,
    "é" * 26,  # 52 bytes: the longest encodable
    "é" * 27,  # 54 bytes: too long
    "a" * 53 + "/",  # 54 bytes with a slash: too long
    "a" * 52 + "/",  # 53 bytes: fits
]


@pytest.mark.parametrize("key", KEYS)
def test_the_template_names_keys_as_the_python_rule_does(key: str) -> None:
    for attempt in (0, 1, 9999):
        expected = t.execution_name(key, attempt)
        name = name_of(key, attempt)
        if expected is None:
            assert len(name) > 80  # Step Functions refuses it: a 400, nothing started
        else:
            assert name == expected and is_valid_name(name)


def test_no_two_keys_or_attempts_share_a_name() -> None:
    names = {
        (key, attempt): t.execution_name(key, attempt)
        for key in KEYS + [f"{k}-r2" for k in KEYS] + [f"{k}_" for k in KEYS]
        for attempt in (0, 1, 2, 12)
    }
    named = [name for name in names.values() if name is not None]
    assert len(named) == len(set(named))


def test_safe_keys_stay_readable_and_others_are_encoded() -> None:
    assert t.execution_name("orders_7-a") == "orders_7-a"
    assert t.execution_name("orders_7-a", 3) == "orders_7-a-r3"
    assert t.execution_name("a/b") == "--YS9i_"
    assert t.execution_name("k-r1") != "k-r1"  # else attempt 1 of "k" would share it


def test_what_fits_is_what_the_docs_say() -> None:
    assert t.execution_name("x" * MAX_BODY) is not None
    assert t.execution_name("é" * (t.ENCODED_KEY_BYTES // 2)) is not None
    assert t.execution_name("a" * (t.ENCODED_KEY_BYTES + 1)) is not None  # safe: verbatim
    assert t.execution_name("/" * t.ENCODED_KEY_BYTES) is not None
    assert t.execution_name("/" * (t.ENCODED_KEY_BYTES + 1)) is None


def test_attempt_header_gives_the_retry_name() -> None:
    assert name_of("k", 3) == "k-r3"
    assert start_request(s3_body("k"), {"X-Attempt": "0"})["name"] == "k"


@pytest.mark.parametrize("attempt", ["-1", "abc", "12345", "1.5", "01", "007"])
def test_a_bad_attempt_starts_nothing(attempt: str) -> None:
    request = start_request(s3_body("k"), {"X-Attempt": attempt})
    assert request["input"] == t.INVALID_REQUEST  # not JSON: InvalidExecutionInput
    # under a name of its own: never the key's execution's (a 409 if the name is checked first)
    assert request["name"].startswith(f"{t.INVALID_REQUEST}-") and request["name"] != "k"


@pytest.mark.parametrize(
    "attempt",
    ['1", "name": "chosen', '1","name":"chosen', "1\\", '0", "stateMachineArn": "arn:other'],
)
def test_no_header_value_can_add_or_change_a_key_of_the_request(attempt: str) -> None:
    text, _ = render(t.request_template(ARN, "$.k"), json.dumps({"k": "k"}), {"X-Attempt": attempt})

    def no_duplicates(pairs: list[tuple[str, object]]) -> dict:
        keys = [key for key, _ in pairs]
        assert len(keys) == len(set(keys)), f"duplicate keys {keys} in {text}"
        return dict(pairs)

    request = json.loads(text, object_pairs_hook=no_duplicates)
    assert set(request) == {"stateMachineArn", "name", "input"}
    assert request["stateMachineArn"] == ARN
    assert request["name"].startswith(f"{t.INVALID_REQUEST}-")  # the request's own
    assert request["input"] == t.INVALID_REQUEST  # refused: starts nothing


def test_a_missing_key_starts_nothing() -> None:
    assert start_request({"detail": {}})["input"] == t.INVALID_REQUEST


def test_header_keys() -> None:
    request = start_request({"a": 1}, {"Idempotency-Key": "order/7"}, "header:Idempotency-Key")
    assert request["name"] == t.execution_name("order/7")


def test_body_schema_requires_a_non_empty_string_at_the_path() -> None:
    schema = t.body_schema("$.detail.object.key")
    assert schema["required"] == ["detail"]
    leaf = schema["properties"]["detail"]["properties"]["object"]["properties"]["key"]
    assert leaf == {"type": "string", "minLength": 1}
    assert t.body_schema("header:X") is None


def test_bad_key_sources_are_refused() -> None:
    with pytest.raises(ValueError, match="key source"):
        t.key_expression("detail.key")


def response(template: str, body: dict) -> tuple[dict, int]:
    text, override = render(template, json.dumps(body))
    return json.loads(text), override["status"]


def test_a_started_execution_is_200_not_duplicate() -> None:
    body, status = response(t.SUCCESS_TEMPLATE, {"executionArn": "e", "startDate": 2000.5})
    assert (body, status) == ({"executionArn": "e", "startDate": 2000.5, "duplicate": False}, 0)


def test_already_exists_is_409() -> None:
    error = {"__type": "com.amazonaws.swf#ExecutionAlreadyExists", "message": 'it\'s "there"'}
    body, status = response(t.CLIENT_ERROR_TEMPLATE, error)
    assert (body["duplicate"], status) == (True, 409)
    assert body["message"] == 'it\'s "there"'


@pytest.mark.parametrize("error", ["ThrottlingException", "ExecutionLimitExceeded"])
def test_throttles_are_429_and_never_duplicates(error: str) -> None:
    body, status = response(t.CLIENT_ERROR_TEMPLATE, {"__type": error, "message": "slow down"})
    assert (body["duplicate"], body["retryable"], status) == (False, True, 429)


@pytest.mark.parametrize("error", ["InvalidName", "ValidationException"])
def test_a_key_too_long_to_name_is_400_with_the_reason(error: str) -> None:
    body, status = response(t.CLIENT_ERROR_TEMPLATE, {"__type": error, "message": "long"})
    assert status == 0  # the 4xx integration response's own 400
    assert (body["error"], body["duplicate"]) == ("KeyTooLong", False)
    assert "53 UTF-8 bytes" in body["message"]


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


def substitute(template: str, variables: dict[str, str]) -> str:
    """A gateway response as AWS renders it: variable substitution only, no VTL."""
    for name, value in sorted(variables.items(), key=lambda item: -len(item[0])):
        template = template.replace(f"${name}", value)
    return template


@pytest.mark.parametrize(
    "message", ["Invalid request body", 'a "quoted" \\ message', "Invalid request parameters"]
)
def test_the_validation_gateway_response_is_valid_json_by_substitution_alone(message: str) -> None:
    template = t.VALIDATION_ERROR_TEMPLATE
    assert "#" not in template and "$util" not in template  # nothing AWS would not run
    body = substitute(
        template,
        {
            # AWS's documented value: "the quoted value of $context.error.message"
            "context.error.messageString": json.dumps(message),
            "context.error.responseType": "BAD_REQUEST_BODY",
        },
    )
    assert json.loads(body) == {
        "duplicate": False,
        "error": "BadRequest",
        "type": "BAD_REQUEST_BODY",
        "message": message,
    }
