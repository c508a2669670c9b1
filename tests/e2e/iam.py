"""IAM enforcement in the e2e suite: LocalStack's report, the denials tests expect, and
policies taken away for a negative test and given back after.

LocalStack in host mode enforces IAM (localstack/host_executor/host_executor/iam.py);
`GET /_localstack/exactly-once/iam` tells what it checked, allowed, denied and left
unchecked. The session fails on a denial no test declared with `expect_denials`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

from tests.e2e import session
from tooling.clients import IAM_REPORT_URL, client
from tooling.clients import iam_report as report


@dataclasses.dataclass
class Expected:
    """Denials of `action` to principals containing `principal`, while a test provoked them
    (report sequence numbers after `after`, up to `until`)."""

    principal: str
    action: str
    after: int
    until: float = float("inf")

    def covers(self, denial: dict[str, Any]) -> bool:
        return (
            self.principal in denial["principal"]
            and denial["action"] == self.action
            and self.after < denial["seq"] <= self.until
        )


def reset() -> None:
    request = urllib.request.Request(IAM_REPORT_URL, method="DELETE")
    with contextlib.suppress(urllib.error.HTTPError), urllib.request.urlopen(request, timeout=10):
        pass


def require_enforcement() -> None:
    mode = report()["mode"]
    assert mode == "enforce", (
        f"IAM enforcement is {mode!r}: start LocalStack with `bash localstack/up` "
        "(EXACTLY_ONCE_IAM unset or 'enforce') to run the negative tests"
    )


def role_name(role_arn: str) -> str:
    return role_arn.rsplit("/", 1)[-1]


def last_seq() -> int:
    return int(report().get("totals", {}).get("denied", 0))


@contextlib.contextmanager
def expect_denials(principal: str, action: str) -> Iterator[Callable[[], list[dict]]]:
    """Declare the denials a test provokes inside this block; yields a probe of them."""
    expected = Expected(principal, action, last_seq())
    try:
        yield lambda: [d for d in report().get("denials", []) if expected.covers(d)]
    finally:
        expected.until = last_seq()
        session.expect(dataclasses.asdict(expected))  # for every process of the run


def unexpected(found: dict[str, Any]) -> list[dict[str, Any]]:
    """The denials no test of this run declared (in whichever process it ran)."""
    declared = [Expected(**record) for record in session.expected()]
    return [d for d in found.get("denials", []) if not any(e.covers(d) for e in declared)]


def summary(found: dict[str, Any]) -> list[str]:
    """The report as lines for the end of the test run."""
    if found.get("mode") == "off":
        return ["IAM enforcement is off (EXACTLY_ONCE_IAM=off): nothing was checked"]
    totals = found["totals"]
    surprising = unexpected(found)
    lines = [
        f"IAM ({found['mode']}): {totals['checked']} calls checked, {totals['allowed']} "
        f"allowed, {totals['denied']} denied ({len(surprising)} unexpected), "
        f"{totals['unchecked']} unchecked, {totals['exempt']} by the exempt admin (tests, deploy)",
        "  by principal (checked / allowed / denied):",
    ]
    for name, counts in sorted(found["principals"].items()):
        short = name.split(":", 5)[-1]
        lines.append(
            f"    {short}: {counts.get('checked', 0)} / {counts.get('allowed', 0)} / "
            f"{counts.get('denied', 0)}"
        )
    lines.append("  unchecked, by reason:")
    lines += [f"    {count:6d}  {reason}" for reason, count in found["unchecked"].items()]
    for denial in found["denials"]:
        mark = "UNEXPECTED " if denial in surprising else "expected "
        lines.append(f"  {mark}denial: {denial['operation']}: {denial['reason']}")
    return lines


# -- taking a permission away, and giving it back --------------------------------------------
@contextlib.contextmanager
def role_policy_without(role_arn: str, action: str, resource: str = "") -> Iterator[None]:
    """The role's inline policies without `action` (on resources containing `resource`,
    or everywhere), restored on exit."""
    iam = client("iam")
    name = role_name(role_arn)
    originals = {
        policy: iam.get_role_policy(RoleName=name, PolicyName=policy)["PolicyDocument"]
        for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]
    }
    removed = 0
    for policy, document in originals.items():
        patched = json.loads(json.dumps(document))
        for statement in patched["Statement"]:
            if action not in statement["Action"]:
                continue
            if not resource:
                statement["Action"] = [a for a in statement["Action"] if a != action]
                removed += 1
                continue
            kept = [r for r in statement["Resource"] if resource not in r]
            removed += len(statement["Resource"]) - len(kept)
            statement["Resource"] = kept
        patched["Statement"] = [s for s in patched["Statement"] if s["Action"] and s["Resource"]]
        if patched["Statement"]:
            iam.put_role_policy(
                RoleName=name, PolicyName=policy, PolicyDocument=json.dumps(patched)
            )
        else:  # IAM refuses a policy with no statement
            iam.delete_role_policy(RoleName=name, PolicyName=policy)
    assert removed, f"{name} grants no {action} to take away"
    try:
        yield
    finally:
        for policy, document in originals.items():
            iam.put_role_policy(
                RoleName=name, PolicyName=policy, PolicyDocument=json.dumps(document)
            )


@contextlib.contextmanager
def function_permission_removed(function_arn: str, service: str) -> Iterator[None]:
    """The function's resource-policy statements for `service` removed, restored on exit."""
    lam = client("lambda")
    policy = json.loads(lam.get_policy(FunctionName=function_arn)["Policy"])
    statements = [s for s in policy["Statement"] if s["Principal"].get("Service") == service]
    assert statements, f"{function_arn} has no permission for {service}"
    for statement in statements:
        lam.remove_permission(FunctionName=function_arn, StatementId=statement["Sid"])
    try:
        yield
    finally:
        for statement in statements:
            source = statement.get("Condition", {}).get("ArnLike", {}).get("AWS:SourceArn")
            lam.add_permission(
                FunctionName=function_arn,
                StatementId=statement["Sid"],
                Action=statement["Action"],
                Principal=service,
                **({"SourceArn": source} if source else {}),
            )
