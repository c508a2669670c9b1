"""A platform team's settings (PlatformOptions) reach every resource each component
creates: tags, X-Ray tracing, JSON logs, log retention, Step Functions logging and each
function's size, one resource type at a time."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from exactly_once.components.config import args_from_config
from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs
from exactly_once.components.platform import (
    FunctionOptions,
    LogFormat,
    PlatformOptions,
    StateMachineLogLevel,
    SystemLogLevel,
    taggable,
)
from exactly_once.components.scheduler import SWEEP_MEMORY_MB, Scheduler, SchedulerArgs
from exactly_once.handlers.runtime import LogLevel
from tests.unit.pulumi_harness import (
    COMPONENTS,
    WORKFLOW,
    RecordingMocks,
    component,
    run,
)
from tests.unit.pulumi_harness import (
    FUNCTION_ARN as FN,
)

TAGS = {"team": "payments", "cost-centre": "4711"}
EVERYTHING = PlatformOptions(
    tags=TAGS,
    tracing=True,
    log_retention_days=30,
    log_format=LogFormat.JSON,
    system_log_level=SystemLogLevel.WARN,
    state_machine_log_level=StateMachineLogLevel.ERROR,
)


@pytest.fixture(scope="module")
def deployed() -> dict[str, RecordingMocks]:
    """Each component once, with every platform option set."""
    return {
        kind: run(lambda kind=kind: component(kind, platform=EVERYTHING)) for kind in COMPONENTS
    }


def of_type(deployed: dict[str, RecordingMocks], typ: str) -> list[Any]:
    found = [r for mocks in deployed.values() for r in mocks.of_type(typ)]
    assert found, f"no component creates a {typ}"
    return found


def statements_of(mocks: RecordingMocks, role: str) -> list[str]:
    """Every action the inline policy of the role named `role` allows."""
    policy = json.loads(mocks.named(f"{role}-policy").inputs["policy"])
    return [a for s in policy["Statement"] for a in s["Action"]]


TAGGED = [
    "aws:lambda/function:Function",
    "aws:iam/role:Role",
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:sqs/queue:Queue",
    "aws:sfn/stateMachine:StateMachine",
    "aws:dynamodb/table:Table",
    "aws:cloudwatch/eventRule:EventRule",
    "aws:apigateway/restApi:RestApi",
    "aws:apigateway/stage:Stage",
    "aws:cloudwatch/metricAlarm:MetricAlarm",
]


@pytest.mark.parametrize("typ", TAGGED)
def test_every_resource_of_a_taggable_type_carries_the_tags(
    deployed: dict[str, RecordingMocks], typ: str
) -> None:
    for resource in of_type(deployed, typ):
        assert resource.inputs.get("tags") == TAGS, (typ, resource.name)


def test_no_taggable_resource_is_left_untagged(deployed: dict[str, RecordingMocks]) -> None:
    every = [r for mocks in deployed.values() for r in mocks.resources]
    untagged = {r.typ for r in every if taggable(r.typ) and r.inputs.get("tags") != TAGS}
    assert not untagged
    # the check reads pulumi-aws's Args classes: it knows what takes tags and what does not
    assert taggable("aws:lambda/function:Function") and taggable("aws:sqs/queue:Queue")
    assert not taggable("aws:cloudwatch/eventTarget:EventTarget")
    assert not taggable("aws:cloudwatch/dashboard:Dashboard")


def test_functions_trace_and_may_send_traces(deployed: dict[str, RecordingMocks]) -> None:
    for mocks in deployed.values():
        for function in mocks.of_type("aws:lambda/function:Function"):
            assert function.inputs["tracingConfig"] == {"mode": "Active"}, function.name
            actions = statements_of(mocks, function.name)
            assert {"xray:PutTraceSegments", "xray:PutTelemetryRecords"} <= set(actions)


def test_state_machines_trace_and_may_send_traces(deployed: dict[str, RecordingMocks]) -> None:
    for mocks in deployed.values():
        for machine in mocks.of_type("aws:sfn/stateMachine:StateMachine"):
            assert machine.inputs["tracingConfiguration"] == {"enabled": True}, machine.name
            actions = set(statements_of(mocks, machine.name))
            assert {"xray:PutTraceSegments", "xray:GetSamplingRules"} <= actions


def test_api_stages_trace(deployed: dict[str, RecordingMocks]) -> None:
    for stage in of_type(deployed, "aws:apigateway/stage:Stage"):
        assert stage.inputs["xrayTracingEnabled"] is True, stage.name


def test_functions_log_json_and_lambda_keeps_every_application_line(
    deployed: dict[str, RecordingMocks],
) -> None:
    for function in of_type(deployed, "aws:lambda/function:Function"):
        logging = function.inputs["loggingConfig"]
        assert logging["logFormat"] == "JSON", function.name
        assert logging["systemLogLevel"] == "WARN"
        # what the handlers write at their INFO (their WARNING reads as INFO to Lambda);
        # never below DEBUG, where botocore would log request bodies
        assert logging["applicationLogLevel"] == "INFO"


def test_a_handler_at_debug_keeps_its_debug_lines_under_json() -> None:
    mocks = run(
        lambda: NameDedupStarter(
            "c",
            NameDedupStarterArgs(
                bucket_name="b",
                definition=WORKFLOW,
                log_level=LogLevel.DEBUG,
                platform=PlatformOptions(log_format=LogFormat.JSON),
            ),
        )
    )
    [function] = mocks.of_type("aws:lambda/function:Function")
    assert function.inputs["loggingConfig"]["applicationLogLevel"] == "DEBUG"


def test_a_role_that_may_do_nothing_else_still_may_trace_and_log() -> None:
    """A definition known only at deploy, with no Task: its role was a Deny of everything,
    which would override the platform's Allows."""
    import pulumi

    definition = pulumi.Output.from_input(WORKFLOW)
    mocks = run(
        lambda: NameDedupStarter(
            "c",
            NameDedupStarterArgs(
                bucket_name="b",
                definition=definition,
                platform=EVERYTHING,  # type: ignore[arg-type]
            ),
        )
    )
    policy = json.loads(mocks.named("c-workflow-policy").inputs["policy"])
    assert all(s["Effect"] == "Allow" for s in policy["Statement"]), policy
    actions = {a for s in policy["Statement"] for a in s["Action"]}
    assert {"xray:PutTraceSegments", "logs:CreateLogDelivery"} <= actions


def test_log_groups_keep_lines_for_the_retention(deployed: dict[str, RecordingMocks]) -> None:
    for group in of_type(deployed, "aws:cloudwatch/logGroup:LogGroup"):
        assert group.inputs["retentionInDays"] == 30, group.name


def test_state_machines_log_to_a_vended_log_group_of_their_own(
    deployed: dict[str, RecordingMocks],
) -> None:
    for mocks in deployed.values():
        for machine in mocks.of_type("aws:sfn/stateMachine:StateMachine"):
            logging = machine.inputs["loggingConfiguration"]
            assert logging["level"] == "ERROR" and logging["includeExecutionData"] is False
            group = mocks.named(f"{machine.name}-logs")
            assert group.inputs["namePrefix"].startswith("/aws/vendedlogs/states/")
            assert logging["logDestination"].endswith(":*")
            assert "logs:CreateLogDelivery" in statements_of(mocks, machine.name)


def test_without_options_nothing_changes() -> None:
    mocks = run(lambda: component("scheduler"))
    for function in mocks.of_type("aws:lambda/function:Function"):
        # off is sent as off: the provider would keep a setting it is no longer given
        assert function.inputs["tracingConfig"] == {"mode": "PassThrough"}
        assert function.inputs["loggingConfig"] == {
            "logFormat": "Text",
            "logGroup": f"{function.name}-logs",
        }
        assert "tags" not in function.inputs
        assert "xray:PutTraceSegments" not in statements_of(mocks, function.name)
    for machine in mocks.of_type("aws:sfn/stateMachine:StateMachine"):
        assert machine.inputs["loggingConfiguration"] == {"level": "OFF"}
        assert machine.inputs["tracingConfiguration"] == {"enabled": False}
    for group in mocks.of_type("aws:cloudwatch/logGroup:LogGroup"):
        assert group.inputs["retentionInDays"] == 14


def test_each_function_is_sized_by_its_name() -> None:
    platform = PlatformOptions(
        functions={
            "slots": FunctionOptions(memory_size=1024),
            "sweep": FunctionOptions(timeout=600),
        }
    )
    mocks = run(lambda: component("scheduler", platform=platform))
    assert mocks.named("c-slots").inputs["memorySize"] == 1024
    assert mocks.named("c-sweep").inputs["timeout"] == 600
    # the component's own size kept where the platform says nothing
    assert mocks.named("c-sweep").inputs["memorySize"] == SWEEP_MEMORY_MB


def test_an_unknown_function_name_is_refused_with_the_component_s_names() -> None:
    platform = PlatformOptions(functions={"slot": FunctionOptions(memory_size=1024)})
    with pytest.raises(Exception, match=r"'slot' is not a function of 'c'.*slots"):
        run(lambda: component("scheduler", platform=platform))


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        (lambda: PlatformOptions(log_retention_days=10), "CloudWatch Logs keeps lines"),
        (lambda: PlatformOptions(tags={"aws:owner": "x"}), "not starting aws:"),
        (lambda: PlatformOptions(log_format="YAML"), "log_format"),  # type: ignore[arg-type]
        (
            lambda: PlatformOptions(state_machine_log_level="DEBUG"),  # type: ignore[arg-type]
            "state_machine_log_level",
        ),
        (lambda: FunctionOptions(memory_size=64), "128 to 10240 MB"),
        (lambda: FunctionOptions(timeout=901), "1 to 900 seconds"),
    ],
)
def test_bad_options_are_refused_where_written(options: Callable[[], Any], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        options()


def test_a_stack_config_sets_them_with_camel_case_keys() -> None:
    args = args_from_config(
        SchedulerArgs,
        {
            "platform": {
                "tags": {"team": "payments"},
                "logFormat": "JSON",
                "functions": {"slots": {"memorySize": 1024}},
            }
        },
        channels={"demo": FN},
    )
    assert args.platform == PlatformOptions(
        tags={"team": "payments"},
        log_format=LogFormat.JSON,
        functions={"slots": FunctionOptions(memory_size=1024)},
    )


def test_options_changed_after_they_were_written_are_checked_again() -> None:
    platform = PlatformOptions()
    platform.log_retention_days = 13  # not a retention CloudWatch Logs takes
    with pytest.raises(Exception, match="CloudWatch Logs keeps lines"):
        run(lambda: component("scheduler", platform=platform))


def test_a_subclass_keeps_the_component_s_type_token() -> None:
    """The type token is fixed per component: a program's own subclass does not move its
    resources to new URNs (a replacement, tables included)."""

    class MyScheduler(Scheduler):
        pass

    mocks = run(lambda: MyScheduler("c", SchedulerArgs({"demo": FN})))
    assert [r.typ for r in mocks.resources if not r.custom] == ["exactly-once:index:Scheduler"]
