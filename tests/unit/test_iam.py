"""Every policy of every stack (`Pulumi.*.yaml`) is least privilege and reads right to AWS.

Policies are synthesized under mocks that hand out ARNs in AWS's real shapes
(tests/unit/pulumi_harness.py), then linted with parliament, which knows each action's
resource types. The e2e suite checks the same policies at run time, enforced by IAM in
LocalStack (localstack/host_executor/host_executor/iam.py).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
from parliament import analyze_policy_string

from exactly_once.components.platform import STATE_MACHINE_LOGGING, STATE_MACHINE_TRACING
from tests.unit.pulumi_harness import ROOT, run_stack

POLICY_TYPES = ("aws:iam/rolePolicy:RolePolicy", "aws:sqs/queuePolicy:QueuePolicy")
STACKS = sorted(p.name.split(".")[1] for p in Path(ROOT).glob("Pulumi.*.yaml"))
# Actions AWS grants only on "*" (no resource-level permissions), per the Service
# Authorization Reference; parliament requires "*" for them too.
STAR_ONLY = {"dynamodb:ListStreams"}
# and what tracing and Step Functions logging add (components/platform.py)
STAR_ONLY |= {*STATE_MACHINE_TRACING, *STATE_MACHINE_LOGGING}


@functools.cache
def policies(stack: str) -> tuple[tuple[str, str], ...]:
    mocks = run_stack(stack)
    return tuple(
        (resource.name, resource.inputs["policy"])
        for typ in POLICY_TYPES
        for resource in mocks.of_type(typ)
    )


def statements(stack: str) -> list[tuple[str, dict]]:
    return [
        (name, statement)
        for name, policy in policies(stack)
        for statement in json.loads(policy)["Statement"]
    ]


def as_list(value: object) -> list:
    return value if isinstance(value, list) else [value]


def test_every_stack_is_checked() -> None:
    assert {"local", "etl", "name-dedup", "api-starter", "scheduler", "resumable"} <= set(STACKS)


@pytest.mark.parametrize("stack", STACKS)
def test_there_are_policies_to_check(stack: str) -> None:
    assert len(statements(stack)) >= 3


@pytest.mark.parametrize("stack", STACKS)
def test_no_wildcard_actions_and_star_only_where_aws_allows_nothing_else(stack: str) -> None:
    for name, statement in statements(stack):
        actions = as_list(statement["Action"])
        for action in actions:
            assert action != "*" and not action.endswith(":*"), (name, action)
        for resource in as_list(statement["Resource"]):
            if resource == "*":
                assert set(actions) <= STAR_ONLY, (name, statement)
            else:
                assert resource.startswith("arn:"), (name, resource)


# Lambda's durable-execution actions (December 2025) are newer than parliament's action
# database; the Lambda developer guide's durable-functions security page grants them.
DURABLE_ACTIONS = {
    "lambda:CheckpointDurableExecution",
    "lambda:GetDurableExecutionState",
    "lambda:GetDurableExecution",
    "lambda:ListDurableExecutionsByFunction",
    "lambda:StopDurableExecution",  # the deploying identity's (docs/deploy-policy.json)
}


def known_false_positive(finding: object) -> bool:
    """parliament's mistakes on our policies (checked against the Service Authorization
    Reference): it splits ARNs at every ':', so a DynamoDB stream ARN, whose label is a
    timestamp (table/T/stream/2026-01-01T00:00:00.000), matches none of its formats; it
    knows states:DescribeExecution only under express-execution ARNs, while AWS also lists
    `execution:` ARNs of STANDARD machines for it; it does not know DURABLE_ACTIONS."""
    if finding.issue == "UNKNOWN_ACTION":  # type: ignore[attr-defined]
        unknown = str(finding.detail).removeprefix("Unknown action ")  # type: ignore[attr-defined]
        return unknown in DURABLE_ACTIONS
    if finding.issue != "RESOURCE_MISMATCH":  # type: ignore[attr-defined]
        return False
    return all(
        (entry["action"].startswith("dynamodb:") and "/stream/" in entry["required_format"])
        or entry["action"] == "states:DescribeExecution"
        for entry in finding.detail  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize("stack", STACKS)
def test_parliament_finds_nothing(stack: str) -> None:
    findings = [
        (name, finding.issue, finding.detail)
        for name, policy in policies(stack)
        for finding in analyze_policy_string(policy).findings
        if not known_false_positive(finding)
    ]
    assert findings == []


def test_parliament_sees_a_stream_action_granted_on_the_stream_as_wrong() -> None:
    # GIVEN the mistake parliament found in the scheduler starter's role before: ListStreams
    # granted on the stream ARN
    policy = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Action": ["dynamodb:ListStreams"],
                    "Resource": ["arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/x"],
                }
            ],
        }
    )
    # THEN the lint reports it (so test_parliament_finds_nothing would catch it again)
    [finding] = analyze_policy_string(policy).findings
    assert finding.issue == "RESOURCE_MISMATCH" and not known_false_positive(finding)
