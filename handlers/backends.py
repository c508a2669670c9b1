"""What a starter starts, behind one interface: a Step Functions state machine's execution
or a Lambda durable function's. Each backend says whether a target can deduplicate by
name, starts once by name, and what the starter needs for it (the actions its role is
granted, the SDK it packages); the starter and its component never branch on which.

A third backend is a subclass in a module of its own (defining it registers it under its
`Backend` value in `BACKENDS`): `start` keeps `handlers/executions.py`'s contract
(STARTED, DUPLICATE or REDRIVEN, and everything else raised, never taken for a
duplicate).
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar

from exactly_once.handlers.executions import (
    Backend,
    Outcome,
    ReusePolicy,
    execution_arn,
    start_durable_once,
    start_once,
)
from exactly_once.handlers.registry import register
from exactly_once.handlers.runtime import client

DURABLE_API_BOTOCORE = "1.42.1"  # the first botocore with the durable-execution APIs
# What a function calling the durable-execution APIs (Invoke's DurableExecutionName,
# DurableConfig in GetFunctionConfiguration, ListDurableExecutionsByFunction) packages: a
# Lambda runtime's own SDK may be older (the starter checks at cold start).
DURABLE_API_SDK = f"boto3>={DURABLE_API_BOTOCORE}"


@dataclasses.dataclass(frozen=True)
class Grant:
    """IAM actions the starter needs, on ARNs derived from its target's ARN."""

    actions: tuple[str, ...]
    resources: tuple[Callable[[str], str], ...]


def _target(arn: str) -> str:
    return arn


def _unqualified(function_arn: str) -> str:
    """A function's version or alias ARN without its qualifier."""
    return function_arn.rsplit(":", 1)[0]


class ExecutionBackend(abc.ABC):
    """One way to run a workflow once per derived name: defining a subclass registers it
    (`BACKENDS`)."""

    name: ClassVar[Backend]
    requirements: ClassVar[tuple[str, ...]] = ()
    """What the starter's zip packages for it."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register(BACKENDS, cls, ExecutionBackend)

    @abc.abstractmethod
    def grants(self, reuse_policy: ReusePolicy) -> list[Grant]:
        """What the starter's role may do with the target."""

    @abc.abstractmethod
    def unusable(self, target_arn: str) -> str | None:
        """Why the target cannot deduplicate by name, or None (asked once per cold start;
        AWS errors propagate: retried)."""

    @abc.abstractmethod
    def start(
        self,
        target_arn: str,
        key: str,
        document: dict[str, Any],
        request_id: str,
        reuse_policy: ReusePolicy,
        hide_key: bool,
    ) -> Outcome:
        """Start once by the key's name: STARTED, DUPLICATE or REDRIVEN (everything else
        raised, never taken for a duplicate)."""


BACKENDS: dict[Backend, ExecutionBackend] = {}


class StepFunctions(ExecutionBackend):
    """A STANDARD state machine: names unique for 90 days; a failed attempt that Step
    Functions can still redrive is redriven, never run beside a redrive of it."""

    name = Backend.STEP_FUNCTIONS

    def grants(self, reuse_policy: ReusePolicy) -> list[Grant]:
        grants = [
            Grant(("states:StartExecution",), (_target,)),
            # Once per cold start: the target must be STANDARD (unusable).
            Grant(("states:DescribeStateMachine",), (_target,)),
        ]
        if reuse_policy == ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY:
            # Only this policy asks how a taken name's execution ended, and redrives a
            # failed one (handlers/executions.py).
            grants.append(
                Grant(("states:DescribeExecution", "states:RedriveExecution"), (_executions,))
            )
        return grants

    def unusable(self, target_arn: str) -> str | None:
        described = client("stepfunctions").describe_state_machine(stateMachineArn=target_arn)
        if described["type"] != "STANDARD":
            # EXPRESS keeps no execution names: the same name would start it again and again.
            return f"{target_arn} is not a STANDARD state machine: no name dedup"
        return None

    def start(
        self,
        target_arn: str,
        key: str,
        document: dict[str, Any],
        request_id: str,
        reuse_policy: ReusePolicy,
        hide_key: bool,
    ) -> Outcome:
        return start_once(
            target_arn, key, document, request_id, reuse_policy, hide_key, redrive=True
        )


def _executions(state_machine_arn: str) -> str:
    """Every execution of the state machine."""
    return execution_arn(state_machine_arn, "*")


class DurableFunction(ExecutionBackend):
    """A Lambda durable function, invoked by version or alias under DurableExecutionName;
    durable executions have no redrive: a failed one is followed by the next name."""

    name = Backend.DURABLE_FUNCTION
    requirements = (DURABLE_API_SDK,)

    def grants(self, reuse_policy: ReusePolicy) -> list[Grant]:
        grants = [
            # Invoke is authorized on the qualified ARN it names.
            Grant(("lambda:InvokeFunction",), (_target,)),
            # Once per cold start: the target must be durable (unusable).
            Grant(("lambda:GetFunctionConfiguration",), (_target,)),
        ]
        if reuse_policy == ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY:
            # Only this policy asks how a taken name's execution ended.
            grants.append(
                Grant(("lambda:ListDurableExecutionsByFunction",), (_unqualified, _target))
            )
        return grants

    def unusable(self, target_arn: str) -> str | None:
        missing = missing_durable_api(client("lambda"))
        if missing:
            return missing
        configuration = client("lambda").get_function_configuration(FunctionName=target_arn)
        if not configuration.get("DurableConfig"):
            return f"{target_arn} is not a durable function: no name dedup"
        return None

    def start(
        self,
        target_arn: str,
        key: str,
        document: dict[str, Any],
        request_id: str,
        reuse_policy: ReusePolicy,
        hide_key: bool,
    ) -> Outcome:
        return start_durable_once(target_arn, key, document, request_id, reuse_policy, hide_key)


def missing_durable_api(lam: Any) -> str | None:
    """Why this function's botocore cannot start durable executions, or None. A Lambda
    runtime's own SDK may predate them: Invoke would refuse DurableExecutionName, and
    GetFunctionConfiguration's answer would drop DurableConfig (every target "not
    durable"). The component packages a newer one (`DurableFunction.requirements`)."""
    model = lam.meta.service_model
    invoke = model.operation_model("Invoke").input_shape.members
    if "DurableExecutionName" in invoke and "ListDurableExecutionsByFunction" in (
        model.operation_names
    ):
        return None
    import botocore

    return (
        f"this function's botocore {botocore.__version__} has no durable-execution API (it "
        f"needs {DURABLE_API_BOTOCORE} or later): deploy it with NameDedupStarter, which "
        "packages one"
    )


@functools.cache
def unusable(backend: Backend, target_arn: str) -> str | None:
    """`BACKENDS[backend].unusable(target_arn)`, once per cold start."""
    return BACKENDS[backend].unusable(target_arn)
