"""IAM, enforced as AWS enforces it (LocalStack host mode, tests/e2e/iam.py).

One negative test per kind of principal: a Lambda execution role, a state machine role,
an API Gateway credentials role and a resource-based policy each lose one permission the
code needs; the call is refused with AccessDenied on the real path, and the event is
retried or dead-lettered with the reason, never counted as done. Then S3's rule for a
missing key (403 without s3:ListBucket), which the ETL's least-privilege role is built for.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlparse

import boto3
import pytest
from botocore.exceptions import ClientError

from exactly_once.ops.checkpoints import Checkpoints
from tests.e2e import iam
from tests.e2e.retries import retry_warning, started_once_by_the_retry
from tooling import events
from tooling.clients import (
    ENDPOINT,
    api_executions,
    client,
    dead_letters,
    eventually,
    executions,
    fire_record,
    http,
    invoke,
    invoke_raw,
    keys,
    new_tag,
    steady,
)

# Each test takes a permission away from a role (or counts every denial so far): no other
# test may run meanwhile (tests/e2e/session.py).
pytestmark = pytest.mark.exclusive


@pytest.fixture(autouse=True)
def enforced(stack: dict[str, Any]) -> None:
    iam.require_enforcement()


def function_role(function_name: str) -> str:
    return client("lambda").get_function_configuration(FunctionName=function_name)["Role"]


def integration(api_url: str, path: str, method: str) -> dict[str, Any]:
    """The deployed integration behind `method path` of the REST API at `api_url`."""
    api_id = urlparse(api_url).path.split("/")[3]  # /_aws/execute-api/<id>/<stage>/...
    gateway = client("apigateway")
    [resource] = [r for r in gateway.get_resources(restApiId=api_id)["items"] if r["path"] == path]
    return gateway.get_integration(restApiId=api_id, resourceId=resource["id"], httpMethod=method)


# -- a Lambda execution role ------------------------------------------------------------------
def test_a_starter_refused_start_execution_is_retried_never_lost(stack: dict[str, Any]) -> None:
    out = stack["nameDedup"]
    tag = new_tag()
    role = function_role(out["functionName"])
    with iam.expect_denials(iam.role_name(role), "states:StartExecution") as denied:
        # GIVEN the starter's role without states:StartExecution
        with iam.role_policy_without(role, "states:StartExecution"):
            # WHEN an object is uploaded (S3 -> EventBridge -> the starter)
            client("s3").put_object(Bucket=out["bucket"], Key=f"iam/{tag}.csv", Body=b"x")
            # THEN StartExecution is refused with AccessDenied, and the starter raised (so
            # Lambda retries it) instead of calling it a duplicate or dead-lettering it
            eventually(denied, timeout=60)
            warned = retry_warning(out, tag)
            assert "AccessDeniedException" in warned and "will be retried" in warned
            assert executions(out["stateMachineArn"], tag) == []
        # AND once the role is fixed, Lambda's asynchronous retry starts it, once
        started_once_by_the_retry(out, tag)


# -- a state machine role -------------------------------------------------------------------
def test_a_workflow_refused_a_step_fails_there_and_resumes_after_the_fix(
    stack: dict[str, Any],
) -> None:
    out = stack["resumable"]
    ops = Checkpoints(out["table"], out["stateMachineArn"], ENDPOINT)
    sfn = client("stepfunctions")
    role = sfn.describe_state_machine(stateMachineArn=out["stateMachineArn"])["roleArn"]
    key = new_tag()

    def finished(arn: str) -> dict[str, Any]:
        return eventually(
            lambda: (d := sfn.describe_execution(executionArn=arn))["status"] != "RUNNING" and d,
            timeout=60,
        )

    with iam.expect_denials(iam.role_name(role), "lambda:InvokeFunction"):
        # GIVEN the state machine's role may not invoke the second step
        with iam.role_policy_without(role, "lambda:InvokeFunction", "-charge-"):
            first = ops.rerun(key, {"orderId": key})
            failed = finished(first.execution_arn)
        # THEN the run fails at that step with AccessDenied, the first step checkpointed
        assert failed["status"] == "FAILED"
        assert "AccessDenied" in failed["error"], failed
        progress = ops.show(key)
        assert progress is not None
        assert {s for s, e in progress["steps"].items() if e.get("done")} == {"register"}
    # WHEN the role is fixed and the run re-run from the top
    done = finished(ops.rerun(key, {"orderId": key}).execution_arn)
    # THEN it completes, and the first step (done before the denial) did not run again
    assert done["status"] == "SUCCEEDED"
    assert json.loads(done["output"])["results"]["register"]["output"]["calls"] == 1


def test_a_scheduler_claim_refused_by_iam_is_retried_and_fires_once_after_the_fix(
    scheduler: dict[str, Any],
) -> None:
    out = scheduler
    sfn = client("stepfunctions")
    role = client("lambda").get_function_configuration(FunctionName=out["slotFunction"])["Role"]
    headers = {"x-api-key": out["apiKey"]}
    publish = time.time() + 3  # too near to join its second's slot: a slot of one
    # GIVEN the slot function's role may not write the table around a message's time
    with (
        iam.expect_denials(iam.role_name(role), "dynamodb:UpdateItem") as denied,
        iam.role_policy_without(role, "dynamodb:UpdateItem"),
    ):
        status, created = http(
            "POST", out["url"], {"publishTime": publish, "channel": "demo"}, headers
        )
        assert status == 201
        # WHEN its claim is refused (AccessDenied: the claim's own retries, then the
        # Fire's, never a message stranded STANDBY until the sweep, nor FAILED)
        eventually(denied, timeout=90)
        time.sleep(5)
    # (the permission restored)
    # THEN a retry of its Fire claims it, and it fires once, DONE, never early
    record = eventually(
        lambda: fire_record(out["firesTables"]["demo"], created["id"]), timeout=240, interval=2
    )
    assert record["fired_at"] >= publish
    assert (
        steady(lambda: fire_record(out["firesTables"]["demo"], created["id"]), seconds=2)["fires"]
        == 1
    )
    get = f"{out['url']}/{created['id']}"
    assert eventually(lambda: http("GET", get, None, headers)[1]["status"] == "DONE")
    [execution] = executions(out["stateMachineArn"], created["id"])
    assert eventually(
        lambda: (
            sfn.describe_execution(executionArn=execution["executionArn"])["status"] == "SUCCEEDED"
        )
    )


# -- an API Gateway credentials role -----------------------------------------------------------
def test_an_api_whose_role_is_refused_answers_500_and_the_retry_starts_once(
    stack: dict[str, Any],
) -> None:
    out = stack["apiStarter"]
    tag = new_tag()
    role = integration(out["url"], "/start", "POST")["credentials"]
    key = f"iam/{tag}.csv"
    body = {"detail": {"object": {"key": key}}}
    headers = {"x-api-key": out["apiKey"]}
    with iam.expect_denials(iam.role_name(role), "states:StartExecution") as denied:
        # GIVEN the API's credentials role without states:StartExecution
        with iam.role_policy_without(role, "states:StartExecution"):
            # WHEN a request comes in
            status, answer = http("POST", out["url"], body, headers)
        # THEN it is refused by IAM and answered 500 retryable (EventBridge retries 5xx),
        # not 400: the caller's request was fine
        assert denied()
    assert (status, answer["retryable"], answer["duplicate"]) == (500, True, False), answer
    assert "AccessDenied" in answer["error"]
    assert api_executions(out["stateMachineArn"], key) == []
    # AND the caller's retry, once the role is fixed, starts it once
    status, answer = http("POST", out["url"], body, headers)
    assert (status, answer["duplicate"]) == (200, False)
    assert steady(lambda: len(api_executions(out["stateMachineArn"], key)), seconds=2) == 1


# -- a resource-based policy -------------------------------------------------------------------
def test_an_api_not_permitted_to_invoke_its_function_is_500_and_the_retry_registers_once(
    scheduler: dict[str, Any],
) -> None:
    function_arn = integration(scheduler["url"], "/messages", "POST")["uri"].split("/functions/")[1]
    function_arn = function_arn.removesuffix("/invocations")
    tag = new_tag()
    body = {"publishTime": time.time() + 3600, "channel": "demo", "parameters": {"tag": tag}}
    headers = {"x-api-key": scheduler["apiKey"], "Idempotency-Key": f"iam-{tag}"}
    with iam.expect_denials("apigateway.amazonaws.com", "lambda:InvokeFunction") as denied:
        # GIVEN the function's resource policy no longer lets API Gateway invoke it
        with iam.function_permission_removed(function_arn, "apigateway.amazonaws.com"):
            # WHEN a message is registered
            status, answer = http("POST", scheduler["url"], body, headers)
        # THEN Lambda refuses API Gateway, which answers 500 (so the client retries)
        assert denied()
    assert status == 500, answer
    # AND the client's retry with the same Idempotency-Key registers it, once
    status, created = http("POST", scheduler["url"], body, headers)
    assert status == 201, created
    status, again = http("POST", scheduler["url"], body, headers)
    assert (status, again["id"]) == (200, created["id"])
    http("DELETE", f"{scheduler['url']}/{created['id']}", None, headers)


# -- S3: a missing key is 403 to whoever may not list the bucket -------------------------------
CSV = b"id,name,amount\n1,alpha,2.5\n"


def notification(bucket: str, key: str, put: dict[str, Any]) -> dict[str, Any]:
    return events.notification(bucket, key, put["VersionId"], put["ETag"])


def test_without_list_bucket_a_missing_output_is_403_and_the_delivery_is_retried(
    stack: dict[str, Any],
) -> None:
    out = stack["etl"]["etl-deterministic"]
    role = function_role(out["functionName"])
    tag = new_tag()
    key = f"in/{tag}.csv"
    # GIVEN the deterministic ETL's role without s3:ListBucket on its output bucket
    with (
        iam.expect_denials(iam.role_name(role), "s3:ListBucket") as denied,
        iam.role_policy_without(role, "s3:ListBucket", out["outputBucket"]),
    ):
        put = client("s3").put_object(Bucket=out["inputBucket"], Key=key, Body=CSV)
        # WHEN a delivery looks for its not yet published output
        ok, error = invoke_raw(out["functionName"], notification(out["inputBucket"], key, put))
        # THEN S3 answers 403, not 404, as AWS does; the delivery fails retryably and
        # nothing is written or reported done
        assert not ok and "403" in error["errorMessage"], error
        assert denied()
        assert keys(out["outputBucket"], f"out/in/{tag}") == []
    # AND with the permission back (what the component grants), the retry writes it once
    result = invoke(out["functionName"], notification(out["inputBucket"], key, put))
    assert result["results"][0]["status"] in ("WRITTEN", "DUPLICATE")  # or its own retry won
    assert len(steady(lambda: keys(out["outputBucket"], f"out/in/{tag}"), seconds=2)) == 1


def test_a_deleted_input_version_is_dead_lettered_with_the_reason(stack: dict[str, Any]) -> None:
    out = stack["etl"]["etl-control"]
    role = function_role(out["functionName"])
    tag = new_tag()
    key = f"in/{tag}.csv"
    s3 = client("s3")
    # GIVEN an upload whose own delivery fails (its role may not read versions for now)
    with (
        iam.expect_denials(iam.role_name(role), "s3:GetObjectVersion") as denied,
        iam.role_policy_without(role, "s3:GetObjectVersion"),
    ):
        put = s3.put_object(Bucket=out["inputBucket"], Key=key, Body=CSV)
        eventually(denied, timeout=90)
        # AND the version is deleted before the delivery is retried
        s3.delete_object(Bucket=out["inputBucket"], Key=key, VersionId=put["VersionId"])
    # WHEN the delivery is retried
    result = invoke(out["functionName"], notification(out["inputBucket"], key, put))
    # THEN S3 says the version is gone (404: the role may list the input bucket), and the
    # object is rejected with that reason and dead-lettered once, never retried forever
    [rejected] = result["results"]
    assert rejected["status"] == "REJECTED" and "is gone" in rejected["reason"], rejected
    [message] = eventually(lambda: dead_letters(out["dlqUrl"], tag))
    assert "is gone" in message["reason"]
    assert keys(out["outputBucket"], f"out/in/{tag}") == []


def test_nothing_a_test_did_not_expect_was_denied_so_far(stack: dict[str, Any]) -> None:
    # (The session's end checks the same for the whole run; this says it next to the tests.)
    assert iam.unexpected(iam.report()) == []


# (service, the call the starter's role was never granted, AWS's error code, HTTP status)
REFUSALS = {
    "s3": (
        "s3:PutObject",
        lambda c, out: c.put_object(Bucket=out["bucket"], Key="x", Body=b"x"),
        ("AccessDenied", 403),
    ),
    "dynamodb": (
        "dynamodb:GetItem",
        lambda c, out: c.get_item(TableName="any-table", Key={"pk": {"S": "x"}}),
        ("AccessDeniedException", 400),
    ),
    "stepfunctions": (
        "states:ListExecutions",
        lambda c, out: c.list_executions(stateMachineArn=out["stateMachineArn"]),
        ("AccessDeniedException", 400),
    ),
    "lambda": (
        "lambda:InvokeFunction",
        lambda c, out: c.invoke(FunctionName=out["functionName"], Payload=b"{}"),
        ("AccessDeniedException", 403),
    ),
}


@pytest.mark.parametrize("service", REFUSALS)
def test_a_denied_call_gets_the_services_access_denied_error(
    stack: dict[str, Any], service: str
) -> None:
    action, call, answer = REFUSALS[service]
    # GIVEN the name-dedup starter's own credentials, as its sandbox holds them
    out = stack["nameDedup"]
    role = function_role(out["functionName"])
    creds = client("sts").assume_role(RoleArn=role, RoleSessionName=f"iam-{new_tag()}")
    session = boto3.session.Session(
        aws_access_key_id=creds["Credentials"]["AccessKeyId"],
        aws_secret_access_key=creds["Credentials"]["SecretAccessKey"],
        aws_session_token=creds["Credentials"]["SessionToken"],
        region_name="us-east-1",
    )
    with iam.expect_denials(iam.role_name(role), action) as denied:
        # WHEN it makes a call its role does not grant
        with pytest.raises(ClientError) as refused:
            call(session.client(service, endpoint_url=ENDPOINT), out)
        # THEN IAM refuses it, and the service answers with AWS's AccessDenied error for it
        assert len(denied()) == 1
    error = refused.value.response
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == answer
