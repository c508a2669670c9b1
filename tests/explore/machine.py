"""A model of Step Functions running our generated state machines (JSONPath only, the
subset components/ generate): Task (dynamodb:updateItem, lambda:invoke), Choice, Wait,
Succeed, Fail; Parameters with `.$` paths and the intrinsics we use (States.Format,
States.JsonToString, States.StringToJson); ResultSelector, ResultPath; Retry and Catch.
DynamoDB tasks call moto through a client of their own that never retries (Step Functions'
integration answers the task; the state's Retry decides), attached to the explorer's
network; Lambda tasks invoke the real handlers through the Lambda model
(tests/explore/lambdas.py), each a process of its own. A redrive restarts a failed run at
the state that failed, with the input that state had (Step Functions' RedriveExecution).

What it follows (Step Functions developer guide):
- "Handling errors in Step Functions workflows": `States.ALL` matches any error name but
  `States.DataLimitExceeded` and `States.Runtime`, which no Retry or Catch matches;
  `States.TaskFailed` any task failure but a `States.Timeout`. Retriers are tried in
  order, the first whose ErrorEquals names the error decides: IntervalSeconds (1),
  MaxAttempts (3; 0 never), BackoffRate (2.0), MaxDelaySeconds, JitterStrategy FULL (a
  random delay up to the computed one).
- "Context object": `$$.Execution.Id`, `$$.Execution.Name`, `$$.State.EnteredTime`,
  `$$.State.Name`, `$$.State.RetryCount` (the retries of the state so far).
- "Wait": a timestamp counts whole seconds: "Step Functions considers the time value up
  to seconds and truncates milliseconds".
- DynamoDB integration errors: `DynamoDB.<AWS error code>`; a lost answer (the SDK's
  client error) as `DynamoDB.SdkClientException`.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import math
import random
import re
from typing import Any

from botocore.config import Config
from botocore.exceptions import ClientError

from tests.explore.faults import Clock, Injector, SandboxDied
from tests.explore.lambdas import Lambdas

TERMINAL = frozenset({"States.Runtime", "States.DataLimitExceeded"})  # never retried nor caught
# The integration's own client: one send per task attempt (the state's Retry retries).
INTEGRATION = Config(retries={"total_max_attempts": 1, "mode": "standard"})


class TaskError(Exception):
    def __init__(self, name: str, cause: str = "") -> None:
        super().__init__(f"{name}: {cause}")
        self.name, self.cause = name, cause


@dataclasses.dataclass
class Run:
    status: str = "RUNNING"  # SUCCEEDED | FAILED
    error: str = ""
    cause: str = ""
    failed_state: str = ""
    failed_input: Any = None
    output: Any = None
    entered: list[str] = dataclasses.field(default_factory=list)


def ended(arn: str, run: Run, now: float) -> None:
    """The execution as DescribeExecution reports it once `run` ended at `now` (the
    explorer's clock): moto runs no state machine, it only keeps the record. A redrive
    leaves the record as it was until the redriven run ends: DescribeExecution "is
    eventually consistent ... may not reflect very recent updates and changes", and the
    explorer takes the worst of it."""
    from moto.stepfunctions.models import stepfunctions_backends

    _, _, _, region, account, *_ = arn.split(":")
    execution = stepfunctions_backends[account][region].describe_execution(arn)
    execution.status = run.status
    execution.stop_date = dt.datetime.fromtimestamp(now, dt.UTC)
    execution.error, execution.cause = run.error or None, run.cause or None


class Machine:
    def __init__(
        self,
        definition: dict[str, Any],
        lambdas: Lambdas,
        clock: Clock,
        injector: Injector,
        dynamodb: Any,
        rng: random.Random | None = None,
    ) -> None:
        """`dynamodb`: the integration's DynamoDB client (`integration_client`), attached to
        the explorer's network."""
        self.definition = definition
        self.lambdas = lambdas
        self.clock = clock
        self.injector = injector
        self.dynamodb = dynamodb
        self.rng = rng or random.Random(0)
        self.state_of_call: dict[int, str] = {}  # the explorer's call index -> its state

    # -- paths, parameters, intrinsics ----------------------------------------------------
    def _context(self, execution_id: str, state: str, retries: int) -> dict[str, Any]:
        entered = (
            dt.datetime.fromtimestamp(self.clock.time(), dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[
                :-3
            ]
            + "Z"
        )
        name = execution_id.rsplit(":", 1)[-1]
        return {
            "Execution": {"Id": execution_id, "Name": name},
            "State": {"EnteredTime": entered, "Name": state, "RetryCount": retries},
        }

    @staticmethod
    def path(document: Any, path: str) -> Any:
        if path == "$":
            return document
        value = document
        for part in path.removeprefix("$.").split("."):
            if not isinstance(value, dict) or part not in value:
                raise TaskError("States.Runtime", f"no {path}")
            value = value[part]
        return value

    def expression(self, text: str, document: Any, context: dict[str, Any]) -> Any:
        text = text.strip()
        if text.startswith("$$."):
            return self.path(context, "$." + text.removeprefix("$$."))
        if text.startswith("$"):
            return self.path(document, text)
        found = re.fullmatch(r"(States\.\w+)\((.*)\)", text, re.S)
        if not found:
            raise TaskError("States.Runtime", f"cannot evaluate {text}")
        function, arguments = found.groups()
        if function == "States.Format":
            template, *rest = _arguments(arguments)
            values = [self.expression(a, document, context) for a in rest]
            pieces = template.strip("'").split("{}")
            return "".join(
                p + (str(v) if i < len(values) else "")
                for i, (p, v) in enumerate(zip(pieces, [*values, ""], strict=False))
            )
        if function == "States.JsonToString":
            return json.dumps(self.expression(arguments, document, context), separators=(",", ":"))
        if function == "States.StringToJson":
            return json.loads(self.expression(arguments, document, context))
        raise TaskError("States.Runtime", f"no intrinsic {function}")

    def resolve(self, template: Any, document: Any, context: dict[str, Any]) -> Any:
        if isinstance(template, dict):
            out = {}
            for key, value in template.items():
                if key.endswith(".$"):
                    out[key[:-2]] = self.expression(value, document, context)
                else:
                    out[key] = self.resolve(value, document, context)
            return out
        if isinstance(template, list):
            return [self.resolve(v, document, context) for v in template]
        return template

    @staticmethod
    def place(document: Any, result_path: str | None, result: Any) -> Any:
        if result_path is None:
            return document
        if result_path == "$":
            return result
        out = copy.deepcopy(document)
        target = out
        parts = result_path.removeprefix("$.").split(".")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = result
        return out

    # -- tasks -------------------------------------------------------------------------------
    def task(self, state: dict[str, Any], parameters: dict[str, Any], execution: str) -> Any:
        resource = state["Resource"]
        if resource == "arn:aws:states:::dynamodb:updateItem":
            try:
                return self.dynamodb.update_item(**parameters)
            except ClientError as exc:
                raise TaskError(f"DynamoDB.{exc.response['Error']['Code']}", str(exc)) from None
            except SandboxDied:
                raise
            except Exception as exc:  # (an answer lost: the SDK's client error)
                raise TaskError("DynamoDB.SdkClientException", repr(exc)) from None
        if resource == "arn:aws:states:::lambda:invoke":
            kind, answer = self.lambdas.from_states(
                parameters["FunctionName"], parameters["Payload"], execution
            )
            if kind == "error":  # the error's name, or (its name, its cause)
                error, cause = answer if isinstance(answer, tuple) else (answer, "")
                raise TaskError(error, cause or f"{parameters['FunctionName']} failed")
            return {"Payload": answer, "StatusCode": 200}
        raise TaskError("States.Runtime", f"the model has no {resource}")

    # -- the run -----------------------------------------------------------------------------
    def run(
        self,
        execution_id: str,
        document: Any,
        start_at: str | None = None,
        max_states: int = 500,
    ) -> Run:
        run = Run()
        name = start_at or self.definition["StartAt"]
        states = self.definition["States"]
        for _ in range(max_states):
            state = states[name]
            run.entered.append(name)
            kind = state["Type"]
            if kind == "Succeed":
                run.status, run.output = "SUCCEEDED", document
                return run
            if kind == "Fail":
                run.status, run.error, run.failed_state = "FAILED", state.get("Error", ""), name
                run.failed_input = document
                return run
            if kind == "Wait":
                self.clock.now = max(self.clock.now, wake(state, document, self.clock.now))
                name = state["Next"]
                continue
            if kind == "Choice":
                name = next(
                    (c["Next"] for c in state["Choices"] if _matches(c, document, self)),
                    state.get("Default", ""),
                )
                if not name:
                    return self._failed(run, "States.Runtime", name, document)
                continue
            # a Task, with its retries, then its Catch
            caught_next = ""
            attempts: dict[int, int] = {}
            retries = 0
            while True:
                first = len(self.injector.calls)
                context = self._context(execution_id, name, retries)
                try:
                    parameters = self.resolve(state.get("Parameters", {}), document, context)
                    result = self.task(state, parameters, execution_id)
                    break
                except TaskError as error:
                    self._attribute(first, name)
                    if error.name in TERMINAL:
                        return self._failed(run, error.name, name, document, error.cause)
                    retrier = _first(state.get("Retry", []), error.name)
                    if retrier is not None:
                        index, rule = retrier
                        attempts[index] = attempts.get(index, 0) + 1
                        if attempts[index] <= rule.get("MaxAttempts", 3):
                            self.clock.sleep(self.delay(rule, attempts[index]))
                            retries += 1
                            continue
                    catcher = _first(state.get("Catch", []), error.name)
                    if catcher is None:
                        return self._failed(run, error.name, name, document, error.cause)
                    rule = catcher[1]
                    caught = {"Error": error.name, "Cause": error.cause}
                    document = self.place(document, rule.get("ResultPath", "$"), caught)
                    caught_next = rule["Next"]
                    break
            self._attribute(first, name)
            if caught_next:
                name = caught_next
                continue
            if "ResultSelector" in state:
                result = self.resolve(state["ResultSelector"], result, context)
            document = self.place(document, state.get("ResultPath", "$"), result)
            if state.get("End"):
                run.status, run.output = "SUCCEEDED", document
                return run
            name = state["Next"]
        raise AssertionError(f"more than {max_states} states: a loop")

    def delay(self, rule: dict[str, Any], attempt: int) -> float:
        """A retrier's wait before its `attempt`-th retry."""
        delay = rule.get("IntervalSeconds", 1) * rule.get("BackoffRate", 2.0) ** (attempt - 1)
        delay = min(delay, rule.get("MaxDelaySeconds", delay))
        if rule.get("JitterStrategy") == "FULL":
            delay = self.rng.uniform(0, delay)
        return float(delay)

    @staticmethod
    def _failed(run: Run, error: str, state: str, document: Any, cause: str = "") -> Run:
        run.status, run.error, run.failed_state, run.failed_input = "FAILED", error, state, document
        run.cause = cause
        return run

    def _attribute(self, first: int, state: str) -> None:
        for index in range(first, len(self.injector.calls)):
            self.state_of_call.setdefault(index, state)

    def faults_in(self, *states: str) -> int:
        """Faults the explorer injected at calls these states made (a twin or a switch,
        which change no call, are no fault of that call)."""
        count = 0
        for call in self.injector.calls:
            if call.kind in ("twin", "dup", "switch", None) or not self.injector.hit(call):
                continue
            count += self.state_of_call.get(call.index) in states
        return count


def wake(state: dict[str, Any], document: Any, entered: float) -> float:
    """When a Wait ends: a timestamp to the whole second (milliseconds truncated), or whole
    seconds after it began."""
    if "Seconds" in state or "SecondsPath" in state:
        seconds = state.get("Seconds")
        if seconds is None:
            seconds = Machine.path(document, state["SecondsPath"])
        return entered + int(seconds)
    stamp = state.get("Timestamp") or Machine.path(document, state["TimestampPath"])
    return math.floor(dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())


def integration_client(service: str) -> Any:
    import boto3

    return boto3.client(service, region_name="us-east-1", config=INTEGRATION)  # type: ignore[call-overload]


def _arguments(text: str) -> list[str]:
    """A function call's arguments: quoted strings and paths, split on top-level commas."""
    out, depth, quoted, current = [], 0, False, ""
    for char in text:
        if char == "'" and depth == 0:
            quoted = not quoted
        if char == "," and depth == 0 and not quoted:
            out.append(current.strip())
            current = ""
            continue
        depth += char == "("
        depth -= char == ")"
        current += char
    out.append(current.strip())
    return out


def matches(names: list[str], error: str) -> bool:
    """Whether an ErrorEquals list names `error` (the wildcards as the guide defines them)."""
    if error in TERMINAL:
        return False
    if error in names or "States.ALL" in names:
        return True
    return "States.TaskFailed" in names and error != "States.Timeout"


def _first(rules: list[dict[str, Any]], error: str) -> tuple[int, dict[str, Any]] | None:
    for index, rule in enumerate(rules):
        if matches(rule["ErrorEquals"], error):
            return index, rule
    return None


def _matches(rule: dict[str, Any], document: Any, machine: Machine) -> bool:
    if "Not" in rule:
        return not _matches(rule["Not"], document, machine)
    try:
        value = machine.path(document, rule["Variable"])
        present = True
    except TaskError:
        value, present = None, False
    if "IsPresent" in rule:
        return present == rule["IsPresent"]
    if "StringEquals" in rule:
        return present and value == rule["StringEquals"]
    raise AssertionError(f"the model has no such Choice rule: {rule}")
