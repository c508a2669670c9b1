"""What the five components share: their type token, the role and platform options every
resource they create takes, their alarms and dashboard, and their outputs."""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
from collections.abc import Mapping
from typing import Any, ClassVar

import pulumi

from exactly_once.components.monitoring import Watch
from exactly_once.components.platform import Platform, PlatformOptions
from exactly_once.components.roles import RoleOptions, with_role_options

PACKAGE = "exactly-once"


class Component(pulumi.ComponentResource):
    """A component of the package: `exactly-once:index:<_kind>`."""

    # Its type token's name, fixed per class (a subclass of a user's keeps it, so its
    # resources' URNs do not move), and the names of the functions it makes (what
    # platform.functions may size).
    _kind: ClassVar[str]
    _functions: ClassVar[tuple[str, ...]] = ()

    alarm_names: pulumi.Output[list[str]]
    """The names of the component's alarms."""
    dashboard_name: pulumi.Output[str] | None
    """Its CloudWatch dashboard (None with monitoring.dashboard off)."""

    def __init__(
        self,
        name: str,
        roles: RoleOptions | None,
        platform: PlatformOptions | None,
        opts: pulumi.ResourceOptions | None,
    ) -> None:
        self._platform = Platform(name, platform)
        self._platform.check(self._functions)  # before any resource: fails where written
        super().__init__(
            f"{PACKAGE}:index:{self._kind}",
            name,
            {},
            self._platform.resource_options(with_role_options(opts, roles)),
        )
        self._outputs: dict[str, Any] = {}

    def _finish(self, watch: Watch, outputs: Mapping[str, Any]) -> None:
        """The last step of a component's constructor: its watch finished, its platform
        options checked against what it made, its outputs registered."""
        self._platform.check(self._platform.functions)
        dashboard = watch.finish()
        self.alarm_names = pulumi.Output.all(*[alarm.name for alarm in watch.alarms])
        self.dashboard_name = dashboard.dashboard_name if dashboard is not None else None
        self._outputs = {
            # which component these are: an ops command refuses another kind's by name
            # (`clear` given a Scheduler's outputs, say: docs/operations.md)
            "kind": self._kind,
            "alarmNames": self.alarm_names,
            "dashboardName": self.dashboard_name,
            **outputs,
        }
        self.register_outputs(self._outputs)

    def exports(self) -> dict[str, Any]:
        """Its outputs by the names the ops commands read: `pulumi.export("orders",
        orders.exports())` lets `exactly-once ... --outputs <stack outputs> --component
        orders` find them (docs/operations.md)."""
        return dict(self._outputs)
