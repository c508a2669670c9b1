"""Every IAM role a component creates takes the caller's permissions boundary and path."""

from __future__ import annotations

import pytest

from exactly_once.components.roles import RoleOptions
from tests.unit.pulumi_harness import COMPONENTS, component, run

BOUNDARY = "arn:aws:iam::123456789012:policy/team-boundary"


@pytest.mark.parametrize("kind", COMPONENTS)
def test_every_role_gets_the_boundary_and_path(kind: str) -> None:
    roles = RoleOptions(permissions_boundary=BOUNDARY, path="/service/exactly-once/")
    created = run(lambda: component(kind, roles=roles)).of_type("aws:iam/role:Role")
    assert created, f"{kind} creates no role"
    for role in created:
        assert role.inputs.get("permissionsBoundary") == BOUNDARY, role.name
        assert role.inputs.get("path") == "/service/exactly-once/", role.name


def test_without_options_roles_are_left_as_they_were() -> None:
    created = run(lambda: component("scheduler")).of_type("aws:iam/role:Role")
    assert all("permissionsBoundary" not in role.inputs for role in created)
