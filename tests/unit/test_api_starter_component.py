"""ApiGatewayStarter under Pulumi mocks: integration, auth by default, S3 forwarding."""

from __future__ import annotations

import json

import pytest

from exactly_once.components.api_starter import ApiGatewayStarter, ApiGatewayStarterArgs
from tests.unit.pulumi_harness import run

WORKFLOW = {"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}


def deploy(**kwargs: object):
    if "state_machine_arn" not in kwargs:
        kwargs["definition"] = WORKFLOW
    return run(lambda: ApiGatewayStarter("api", ApiGatewayStarterArgs(**kwargs)))  # type: ignore[arg-type]


def test_post_calls_start_execution_with_the_template_and_a_scoped_role() -> None:
    mocks = deploy()
    integration = mocks.named("api-integration")
    assert integration.inputs["type"] == "AWS"
    assert integration.inputs["uri"] == "arn:aws:apigateway:us-east-1:states:action/StartExecution"
    template = integration.inputs["requestTemplates"]["application/json"]
    assert "stateMachine:api-workflow" in template
    policy = json.loads(mocks.named("api-apigw-policy").inputs["policy"])
    assert policy["Statement"] == [
        {
            "Effect": "Allow",
            "Action": ["states:StartExecution"],
            "Resource": ["arn:aws:states:us-east-1:123456789012:stateMachine:api-workflow"],
        }
    ]


def test_not_open_to_the_world_by_default() -> None:
    mocks = deploy()
    method = mocks.named("api-post")
    assert method.inputs["apiKeyRequired"] is True
    assert mocks.of_type("aws:apigateway/usagePlanKey:UsagePlanKey")


def test_iam_authorization() -> None:
    method = deploy(authorization="AWS_IAM").named("api-post")
    assert method.inputs["authorization"] == "AWS_IAM"


def test_missing_keys_are_rejected_by_a_body_validator() -> None:
    mocks = deploy()
    validator = mocks.named("api-validator")
    assert validator.inputs["validateRequestBody"] is True
    schema = json.loads(mocks.named("api-model").inputs["schema"])
    assert schema["required"] == ["detail"]


def test_s3_events_are_forwarded_to_an_iam_authorised_path_with_no_secret_in_the_target() -> None:
    mocks = deploy(bucket_name="uploads")
    target = mocks.named("api-target")
    assert target.inputs["arn"].endswith("/v1/POST/events")
    assert "httpTarget" not in target.inputs  # no key (nor any header) in its configuration
    policy = json.loads(mocks.named("api-events-policy").inputs["policy"])
    assert policy["Statement"] == [
        {"Effect": "Allow", "Action": ["execute-api:Invoke"], "Resource": [target.inputs["arn"]]}
    ]
    # the forwarded path: signed by EventBridge's role, no key; the callers' path keeps its key
    forwarded, callers = mocks.named("api-events-post"), mocks.named("api-post")
    assert (forwarded.inputs["authorization"], forwarded.inputs.get("apiKeyRequired")) == (
        "AWS_IAM",
        False,
    )
    assert (callers.inputs["authorization"], callers.inputs["apiKeyRequired"]) == ("NONE", True)
    # both start through the same template and role
    templates = {
        mocks.named(n).inputs["requestTemplates"]["application/json"]
        for n in ("api-integration", "api-events-integration")
    }
    assert len(templates) == 1


def test_forwarding_works_with_iam_authorization_too() -> None:
    mocks = deploy(bucket_name="uploads", authorization="AWS_IAM")
    assert mocks.named("api-post").inputs["authorization"] == "AWS_IAM"
    assert mocks.named("api-target").inputs["arn"].endswith("/POST/events")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"authorization": "NONE"}, "never open"),
        ({"state_machine_type": "EXPRESS"}, "EXPRESS"),
        ({"key_source": "key"}, "key source"),
        ({"key_source": "header:K", "bucket_name": "b"}, "body path"),
    ],
)
def test_bad_args_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ApiGatewayStarterArgs(**kwargs, definition=WORKFLOW).validate()


def test_a_starter_without_a_target_is_refused_naming_both_ways_to_give_one() -> None:
    with pytest.raises(ValueError, match="needs a target") as refused:
        ApiGatewayStarterArgs().validate()
    assert "state_machine_arn" in str(refused.value) and "definition" in str(refused.value)


def served(**kwargs: object) -> str:
    return str(deploy(**kwargs).named("api-deployment").inputs["triggers"]["fingerprint"])


def test_a_change_to_anything_the_stage_serves_makes_a_new_deployment() -> None:
    other = "arn:aws:states:us-east-1:123456789012:stateMachine:other"
    base = served(state_machine_arn="arn:aws:states:us-east-1:123456789012:stateMachine:m")
    assert base == served(state_machine_arn="arn:aws:states:us-east-1:123456789012:stateMachine:m")
    assert served(state_machine_arn=other) != base  # the template names the machine
    assert served(key_source="$.id") != served()  # the template and the validation
