"""Configurations AWS would refuse only at deploy, or the first event would fail on,
refused where the Args are written, each with what to give instead."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from exactly_once import testing
from exactly_once.components.api_starter import ApiGatewayStarterArgs
from exactly_once.components.name_dedup import NameDedupStarterArgs
from exactly_once.components.roles import RoleOptions
from exactly_once.components.scheduler import Scheduler, SchedulerArgs

WORKFLOW = {"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}
CHANNELS: dict[str, Any] = {"demo": "arn:aws:lambda:us-east-1:123456789012:function:target"}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        # EventBridge's rate() takes a positive integer: rate(0 minutes) fails the deploy
        (lambda: SchedulerArgs(CHANNELS, sweep_period_minutes=0), "sweep_period_minutes"),
        (lambda: SchedulerArgs(CHANNELS, stage_name="v 1"), "stage_name 'v 1'"),
        (lambda: SchedulerArgs(CHANNELS, retention_days=-1), "retention_days must be 0"),
        (lambda: SchedulerArgs(CHANNELS, warm_ahead_from=-1), "warm_ahead_from must be 0"),
        (lambda: SchedulerArgs(CHANNELS, table_warm_writes=1000), "at least 4000"),
        (
            lambda: SchedulerArgs(CHANNELS, retention_days=1, late_tolerance_seconds=86400),
            "must be longer than late_tolerance_seconds",
        ),
        (lambda: ApiGatewayStarterArgs(definition=WORKFLOW, stage_name="v1/"), "stage_name"),
        (lambda: RoleOptions(permissions_boundary="MyBoundary"), "not a managed policy's ARN"),
        (lambda: RoleOptions(path="service"), "path 'service'"),
        (lambda: RoleOptions(path="/service/\n"), "path"),
        (lambda: SchedulerArgs(CHANNELS, stage_name="v1\n"), "stage_name"),
        (lambda: ApiGatewayStarterArgs(definition="{'StartAt': 1"), "definition is not JSON"),
        (lambda: NameDedupStarterArgs(bucket_name="b", definition="[]"), "a state machine"),
    ],
)
def test_a_configuration_aws_would_refuse_is_refused_where_it_is_written(
    make: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_what_aws_takes_is_taken() -> None:
    SchedulerArgs(CHANNELS, sweep_period_minutes=1, window_minutes=5, stage_name="prod_v-2")
    RoleOptions(
        permissions_boundary="arn:aws:iam::123456789012:policy/boundaries/Team",
        path="/service/exactly-once/",
    )
    RoleOptions(permissions_boundary="arn:aws-us-gov:iam::aws:policy/PowerUserAccess", path="/")
    ApiGatewayStarterArgs(definition=json.dumps(WORKFLOW), stage_name="v1")


class ExpressMachines(testing.Mocks):
    """Every state machine read by its ARN is an EXPRESS one."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        id_, outputs = super().new_resource(args)
        if args.resource_id and args.typ == "aws:sfn/stateMachine:StateMachine":
            return args.resource_id, {**outputs, "arn": args.resource_id, "type": "EXPRESS"}
        return id_, outputs


def test_an_express_state_machine_channel_fails_the_preview_with_the_reason() -> None:
    # (Express: "Idempotency is not automatically managed": a name would start twice; its
    # type is not in its ARN, so the component reads the machine)
    express = "arn:aws:states:us-east-1:123456789012:stateMachine:fast"
    with pytest.raises(Exception, match=r"'fast''s target .* is an EXPRESS state machine"):
        testing.run(
            lambda: Scheduler("c", SchedulerArgs({"fast": express})), mocks=ExpressMachines()
        )
    # AND a STANDARD one (the read answers its type) deploys, read and never created
    mocks = testing.run(lambda: Scheduler("c", SchedulerArgs({"flow": express})))
    [read] = [r for r in mocks.of_type("aws:sfn/stateMachine:StateMachine") if r.resource_id]
    assert read.resource_id == express and read.name == "c-channel-flow-machine"
