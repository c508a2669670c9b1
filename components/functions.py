"""Least-privilege roles, dead-letter queues and handler functions, built one way for all."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from exactly_once.components.lambda_asset import lambda_code
from exactly_once.components.platform import Platform

RUNTIME = "python3.12"
DURABLE_RUNTIME = "python3.13"  # the first Python runtime with durable functions
# Packaged, as AWS recommends for production (Lambda developer guide, durable functions,
# supported runtimes: the runtime's own copy is for testing and development).
DURABLE_SDK = "aws-durable-execution-sdk-python>=3.0,<4"


def assume_role_policy(service: str) -> pulumi.Output[str]:
    return pulumi.Output.json_dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": service},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
    )


def allow(actions: Sequence[str], resources: Sequence[pulumi.Input[str]]) -> dict[str, Any]:
    """One IAM statement; resources are ARNs, '*' only for actions that allow nothing else
    (see tests/unit/test_iam.py)."""
    return {"Effect": "Allow", "Action": list(actions), "Resource": list(resources)}


def service_role(
    name: str,
    service: str,
    statements: Sequence[Mapping[str, Any]] | pulumi.Output[Any],
    parent: pulumi.Resource,
) -> tuple[aws.iam.Role, list[pulumi.Resource]]:
    """A role `service` can assume, with exactly `statements` as its inline policy.

    Returns the role and what to depend on before using it (the policy attachment)."""
    role = aws.iam.Role(
        f"{name}-role",
        assume_role_policy=assume_role_policy(service),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    if not statements:
        return role, []
    policy = aws.iam.RolePolicy(
        f"{name}-policy",
        role=role.id,
        policy=pulumi.Output.json_dumps({"Version": "2012-10-17", "Statement": statements}),
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return role, [policy]


def dead_letter_queue(name: str, parent: pulumi.Resource) -> aws.sqs.Queue:
    """Where events that cannot succeed are kept, with the reason, for 14 days."""
    return aws.sqs.Queue(
        f"{name}-dlq",
        message_retention_seconds=14 * 24 * 3600,
        sqs_managed_sse_enabled=True,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def allow_eventbridge_to_queue(
    name: str, queue: aws.sqs.Queue, rule_arn: pulumi.Input[str], parent: pulumi.Resource
) -> aws.sqs.QueuePolicy:
    """Let one EventBridge rule park undeliverable events in this queue."""
    return aws.sqs.QueuePolicy(
        f"{name}-dlq-policy",
        queue_url=queue.url,
        policy=pulumi.Output.json_dumps(
            {
                "Version": "2012-10-17",
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"Service": "events.amazonaws.com"},
                        "Action": "sqs:SendMessage",
                        "Resource": queue.arn,
                        "Condition": {"ArnEquals": {"aws:SourceArn": rule_arn}},
                    }
                ],
            }
        ),
        opts=pulumi.ResourceOptions(parent=parent),
    )


@dataclasses.dataclass(frozen=True)
class Durable:
    """A durable function's DurableConfig: its executions' time limit and how long Lambda
    keeps a finished one (and its name)."""

    execution_timeout_seconds: int
    retention_days: int


@dataclasses.dataclass
class HandlerFunction:
    function: aws.lambda_.Function
    role: aws.iam.Role
    log_group: aws.cloudwatch.LogGroup


def handler_function(
    name: str,
    handler: str,
    statements: Sequence[Mapping[str, Any]],
    environment: Mapping[str, pulumi.Input[str]],
    parent: pulumi.Resource,
    dead_letter_arn: pulumi.Input[str] | None = None,
    timeout: int = 30,
    memory_size: int = 256,
    requirements: tuple[str, ...] = (),
    sources: tuple[str, ...] = (),
    excludes: tuple[str, ...] = (),
    architecture: str = "x86_64",
    reserved_concurrency: int | None = None,
    durable: Durable | None = None,
    platform: Platform | None = None,
    args: object = None,
) -> HandlerFunction:
    """A function running `handlers.<module>.<fn>` (with `sources`' modules beside it), its
    log group and a role allowing only `statements`, its own log writes and (with
    `dead_letter_arn`) its DLQ. `durable`: a durable function (the SDK packaged, a published
    version: `function.qualified_arn` is what to invoke). `platform`: the component's
    tracing, log and function settings, over the component's choices given here (and in
    `args`, the component's args, when theirs of FunctionOptions' names set this one)."""
    platform = platform or Platform(name, None)
    log_group = aws.cloudwatch.LogGroup(
        f"{name}-logs",
        retention_in_days=platform.options.log_retention_days or None,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    own = [
        allow(
            ["logs:CreateLogStream", "logs:PutLogEvents"], [log_group.arn.apply(lambda a: f"{a}:*")]
        )
    ]
    if dead_letter_arn is not None:
        own.append(allow(["sqs:SendMessage"], [dead_letter_arn]))
    own += platform.function_statements()
    role, ready = service_role(name, "lambda.amazonaws.com", [*statements, *own], parent)
    if durable is not None:
        requirements = (DURABLE_SDK, *requirements)
    runtime = RUNTIME if durable is None else DURABLE_RUNTIME
    settings = platform.function(
        name,
        memory_size=memory_size,
        timeout=timeout,
        architecture=architecture,
        reserved_concurrency=reserved_concurrency,
        environment=environment,
        args=args,
    )
    function = aws.lambda_.Function(
        name,
        runtime=runtime,
        handler=handler,
        role=role.arn,
        # wheels for the runtime's own Python (the durable SDK's are built per version)
        code=lambda_code(
            requirements, sources, excludes, settings.architecture, runtime.removeprefix("python")
        ),
        architectures=[settings.architecture],
        timeout=settings.timeout,
        memory_size=settings.memory_size,
        tracing_config=settings.tracing_config,
        environment=aws.lambda_.FunctionEnvironmentArgs(variables=settings.environment),
        layers=settings.layers,
        dead_letter_config=(
            aws.lambda_.FunctionDeadLetterConfigArgs(target_arn=dead_letter_arn)
            if dead_letter_arn is not None
            else None
        ),
        reserved_concurrent_executions=settings.reserved_concurrency,
        logging_config=aws.lambda_.FunctionLoggingConfigArgs(
            **settings.logging, log_group=log_group.name
        ),
        **_durable_inputs(durable),
        opts=pulumi.ResourceOptions(parent=parent, depends_on=ready),
    )
    return HandlerFunction(function, role, log_group)


def _durable_inputs(durable: Durable | None) -> dict[str, Any]:
    """A durable function's inputs: none for a plain one, so pulumi-aws releases before
    durable functions (7.51) build every other function."""
    if durable is None:
        return {}
    if not hasattr(aws.lambda_, "FunctionDurableConfigArgs"):
        raise ValueError("backend='durable-function' needs pulumi-aws 7.51 or later")
    return {
        "durable_config": aws.lambda_.FunctionDurableConfigArgs(
            execution_timeout=durable.execution_timeout_seconds,
            retention_period=durable.retention_days,
        ),
        "publish": True,  # durable functions are invoked by version
    }


def on_schedule(
    name: str, minutes: int, function: aws.lambda_.Function, parent: pulumi.Resource
) -> aws.cloudwatch.EventTarget:
    """Invoke `function` every `minutes` (an EventBridge schedule rule)."""
    rule = aws.cloudwatch.EventRule(
        f"{name}-schedule",
        schedule_expression=f"rate({minutes} minute{'s' if minutes != 1 else ''})",
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return invoke_from_rule(name, rule, function, parent)


def invoke_from_rule(
    name: str,
    rule: aws.cloudwatch.EventRule,
    function: aws.lambda_.Function,
    parent: pulumi.Resource,
    dlq: aws.sqs.Queue | None = None,
    event_bus_name: str | None = None,
) -> aws.cloudwatch.EventTarget:
    """Let `rule` invoke `function` (and park undeliverable events in `dlq`)."""
    child = pulumi.ResourceOptions(parent=parent)
    permission = aws.lambda_.Permission(
        f"{name}-invoke",
        action="lambda:InvokeFunction",
        function=function.name,
        principal="events.amazonaws.com",
        source_arn=rule.arn,
        opts=child,
    )
    dead_letter = None
    if dlq is not None:
        allow_eventbridge_to_queue(name, dlq, rule.arn, parent)
        dead_letter = aws.cloudwatch.EventTargetDeadLetterConfigArgs(arn=dlq.arn)
    return aws.cloudwatch.EventTarget(
        f"{name}-target",
        rule=rule.name,
        event_bus_name=event_bus_name,
        arn=function.arn,
        dead_letter_config=dead_letter,
        opts=pulumi.ResourceOptions(parent=parent, depends_on=[permission]),
    )
