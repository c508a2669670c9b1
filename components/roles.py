"""Role options for accounts whose SCPs or conventions govern IAM roles: every role a
component creates gets the caller's permissions boundary and path."""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
import dataclasses
import re

import pulumi

# IAM API reference: PutRolePermissionsBoundary (a managed policy's ARN) and CreateRole's
# Path ("(\u002F)|(\u002F[\u0021-\u007E]+\u002F)", up to 512 characters).
_POLICY_ARN = re.compile(r"arn:aws[a-z-]*:iam::(\d{12}|aws):policy/[\x21-\x7e]+")
_PATH = re.compile(r"/|/[\x21-\x7e]{1,510}/")


@dataclasses.dataclass
class RoleOptions:
    """For accounts whose SCPs or conventions govern IAM roles."""

    permissions_boundary: pulumi.Input[str] | None = None
    """The ARN of a managed policy set as every created role's permissions boundary."""
    path: str | None = None
    """The path of every created role (e.g. /service/exactly-once/); default /."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        boundary = self.permissions_boundary
        if isinstance(boundary, str) and not _POLICY_ARN.fullmatch(boundary):
            raise ValueError(
                f"permissions_boundary {boundary!r} is not a managed policy's ARN "
                "(arn:aws:iam::ACCOUNT:policy/NAME, or arn:aws:iam::aws:policy/NAME)"
            )
        if self.path is not None and not _PATH.fullmatch(self.path):
            raise ValueError(
                f"path {self.path!r}: IAM takes / or /segments/ (letters, digits and "
                "punctuation, starting and ending with /, up to 512 characters)"
            )


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
