"""Role options for accounts whose SCPs or conventions govern IAM roles: every role a
component creates gets the caller's permissions boundary and path."""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
import dataclasses

import pulumi


@dataclasses.dataclass
class RoleOptions:
    """For accounts whose SCPs or conventions govern IAM roles."""

    permissions_boundary: pulumi.Input[str] | None = None
    """The ARN of a managed policy set as every created role's permissions boundary."""
    path: str | None = None
    """The path of every created role (e.g. /service/exactly-once/); default /."""


@dataclasses.dataclass
class IamStatement:
    """An Allow statement of your own, for code of yours that a component runs."""

    actions: list[str]
    """IAM actions, e.g. ["dynamodb:GetItem"]."""
    resources: list[pulumi.Input[str]]
    """The ARNs they apply to."""

    def statement(self) -> dict[str, object]:
        if not self.actions or not self.resources:
            raise ValueError("an IamStatement needs actions and resources")
        if "*" in self.actions:
            raise ValueError("an IamStatement may not allow every action ('*')")
        return {"Effect": "Allow", "Action": list(self.actions), "Resource": list(self.resources)}


def with_role_options(
    opts: pulumi.ResourceOptions | None, roles: RoleOptions | None
) -> pulumi.ResourceOptions | None:
    """A component's options plus a transformation giving every IAM role it creates the
    permissions boundary and path of `roles`: one place, whatever creates the role."""
    if roles is None or (roles.permissions_boundary is None and roles.path is None):
        return opts

    def harden(
        args: pulumi.ResourceTransformationArgs,
    ) -> pulumi.ResourceTransformationResult | None:
        if args.type_ != "aws:iam/role:Role":
            return None
        props = dict(args.props)
        if roles.permissions_boundary is not None:
            props["permissions_boundary"] = roles.permissions_boundary
        if roles.path is not None:
            props["path"] = roles.path
        return pulumi.ResourceTransformationResult(props, args.opts)

    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=[harden]))
