"""Every policy of every component in the `local` stack (all patterns) is least privilege."""

from __future__ import annotations

import json

from tests.unit.pulumi_harness import run_stack

POLICY_TYPES = ("aws:iam/rolePolicy:RolePolicy", "aws:sqs/queuePolicy:QueuePolicy")


def statements() -> list[tuple[str, dict]]:
    mocks = run_stack("local")
    found = []
    for typ in POLICY_TYPES:
        for resource in mocks.of_type(typ):
            for statement in json.loads(resource.inputs["policy"])["Statement"]:
                found.append((resource.name, statement))
    return found


def as_list(value: object) -> list:
    return value if isinstance(value, list) else [value]


def test_there_are_policies_to_check() -> None:
    assert len(statements()) >= 4


def test_no_wildcard_actions_or_resources() -> None:
    for name, statement in statements():
        for action in as_list(statement["Action"]):
            assert action != "*" and not action.endswith(":*"), (name, action)
        for resource in as_list(statement["Resource"]):
            assert resource != "*", (name, statement)
            assert resource.startswith("arn:"), (name, resource)
