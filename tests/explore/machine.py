"""A small model of Step Functions running our generated state machines (JSONPath only, the
subset components/ generate): Task (dynamodb:updateItem, lambda:invoke), Choice, Wait,
Succeed, Fail; Parameters with `.$` paths and the intrinsics we use (States.Format,
States.JsonToString, States.StringToJson); ResultSelector, ResultPath; Retry and Catch by
error name. DynamoDB tasks call moto through the handlers' client (so the explorer's faults
reach them); Lambda tasks call Python functions through `Injector.around`, counted and
faulted as AWS calls. A redrive restarts a failed run at the state that failed, with the
input that state had (Step Functions' RedriveExecution).

Error names as Step Functions reports them: `DynamoDB.<Code>` for a DynamoDB error, the
function's exception class for a Lambda error, `Lambda.ServiceException` for a failed
invoke, `States.TaskFailed` for an answer lost in a timeout.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from exactly_once.handlers import runtime
from tests.explore.faults import Clock, Injector, SandboxDied, around


class TaskError(Exception):
    def __init__(self, name: str, cause: str = "") -> None:
        super().__init__(f"{name}: {cause}")
        self.name, self.cause = name, cause


@dataclasses.dataclass
class Run:
    status: str = "RUNNING"  # SUCCEEDED | FAILED
    error: str = ""
    failed_state: str = ""
    failed_input: Any = None
    output: Any = None
    entered: list[str] = dataclasses.field(default_factory=list)


class Machine:
    def __init__(
        self,
        definition: dict[str, Any],
        lambdas: dict[str, Callable[[Any], Any]],
        clock: Clock,
        injector: Injector,
    ) -> None:
        self.definition = definition
        self.lambdas = lambdas
        self.clock = clock
        self.injector = injector
        self.state_of_call: dict[int, str] = {}  # the explorer's call index -> its state

    # -- paths, parameters, intrinsics ----------------------------------------------------
    def _context(self, execution_id: str) -> dict[str, Any]:
        entered = dt.datetime.fromtimestamp(self.clock.time(), dt.UTC).isoformat()
        name = execution_id.rsplit(":", 1)[-1]
        return {"Execution": {"Id": execution_id, "Name": name}, "State": {"EnteredTime": entered}}

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
    def task(self, state: dict[str, Any], parameters: dict[str, Any]) -> Any:
        resource = state["Resource"]
        if resource == "arn:aws:states:::dynamodb:updateItem":
            try:
                return runtime.client("dynamodb").update_item(**parameters)
            except ClientError as exc:
                raise TaskError(f"DynamoDB.{exc.response['Error']['Code']}", str(exc)) from None
            except (Exception, SandboxDied) as exc:  # (an answer lost)
                raise TaskError("States.TaskFailed", repr(exc)) from None
        if resource == "arn:aws:states:::lambda:invoke":
            function = self.lambdas[parameters["FunctionName"]]
            try:
                answer = around(
                    self.injector,
                    f"Invoke:{parameters['FunctionName']}",
                    lambda: function(parameters["Payload"]),
                )
            except (Exception, SandboxDied) as exc:  # (named as Step Functions would)
                failed = lambda_error(exc)
                raise TaskError(failed.name, failed.cause) from None
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
            context = self._context(execution_id)
            kind = state["Type"]
            if kind == "Succeed":
                run.status, run.output = "SUCCEEDED", document
                return run
            if kind == "Fail":
                run.status, run.error, run.failed_state = "FAILED", state.get("Error", ""), name
                run.failed_input = document
                return run
            if kind == "Wait":
                stamp = self.path(document, state["TimestampPath"])
                when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
                self.clock.now = max(self.clock.now, when)
                name = state["Next"]
                continue
            if kind == "Choice":
                name = next(
                    (c["Next"] for c in state["Choices"] if _matches(c, document, self)),
                    state.get("Default", ""),
                )
                continue
            # a Task, with its retries, then its Catch
            caught_next = ""
            attempts: dict[int, int] = {}
            while True:
                first = len(self.injector.calls)
                try:
                    parameters = self.resolve(state.get("Parameters", {}), document, context)
                    result = self.task(state, parameters)
                    break
                except TaskError as error:
                    self._attribute(first, name)
                    retrier = _first(state.get("Retry", []), error.name)
                    if retrier is not None:
                        index, rule = retrier
                        attempts[index] = attempts.get(index, 0) + 1
                        if attempts[index] <= rule.get("MaxAttempts", 3):
                            delay = rule.get("IntervalSeconds", 1) * rule.get(
                                "BackoffRate", 2.0
                            ) ** (attempts[index] - 1)
                            self.clock.advance(min(delay, rule.get("MaxDelaySeconds", delay)))
                            continue
                    catcher = _first(state.get("Catch", []), error.name)
                    if catcher is None:
                        run.status, run.error, run.failed_state = "FAILED", error.name, name
                        run.failed_input = document
                        return run
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

    def _attribute(self, first: int, state: str) -> None:
        for index in range(first, len(self.injector.calls)):
            self.state_of_call.setdefault(index, state)

    def faults_in(self, *states: str) -> int:
        """Faults the explorer injected at calls these states made (a twin, run before a
        call, is no fault of that call)."""
        count = 0
        for fault in self.injector.injected:
            if fault.startswith("twin@"):
                continue
            index = int(fault.split("@")[1].split(":")[0])
            count += self.state_of_call.get(index) in states
        return count


class _LambdaError(Exception):
    def __init__(self, name: str, cause: str) -> None:
        super().__init__(name)
        self.name, self.cause = name, cause


def lambda_error(exc: BaseException) -> _LambdaError:
    """How Step Functions names a Lambda task's failure."""
    if isinstance(exc, ClientError | SandboxDied):
        return _LambdaError("Lambda.ServiceException", repr(exc))
    if type(exc).__name__ in ("ReadTimeoutError",):
        return _LambdaError("Lambda.SdkClientException", repr(exc))
    return _LambdaError(type(exc).__name__, str(exc))


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


def _first(rules: list[dict[str, Any]], error: str) -> tuple[int, dict[str, Any]] | None:
    for index, rule in enumerate(rules):
        names = rule["ErrorEquals"]
        if (
            error in names
            or "States.ALL" in names
            or ("States.TaskFailed" in names and error != "States.Timeout")
        ):
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
