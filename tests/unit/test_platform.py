"""A platform team's settings (PlatformOptions) reach every resource each component
creates: tags, X-Ray tracing, JSON logs, log retention, Step Functions logging, the service
name, and each function's size, processor, reserved concurrency, log level, environment and
layers, one resource type at a time."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from exactly_once.components.config import args_from_config
from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs
from exactly_once.components.platform import (
    Architecture,
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
        # each handler's own level, INFO unless set: one level for Lambda's filter, our
        # handlers and Powertools in the user's code (AWS_LAMBDA_LOG_LEVEL)
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


@pytest.mark.parametrize(
    ("level", "lambdas"),
    [("DEBUG", "DEBUG"), ("INFO", "INFO"), ("WARNING", "WARN"), ("ERROR", "ERROR")],
)
def test_under_json_lambda_filters_at_the_function_s_own_level(level: str, lambdas: str) -> None:
    """Lambda sets AWS_LAMBDA_LOG_LEVEL to ApplicationLogLevel, and Powertools' Logger in
    the user's code takes it first: at INFO for every level but DEBUG, a function at
    WARNING had the user's Logger writing INFO lines."""
    # GIVEN JSON logs, Lambda's own lines at WARN, and the sweep at `level`
    platform = PlatformOptions(
        log_format="JSON",
        system_log_level="WARN",
        functions={"sweep": FunctionOptions(log_level=level)},  # type: ignore[arg-type]
    )
    # WHEN the scheduler is built
    mocks = run(lambda: component("scheduler", platform=platform))
    # THEN Lambda filters the sweep's lines at its level, in Lambda's name for it
    sweep = mocks.named("c-sweep").inputs
    assert sweep["environment"]["variables"]["LOG_LEVEL"] == level
    assert sweep["loggingConfig"]["applicationLogLevel"] == lambdas
    # AND Lambda's own lines keep the platform's level, whatever the function's
    assert sweep["loggingConfig"]["systemLogLevel"] == "WARN"


@pytest.mark.parametrize(("kind", "level"), [("etl", "WARNING"), ("name-dedup", "ERROR")])
def test_a_component_s_own_log_level_arg_sets_lambda_s_filter_too(kind: str, level: str) -> None:
    mocks = run(
        lambda: component(kind, log_level=level, platform=PlatformOptions(log_format="JSON"))
    )
    [function] = [
        f
        for f in mocks.of_type("aws:lambda/function:Function")
        if "LOG_LEVEL" in f.inputs["environment"]["variables"]
    ]
    expected = {"WARNING": "WARN", "ERROR": "ERROR"}[level]
    assert function.inputs["loggingConfig"]["applicationLogLevel"] == expected


def test_under_text_lambda_filters_nothing_whatever_the_level() -> None:
    """Log-level filtering is JSON's: with Text, no level is sent (Lambda would refuse one)."""
    platform = PlatformOptions(functions={"sweep": FunctionOptions(log_level="ERROR")})
    mocks = run(lambda: component("scheduler", platform=platform))
    assert mocks.named("c-sweep").inputs["loggingConfig"] == {
        "logFormat": "Text",
        "logGroup": "c-sweep-logs",
    }


def test_powertools_own_level_is_the_user_s_to_set() -> None:
    """POWERTOOLS_LOG_LEVEL is not the component's: with Text logs it gives the user's
    Logger a level of its own (Powertools reads it before LOG_LEVEL)."""
    sweep = FunctionOptions(log_level="WARNING", environment={"POWERTOOLS_LOG_LEVEL": "DEBUG"})
    mocks = run(
        lambda: component("scheduler", platform=PlatformOptions(functions={"sweep": sweep}))
    )
    variables = mocks.named("c-sweep").inputs["environment"]["variables"]
    assert (variables["LOG_LEVEL"], variables["POWERTOOLS_LOG_LEVEL"]) == ("WARNING", "DEBUG")


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


# -- each function's own settings (#54): processor, concurrency, log level, environment, layers
LAYER = "arn:aws:lambda:us-east-1:123456789012:layer:otel:3"


def test_each_function_setting_reaches_its_function_alone() -> None:
    # GIVEN the sweep's every setting
    sweep = FunctionOptions(
        architecture="arm64",
        reserved_concurrency=5,
        log_level="DEBUG",
        environment={"TEAM_SETTING": "on"},
        layers=[LAYER],
    )
    platform = PlatformOptions(log_format="JSON", functions={"sweep": sweep})
    # WHEN the scheduler is built
    mocks = run(lambda: component("scheduler", platform=platform))
    # THEN the sweep's function carries each of them
    function = mocks.named("c-sweep").inputs
    assert function["architectures"] == ["arm64"]
    assert function["reservedConcurrentExecutions"] == 5
    assert function["layers"] == [LAYER]
    variables = function["environment"]["variables"]
    assert variables["TEAM_SETTING"] == "on" and variables["LOG_LEVEL"] == "DEBUG"
    assert variables["TABLE"]  # beside the component's own
    # its handler at DEBUG: Lambda's filter keeps its DEBUG lines
    assert function["loggingConfig"]["applicationLogLevel"] == "DEBUG"
    # AND no other function changes
    for other in mocks.of_type("aws:lambda/function:Function"):
        if other.name != "c-sweep":
            assert other.inputs["architectures"] == ["x86_64"], other.name
            assert "reservedConcurrentExecutions" not in other.inputs
            assert "layers" not in other.inputs
            assert {"LOG_LEVEL", "TEAM_SETTING"}.isdisjoint(
                other.inputs["environment"]["variables"]
            )
            assert other.inputs["loggingConfig"]["applicationLogLevel"] == "INFO"


def test_the_settings_reach_a_handler_with_its_own_log_level() -> None:
    """The ETL's function: its requirements built for the processor, its LOG_LEVEL replaced."""
    transform = FunctionOptions(architecture=Architecture.ARM64, log_level=LogLevel.WARNING)
    mocks = run(
        lambda: component("etl", platform=PlatformOptions(functions={"transform": transform}))
    )
    function = mocks.named("c-transform").inputs
    assert function["architectures"] == ["arm64"]
    assert function["environment"]["variables"]["LOG_LEVEL"] == "WARNING"


def test_a_service_name_labels_every_function_s_logs() -> None:
    mocks = run(lambda: component("scheduler", platform=PlatformOptions(service="reminders")))
    functions = mocks.of_type("aws:lambda/function:Function")
    assert len(functions) == 5
    for function in functions:
        variables = function.inputs["environment"]["variables"]
        assert variables["POWERTOOLS_SERVICE_NAME"] == "reminders", function.name
        # metrics keep the component's name: its alarms and dashboard select on it
        assert variables["METRICS_COMPONENT"] == "c"


@pytest.mark.parametrize("kind", COMPONENTS)
def test_without_a_service_name_the_logs_name_the_component(kind: str) -> None:
    mocks = run(lambda: component(kind))
    for function in mocks.of_type("aws:lambda/function:Function"):
        assert function.inputs["environment"]["variables"]["POWERTOOLS_SERVICE_NAME"] == "c"


def test_without_function_settings_each_function_is_as_before() -> None:
    mocks = run(lambda: component("scheduler"))
    for function in mocks.of_type("aws:lambda/function:Function"):
        assert function.inputs["architectures"] == ["x86_64"], function.name
        assert "reservedConcurrentExecutions" not in function.inputs
        assert "layers" not in function.inputs
        assert "LOG_LEVEL" not in function.inputs["environment"]["variables"]


@pytest.mark.parametrize(
    ("args", "option", "message"),
    [
        (
            {"memory_size": 2048},
            FunctionOptions(memory_size=1024),
            r"IdempotentEtlArgs.memory_size=2048 and "
            r"platform.functions\['transform'\].memory_size=1024 disagree",
        ),
        (
            {"timeout": 120},
            FunctionOptions(timeout=60),
            r"IdempotentEtlArgs.timeout=120 and platform.functions\['transform'\].timeout=60",
        ),
        (
            {"architecture": "arm64"},
            FunctionOptions(architecture="x86_64"),
            r"IdempotentEtlArgs.architecture=arm64 and .*architecture=x86_64",
        ),
        (
            {"log_level": "DEBUG"},
            FunctionOptions(log_level="ERROR"),
            r"IdempotentEtlArgs.log_level=DEBUG and .*log_level=ERROR",
        ),
    ],
)
def test_a_component_arg_and_a_platform_option_that_disagree_are_refused(
    args: dict[str, Any], option: FunctionOptions, message: str
) -> None:
    platform = PlatformOptions(functions={"transform": option})
    with pytest.raises(ValueError, match=message):
        run(lambda: component("etl", platform=platform, **args))


def test_the_name_dedup_starter_s_own_args_are_held_to_the_platform_too() -> None:
    platform = PlatformOptions(functions={"starter": FunctionOptions(timeout=60)})
    with pytest.raises(ValueError, match=r"NameDedupStarterArgs.timeout=10 and "):
        run(lambda: component("name-dedup", platform=platform, timeout=10))


def test_a_component_arg_at_its_default_or_agreeing_takes_the_platform_s_option() -> None:
    sized = PlatformOptions(functions={"transform": FunctionOptions(memory_size=1024)})
    mocks = run(lambda: component("etl", platform=sized))
    assert mocks.named("c-transform").inputs["memorySize"] == 1024
    mocks = run(lambda: component("etl", platform=sized, memory_size=1024))
    assert mocks.named("c-transform").inputs["memorySize"] == 1024


@pytest.mark.parametrize(
    ("kind", "function", "environment", "message"),
    [
        # the component's own settings of that function, named
        ("scheduler", "sweep", {"TABLE": "x"}, r"may not set \['TABLE'\]: 'c' sets them"),
        ("etl", "transform", {"OUTPUT_BUCKET": "x"}, r"\['OUTPUT_BUCKET'\]"),
        # the transform's own environment (a component arg) is the component's too
        ("etl", "transform", {"CSV_SCHEMA": "{}"}, r"\['CSV_SCHEMA'\]"),
    ],
)
def test_an_environment_variable_the_component_sets_is_refused_by_name(
    kind: str, function: str, environment: dict[str, str], message: str
) -> None:
    platform = PlatformOptions(functions={function: FunctionOptions(environment=environment)})
    own = {"transform_environment": {"CSV_SCHEMA": "{}"}} if kind == "etl" else {}
    with pytest.raises(ValueError, match=message):
        run(lambda: component(kind, platform=platform, **own))


@pytest.mark.parametrize(
    ("options", "reason"),
    [
        (
            lambda: FunctionOptions(environment={"LOG_LEVEL": "DEBUG"}),
            r"LOG_LEVEL \(set log_level\)",
        ),
        (
            lambda: FunctionOptions(environment={"POWERTOOLS_SERVICE_NAME": "x"}),
            r"POWERTOOLS_SERVICE_NAME \(set platform.service\)",
        ),
        (lambda: FunctionOptions(environment={"1X": "y"}), "a variable's name"),
        # Lambda's [a-zA-Z]([a-zA-Z0-9_])+: a one-letter name is refused, named so
        (lambda: FunctionOptions(environment={"X": "y"}), "two characters or more"),
        (lambda: FunctionOptions(environment={"XY\n": "y"}), "a variable's name"),
        (lambda: FunctionOptions(environment={"PORTÉ": "y"}), "a variable's name"),
        (lambda: FunctionOptions(environment={"PORT": 8080}), "quote it"),  # type: ignore[dict-item]
        (lambda: FunctionOptions(architecture="arm"), "architecture must be one of"),  # type: ignore[arg-type]
        (lambda: FunctionOptions(log_level="TRACE"), "log_level must be one of"),  # type: ignore[arg-type]
        (lambda: FunctionOptions(reserved_concurrency=-1), "Lambda takes 0"),
        (lambda: FunctionOptions(layers=[LAYER] * 6), "at most 5"),
        (lambda: FunctionOptions(layers=["otel"]), "each layer version's ARN"),
        (lambda: FunctionOptions(layers=[LAYER.rsplit(":", 1)[0]]), "each layer version's ARN"),
        # Lambda's [a-zA-Z0-9-_]+ and \d{12} are ASCII: Python's \w and \d are not
        (lambda: FunctionOptions(layers=[LAYER.replace("otel", "télémétrie")]), "layer version"),
        (lambda: FunctionOptions(layers=[LAYER.replace("otel", "otel_π")]), "layer version"),
        (
            lambda: FunctionOptions(layers=[LAYER.replace("123456789012", "١٢٣٤٥٦٧٨٩٠١٢")]),
            "layer version",
        ),
        (lambda: FunctionOptions(layers=[f"{LAYER}\n"]), "layer version"),
        # LayerVersionArn: 140 characters at most
        (lambda: FunctionOptions(layers=[LAYER.replace("otel", "o" * 100)]), "layer version"),
        (lambda: PlatformOptions(service=""), "service"),
    ],
)
def test_bad_function_settings_are_refused_where_written(
    options: Callable[[], Any], reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        options()


def test_a_layer_known_only_at_deploy_is_taken() -> None:
    import pulumi

    def program() -> None:
        layer = pulumi.Output.from_input(LAYER)
        platform = PlatformOptions(functions={"sweep": FunctionOptions(layers=[layer])})
        component("scheduler", platform=platform)

    mocks = run(program)
    assert mocks.named("c-sweep").inputs["layers"] == [LAYER]


def test_a_stack_config_sets_each_function_s_settings() -> None:
    args = args_from_config(
        SchedulerArgs,
        {
            "platform": {
                "service": "reminders",
                "functions": {
                    "sweep": {
                        "architecture": "arm64",
                        "reservedConcurrency": 5,
                        "logLevel": "DEBUG",
                        "environment": {"TEAM_SETTING": "on"},
                        "layers": [LAYER],
                    }
                },
            }
        },
        channels={"demo": FN},
    )
    assert args.platform == PlatformOptions(
        service="reminders",
        functions={
            "sweep": FunctionOptions(
                architecture=Architecture.ARM64,
                reserved_concurrency=5,
                log_level=LogLevel.DEBUG,
                environment={"TEAM_SETTING": "on"},
                layers=[LAYER],
            )
        },
    )


def test_a_layer_name_of_lambda_s_characters_is_taken() -> None:
    layer = "arn:aws:lambda:us-east-1:123456789012:layer:Team_telemetry-2:12"
    assert FunctionOptions(layers=[layer]).layers == [layer]


# -- Lambda's 4 KB of environment variables (names and values, as one JSON object)
def test_variables_past_lambda_s_4_kb_are_refused_with_their_sizes() -> None:
    # GIVEN a variable of the user's that takes the sweep's environment past 4 KB
    sweep = FunctionOptions(environment={"TEAM_CONFIG": "x" * 4000})
    platform = PlatformOptions(functions={"sweep": sweep})
    # WHEN the scheduler is built THEN it is refused, naming the function and the sizes
    with pytest.raises(ValueError) as refused:
        run(lambda: component("scheduler", platform=platform))
    message = str(refused.value)
    assert "function 'c-sweep'" in message and "over Lambda's 4,096 (4 KB" in message
    assert "platform.functions['sweep'].environment's 4,016" in message
    assert "largest TEAM_CONFIG (4,016)" in message
    # the component's values known only at deploy (its table's name) are not counted
    assert "known only at deploy counted as empty" in message


def test_variables_up_to_4_kb_are_taken() -> None:
    """The boundary, measured as Lambda does: {"NAME":"value",...} in UTF-8."""
    from exactly_once.components.platform import check_environment_size

    # {"AB":"<v>"} is 9 bytes and the value
    check_environment_size("f", "f", {}, {"AB": "x" * (4096 - 9)})
    with pytest.raises(ValueError, match="measure 4,097 bytes"):
        check_environment_size("f", "f", {}, {"AB": "x" * (4096 - 8)})
    # a character of two bytes in UTF-8 counts two
    with pytest.raises(ValueError, match="measure 4,097 bytes"):
        check_environment_size("f", "f", {}, {"AB": "é" + "x" * (4096 - 10)})
    # two variables: a comma between them
    check_environment_size("f", "f", {"AB": "x" * 2000}, {"CD": "y" * (4096 - 2000 - 17)})
    with pytest.raises(ValueError, match=r"the component's 2,007, .*environment's 2,087"):
        check_environment_size("f", "f", {"AB": "x" * 2000}, {"CD": "y" * (4096 - 2000 - 16)})


def test_a_value_known_only_at_deploy_is_left_to_lambda() -> None:
    """An Output's value is not known at preview: it counts as empty, and Lambda checks the
    whole at deploy."""
    import pulumi

    def program() -> None:
        big = pulumi.Output.from_input("x" * 5000)
        sweep = FunctionOptions(environment={"TEAM_CONFIG": big})
        component("scheduler", platform=PlatformOptions(functions={"sweep": sweep}))

    mocks = run(program)
    assert len(mocks.named("c-sweep").inputs["environment"]["variables"]["TEAM_CONFIG"]) == 5000
