"""A REST API's deployment fingerprint covers everything the stage serves."""

from __future__ import annotations

import pulumi_aws as aws

from exactly_once.components.rest_api import fingerprint
from tests.unit.pulumi_harness import run


def deployed_fingerprint(uri: str, template: str, credentials: str) -> str:
    def program() -> None:
        integration = aws.apigateway.Integration(
            "i",
            rest_api="api",
            resource_id="r",
            http_method="POST",
            type="AWS",
            integration_http_method="POST",
            uri=uri,
            credentials=credentials,
            request_templates={"application/json": template},
        )
        aws.apigateway.Deployment(
            "d", rest_api="api", triggers={"fingerprint": fingerprint([integration])}
        )

    return str(run(program).named("d").inputs["triggers"]["fingerprint"])


def test_the_fingerprint_changes_with_the_target_the_template_and_the_role() -> None:
    base = ("arn:aws:apigateway:us-east-1:states:action/StartExecution", "{}", "arn:role/a")
    first = deployed_fingerprint(*base)
    assert first == deployed_fingerprint(*base)
    assert len(first) == 64
    assert deployed_fingerprint("arn:other", *base[1:]) != first
    assert deployed_fingerprint(base[0], '{"x": 1}', base[2]) != first
    assert deployed_fingerprint(*base[:2], "arn:role/b") != first


def test_the_scheduler_redeploys_by_fingerprint_not_a_constant() -> None:
    from exactly_once.components.scheduler import Scheduler, SchedulerArgs

    arn = "arn:aws:lambda:us-east-1:123456789012:function:t"
    mocks = run(lambda: Scheduler("s", SchedulerArgs({"demo": arn})))
    triggers = mocks.named("s-deployment").inputs["triggers"]
    assert set(triggers) == {"fingerprint"} and len(triggers["fingerprint"]) == 64
