"""Pattern 4, the resumable workflow: a run of a key whose second step fails (for good,
once) is re-run (`ops rerun`: the next attempt's name) until it completes; the state
machine form's failed run is also redriven (RedriveExecution, from its failed step) while
the re-run is in flight (at the twin point) or after it; then a duplicate run after
completion. While a run is redriven, DescribeExecution still answers its failure
(eventually consistent: machine.ended). The first step's first run takes its time, and
another run of the key (a second operator's start) arrives meanwhile: its Load finds the
key held and describes the holder, and whatever that description answers (a throttle, a
5xx), a holder still running is never taken for ended (`arrival`). Each step's effect
happens once, more only where a fault made it ambiguous (at its invoke, in its checkpoint
write, or a redrive restarting at it: documented at least once); the key ends completed;
a run after completion runs no step."""

from __future__ import annotations

import collections
import contextlib
import inspect
import json
import types
from collections.abc import Callable, Iterator
from typing import Any

from exactly_once.handlers import resumable, resumable_durable, runtime
from tests.explore.faults import Call, Clock, Fault, Injector, handovers_after, json_response
from tests.explore.lambdas import Failure
from tests.explore.machine import Machine, Run, ended, integration_client
from tests.explore.scenarios.base import ARN, WAIT, Scenario, Verdict, World, clocked

CHECKPOINT_FN = ARN.format("lambda", "function:checkpoint")
STEPS = ("s1", "s2", "s3")
STEP_SECONDS = 20.0  # the first step's first run (within its function's 30 s timeout)


def arrival(world: World, start: Callable[[], Any]) -> None:
    """The first step's first run takes STEP_SECONDS, and another run of the key arrives
    as it begins (`start`: a process of its own, run at once; it fails at its Load, and
    nobody redrives it), while the holder runs.

    Its Load finds the key held and describes the holder. Besides the status, the API
    references list what that call may answer: DescribeExecution (Step Functions API
    Reference) ExecutionDoesNotExist, InvalidArn and the Kms* errors; GetDurableExecution
    (Lambda API Reference) ResourceNotFoundException, InvalidParameterValueException,
    ServiceException (500), TooManyRequestsException (429) and the Kms* errors; and every
    API the common errors, AccessDeniedException, ThrottlingException (400),
    ServiceUnavailable (503), InternalFailure (500). Only ExecutionDoesNotExist and
    ResourceNotFoundException say the holder is gone; the rest say nothing of it. The
    schedules' `throttle` and `fail` at that call (every send throttled, or 503) make the
    Load wait out the SDK's back-off while the holder is still in its step: a Load that
    took the failure for an ended holder takes the key over and runs the step beside it.
    (Without the step's time, the holder saves the step during that back-off, and the
    takeover's fence on saved_at refuses it: the defect would go unseen.)"""
    world.injector.processes.spawn("arrival", start)
    world.clock.sleep(STEP_SECONDS)


class StepBroken(Exception):
    """A step's own failure, retried by no rule: its run fails there."""


def checkpoint_table(name: str) -> None:
    runtime.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


def steps_verdict(
    world: World,
    table: str,
    effects: collections.Counter[str],
    window: Callable[[str], int],
) -> list[str]:
    item = world.quietly(
        lambda: runtime.client("dynamodb").get_item(
            TableName=table, Key={"pk": {"S": world.tag}}, ConsistentRead=True
        )
    ).get("Item", {})
    violations = []
    if "completed_at" not in item:
        violations.append("the key never completed")
    for name in STEPS:
        count = effects[name]
        allowed = 1 + window(name)
        if count == 0:
            violations.append(f"step {name} never ran")
        elif count > allowed:
            violations.append(f"step {name} ran {count} times (allowed {allowed})")
    return violations


class ResumableScenario(Scenario):
    name = "4 resumable (step-functions)"

    def after_single(self, faults: tuple[Fault, ...], calls: list[Call]) -> list[tuple[Fault, ...]]:
        """Its lease and fence guard a read racing a write: every handover of two runs."""
        return handovers_after(faults, calls)

    def clients(self) -> list[Any]:
        return [runtime.client(s) for s in ("dynamodb", "stepfunctions")] + [self.integration]

    def setup(self) -> None:
        from exactly_once.components import resumable_asl

        checkpoint_table("explore-checkpoints")
        iam = runtime.client("iam")
        role = iam.create_role(RoleName="workflow", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        self.machine = runtime.client("stepfunctions").create_state_machine(
            name="workflow", definition=json.dumps(WAIT), roleArn=role
        )["stateMachineArn"]
        steps = [resumable_asl.Step(s, ARN.format("lambda", f"function:{s}")) for s in STEPS]
        self.definition = resumable_asl.definition(
            steps, "explore-checkpoints", CHECKPOINT_FN, "$.orderId"
        )
        self.integration = integration_client("dynamodb")
        self.config = resumable.ResumableSettings("explore-checkpoints", list(STEPS), 86400, 86400)

    def patched(self, world: World) -> Any:
        return clocked(world.clock, resumable)

    def run(self, world: World) -> Verdict:
        config = self.config
        tag = world.tag
        sfn = runtime.client("stepfunctions")
        effects: collections.Counter[str] = collections.Counter()
        broken = {"s2"}  # fails its first call, for good: the run fails there
        slow = {STEPS[0]}  # its first run takes its time: another run arrives meanwhile

        def checkpoint(payload: dict[str, Any], context: Any) -> Any:
            if payload["action"] == "load":
                return resumable.load(config, payload["key"], payload["execution"])
            return resumable.finish(config, payload["key"], payload["execution"])

        def step(name: str) -> Callable[[Any, Any], Any]:
            def effect(payload: dict[str, Any], context: Any) -> Any:
                if name in broken:
                    broken.discard(name)
                    raise StepBroken(f"{name} failed")
                if name in slow:
                    slow.discard(name)
                    arrival(world, lambda: launch(f"{tag}-x"))
                effects[name] += 1
                return {"step": name}

            return effect

        world.lambdas.register(CHECKPOINT_FN, checkpoint)
        for name in STEPS:
            world.lambdas.register(ARN.format("lambda", f"function:{name}"), step(name))
        model = Machine(
            self.definition, world.lambdas, world.clock, world.injector, self.integration
        )
        failed: list[tuple[str, Any]] = []
        redriven_at: list[str] = []

        runs: dict[str, Any] = {}  # by execution name

        def start(attempt: int) -> Any:
            return launch(tag if attempt == 0 else f"{tag}-r{attempt}", redriven=True)

        def launch(name: str, redriven: bool = False) -> Any:
            """A run named `name`; `redriven`: if it fails, it is redriven later."""
            if name in runs:  # the name is taken (running or ended): no second run starts
                return runs[name] or Run()
            arn = world.quietly(
                lambda: sfn.start_execution(
                    stateMachineArn=self.machine, name=name, input=json.dumps({"orderId": tag})
                )
            )["executionArn"]
            runs[name] = None  # running: a start of the name meanwhile is the same execution
            run = runs[name] = model.run(arn, {"orderId": tag})
            ended(arn, run, world.clock.now)
            if run.status == "FAILED" and redriven:
                failed.append((arn, run))
            return run

        def redrive() -> None:
            while failed:  # redriven once each, from the state that failed
                arn, run = failed.pop(0)
                redriven_at.append(run.failed_state)
                # DescribeExecution still answers the failure meanwhile (machine.ended)
                ended(
                    arn,
                    model.run(arn, run.failed_input, start_at=run.failed_state),
                    world.clock.now,
                )

        attempt = 0
        # another run of the key, started while one is in flight (a second operator's rerun,
        # a duplicated start under another name): it finds the key held and runs no step
        world.injector.dup = lambda: start(99)
        while start(attempt).status != "SUCCEEDED" and attempt < 4:
            attempt += 1  # an operator (or the next delivery) re-runs the key
            world.clock.sleep(60)
            world.injector.twin = redrive  # a redrive may come while the re-run is in flight
        world.injector.twin = world.injector.dup = None
        redrive()  # or after it
        start(attempt + 1)  # a duplicate run after completion: runs no step

        def window(name: str) -> int:
            # its invoke, and the checkpoint write that records it
            faults = model.faults_in(name, f"Save{name}", f"Resync{name}")
            return faults + redriven_at.count(name)

        return lambda: steps_verdict(world, "explore-checkpoints", effects, window)


class FakeDurableContext:
    """The durable SDK's context as handlers/resumable_durable.py uses it: `step` (a named
    step's result checkpointed in `store` and replayed by position; its retry strategy
    deciding retries) and `state.durable_execution_arn`. A sandbox killed mid-run is
    invoked again with the same store: every finished step replays, the one in progress
    runs again, as Lambda's durable runtime does ("Durable functions": replay). Checked
    against the SDK's own local runner in tests/explore/test_models.py."""

    def __init__(self, arn: str, store: dict[int, Any], clock: Clock, injector: Injector) -> None:
        self.state = types.SimpleNamespace(durable_execution_arn=arn)
        self.store, self.clock, self.injector = store, clock, injector
        self.position = 0

    def step(self, func: Callable[[Any], Any], name: str = "", config: Any = None) -> Any:
        from aws_durable_execution_sdk_python.exceptions import (
            DurableOperationError,
            StepError,
        )

        position, self.position = self.position, self.position + 1
        if position in self.store:  # replayed, not run again
            kind, value = self.store[position]
            if kind == "ok":
                return json.loads(value)
            raise StepError(value[1], error_type=value[0]) from DurableOperationError(
                value[1], error_type=value[0]
            )
        attempt = 0
        process = self.injector.processes.me()
        while True:
            attempt += 1
            if process is not None:
                process.label = name  # its calls are this step's, whatever becomes of them
            try:
                result = func(types.SimpleNamespace(logger=None))
            except Exception as exc:
                decision = config.retry_strategy(exc, attempt) if config else None
                if decision is not None and decision.should_retry:
                    self.clock.sleep(decision.delay_seconds)
                    continue
                error = (f"{type(exc).__module__}.{type(exc).__qualname__}", str(exc))
                self.store[position] = ("error", error)
                raise StepError(error[1], error_type=error[0]) from DurableOperationError(
                    error[1], error_type=error[0]
                )
            finally:
                if process is not None:
                    process.label = ""
            self.store[position] = ("ok", json.dumps(result))
            return result


class ResumableDurableScenario(Scenario):
    """Pattern 4 as a durable function: the same runs as the state machine form (a step
    failing for good once, re-runs, another run arriving while the first step's first run
    takes its time, a duplicate run after completion), each invocation of
    the durable handler a Lambda invocation (it may crash or time out: it is invoked again
    and replays its checkpointed steps); its steps invoked through the real step client
    (handlers/resumable_durable.py: step_client) into the Lambda model; no redrive
    (durable executions have none)."""

    name = "4 resumable (durable-function)"

    def clients(self) -> list[Any]:
        return [runtime.client(s) for s in ("dynamodb", "lambda")] + [
            resumable_durable.step_client()
        ]

    def setup(self) -> None:
        checkpoint_table("explore-durable")
        resumable_durable.step_client.cache_clear()  # its client in this moto world
        self.ended: dict[str, str] = {}  # a durable execution's ARN -> its status

    def answer(self, call: Call, request: Any) -> Any:
        """GetDurableExecution, on the network: how a lease holder's execution stands."""
        if call.service != "lambda" or call.operation != "GetDurableExecution":
            return None
        arn = call.params["DurableExecutionArn"]
        status = self.ended.get(arn, "RUNNING")
        body = {"DurableExecutionArn": arn, "Status": status, "StartTimestamp": 0}
        return json_response(request.url, 200, body)

    @contextlib.contextmanager
    def patched(self, world: World) -> Iterator[None]:
        saved = resumable.ResumableDurableSettings.current
        resumable.ResumableDurableSettings.current = classmethod(  # type: ignore[method-assign]
            lambda cls: self.settings
        )
        try:
            with clocked(world.clock, resumable):
                yield
        finally:
            resumable.ResumableDurableSettings.current = saved  # type: ignore[method-assign]

    def run(self, world: World) -> Verdict:
        tag = world.tag
        function = ARN.format("lambda", f"function:workflow-{tag}:1")
        world.injector.models.insert(0, self.answer)
        self.settings = resumable.ResumableDurableSettings(
            table="explore-durable",
            steps=list(STEPS),
            step_functions=[ARN.format("lambda", f"function:{s}") for s in STEPS],
            key_path="$.orderId",
            checkpoint_ttl_seconds=86400,
            retention_seconds=86400,
        )
        broken = {"s2": 3}  # fails all three tries of its first run: the run fails there
        slow = {STEPS[0]}  # its first run takes its time: another run arrives meanwhile
        effects: collections.Counter[str] = collections.Counter()

        def step(name: str) -> Callable[[Any, Any], Any]:
            def effect(payload: dict[str, Any], context: Any) -> Any:
                if broken.get(name):
                    broken[name] -= 1
                    raise StepBroken(f"{name} failed")
                if name in slow:
                    slow.discard(name)
                    arrival(world, lambda: execute(f"{tag}-x"))
                effects[name] += 1
                return {"step": name}

            return effect

        for name in STEPS:
            world.lambdas.register(ARN.format("lambda", f"function:{name}"), step(name))
        # the function itself: the SDK's wrapper (and our log decorator) are the runtime's
        handler = inspect.unwrap(resumable_durable.handler)
        durable = world.lambdas.register(function, lambda event, context: handler(*event))

        def execute(name: str) -> str:
            arn = f"{function}/durable-execution/{name}/1"
            store: dict[int, Any] = {}
            status = "FAILED"
            for replay in range(5):  # a crashed or timed-out invocation is invoked again
                context = FakeDurableContext(arn, store, world.clock, world.injector)
                answer = world.lambdas.run(durable, ({"orderId": tag}, context), f"{name}/{replay}")
                if not isinstance(answer, Failure):
                    status = "SUCCEEDED"
                    break
                if answer.error_type not in ("Runtime.ExitError", "Sandbox.Timedout"):
                    break  # the handler failed: the execution failed
            self.ended[arn] = status
            return status

        attempt = 0
        while execute(tag if not attempt else f"{tag}-r{attempt}") != "SUCCEEDED":
            attempt += 1
            world.clock.sleep(60)
            if attempt > 4:
                break
        execute(f"{tag}-r{attempt + 1}")  # a duplicate run after completion

        def window(name: str) -> int:
            count = 0
            for call in world.injector.calls:
                if call.kind in (None, "twin", "dup", "switch") or not world.injector.hit(call):
                    continue
                count += call.label in (name, f"Save{name}")
            return count

        return lambda: steps_verdict(world, "explore-durable", effects, window)
