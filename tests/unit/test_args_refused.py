"""Configurations AWS would refuse only at deploy, or the first event would fail on,
refused where the Args are written, each with what to give instead."""

from __future__ import annotations

import json
from typing import Any

import pytest

from exactly_once.components.api_starter import ApiGatewayStarterArgs
from exactly_once.components.name_dedup import NameDedupStarterArgs
from exactly_once.components.roles import RoleOptions
from exactly_once.components.scheduler import SchedulerArgs

WORKFLOW = {"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}
CHANNELS: dict[str, Any] = {"demo": "arn:aws:lambda:us-east-1:123456789012:function:target"}


@pytest.mark.parametrize(
    ("make", "message"),
    [
        # EventBridge's rate() takes a positive integer: rate(0 minutes) fails the deploy
        (lambda: SchedulerArgs(CHANNELS, sweep_period_minutes=0), "sweep_period_minutes"),
        (lambda: SchedulerArgs(CHANNELS, stage_name="v 1"), "stage_name 'v 1'"),
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
