"""Lambda, as the explorer's model of it: functions registered by ARN, each invocation a
process of its own (tests/explore/interleave.py) running the real handler with a context
whose clock is the schedule's.

What it follows (AWS Lambda developer guide):
- Synchronous Invoke ("Invoking a Lambda function synchronously"): the caller waits; a
  function error answers 200 with `X-Amz-Function-Error: Unhandled` and the error's
  `errorType` and `errorMessage` in the payload. A function that runs out of time answers
  errorType `Sandbox.Timedout` ("Troubleshoot invocation issues in Lambda"); a sandbox
  that dies, `Runtime.ExitError`.
- A timed-out invocation is not rolled back: the call it was sending still lands, after
  its caller or source moved on; then its sandbox is reset ("Understand the Lambda
  execution environment lifecycle": on a timeout "Lambda shuts down the runtime") and it
  sends nothing more (`timeout`). (The model lets the SDK's own resends of that last call
  out too, a little more than AWS would.) An invocation whose caller stopped waiting (its
  answer lost, its caller timed out: `lost`, `orphan`) runs on to its own end,
  interleaved with whatever runs next.
- Asynchronous invocation ("How Lambda handles errors and retries with asynchronous
  invocation"): a failed event is retried twice, one minute and then two minutes later,
  with the same request id; after the last, the on-failure destination (or DLQ) keeps it.
  The event queue is eventually consistent: "your function might receive the same event
  more than once". Whether such a duplicate keeps the request id is not documented: `dup`
  gives it the same one (the harder case for anything keyed by the id), `twin` another.
- Step Functions' Lambda task ("Handle Lambda service exceptions", Step Functions
  developer guide): a function's error is reported under its errorType; unhandled errors,
  out-of-memory and timeouts as `Lambda.Unknown` (`Sandbox.Timedout` from runtimes that
  report it); a service failure as `Lambda.ServiceException`, a throttle as
  `Lambda.TooManyRequestsException`, a lost answer as `Lambda.SdkClientException`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from botocore.exceptions import ReadTimeoutError

from tests.explore.faults import Call, Clock, Injector, Refused, SandboxDied, json_response
from tests.explore.interleave import DETACHED

Handler = Callable[[Any, Any], Any]


class Context:
    """A Lambda context: its request id, and the time left by the schedule's clock."""

    def __init__(self, request_id: str, clock: Clock | None = None, timeout: float = 30) -> None:
        self.aws_request_id = request_id
        self.function_name = "explored"
        self.invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:explored"
        self.client_context = None
        self._clock = clock
        self._deadline = (clock.now if clock else 0) + timeout
        self._timeout = timeout

    def get_remaining_time_in_millis(self) -> int:
        if self._clock is None:
            return int(self._timeout * 1000)
        return max(0, int((self._deadline - self._clock.now) * 1000))


@dataclasses.dataclass
class Function:
    arn: str
    handler: Handler
    timeout: float = 30.0


@dataclasses.dataclass(frozen=True)
class Failure:
    """An invocation's error as Lambda reports it."""

    error_type: str
    message: str


TIMED_OUT = "Sandbox.Timedout"
DIED = "Runtime.ExitError"


class Lambdas:
    """The registered functions, invoked through the network (a botocore Invoke of a
    registered ARN), by Step Functions (`from_states`) or by a source (`deliver_async`)."""

    def __init__(self, injector: Injector, clock: Clock) -> None:
        self.injector = injector
        self.clock = clock
        self.functions: dict[str, Function] = {}
        self.started: collections.Counter[str] = collections.Counter()  # handler runs
        self.request_ids: collections.Counter[str] = collections.Counter()
        self.serial = 0
        self.ended: dict[str, str] = {}  # process name -> "ok" or the error type it ended with
        self.failures: dict[str, Failure] = {}  # process name -> how it failed
        # process name -> (calls made before it started, before it ended: inf if it went on)
        self.spans: dict[str, tuple[int, float]] = {}
        injector.models.append(self.answer)

    def register(self, arn: str, handler: Handler, timeout: float = 30.0) -> Function:
        function = Function(arn, handler, timeout)
        self.functions[arn] = function
        self.functions[arn.rsplit(":", 1)[-1]] = function  # by name too
        return function

    def lookup(self, name: str) -> Function | None:
        return self.functions.get(unquote(name))

    def _name(self, function: Function, request_id: str) -> str:
        self.serial += 1
        return f"{function.arn.rsplit(':', 1)[-1]}#{self.serial}/{request_id}"

    # -- one invocation ---------------------------------------------------------------------
    def run(self, function: Function, event: Any, request_id: str, name: str = "") -> Any | Failure:
        """The handler, once, as an invocation process (named `name`, or after the function
        and request id): its result, or its Failure."""
        self.started[function.arn] += 1
        self.request_ids[request_id] += 1
        context = Context(request_id, self.clock, function.timeout)
        name = name or self._name(function, request_id)
        start = len(self.injector.calls)
        kind, value = self.injector.processes.call(
            name,
            lambda: function.handler(event, context),
            deadline=self.clock.now + function.timeout,
        )
        self.spans[name] = (start, float("inf") if kind == DETACHED else len(self.injector.calls))
        if kind == DETACHED:
            failure = timed_out(function)
        elif kind == "error":
            failure = failure_of(value)
        else:
            self._end(name, None)
            return value
        self._end(name, failure)
        return failure

    def _end(self, name: str, failure: Failure | None) -> None:
        """How invocation `name` ended: "ok", or its failure's error type (and the failure)."""
        self.ended[name] = "ok" if failure is None else failure.error_type
        if failure is not None:
            self.failures[name] = failure

    def unwaited(self, function: Function, event: Any, request_id: str) -> None:
        """The handler, once, as an invocation nobody waits for (its caller's read timed
        out): run in the background, its end recorded as a waited one's is (its death, its
        error; past its deadline TIMED_OUT, where a waited one refused a call is DIED), its
        span from its first turn (it runs only once nothing else is ready: queued earlier,
        it overlapped nothing). One that made no call is not recorded: it ran not at all,
        as far as anyone can tell (it held nothing, excuses nothing)."""
        self.started[function.arn] += 1
        self.request_ids[request_id] += 1
        context = Context(request_id, self.clock, function.timeout)
        name = self._name(function, request_id)
        deadline = self.clock.now + function.timeout

        def body() -> Any:
            start = len(self.injector.calls)
            failure = result = None
            try:
                result = function.handler(event, context)
            except (SandboxDied, Exception) as exc:  # (its death, or its own error: its end)
                failure = failure_of(exc)
            if self.clock.now > deadline:  # it ran out of time (its next call found it dead)
                failure = timed_out(function)
            if len(self.injector.calls) == start:
                return None
            self.spans[name] = (start, len(self.injector.calls))
            self._end(name, failure)
            return result if failure is None else None

        self.injector.processes.background(name, body, deadline=deadline)

    # -- the network: Invoke of a registered function ----------------------------------------
    def answer(self, call: Call, request: Any) -> Any:
        if call.service != "lambda" or call.operation != "Invoke":
            return None
        function = self.lookup(str(call.params.get("FunctionName", "")))
        if function is None or call.params.get("DurableExecutionName"):
            return None
        payload = call.params.get("Payload") or b"{}"
        event = json.loads(payload.read() if hasattr(payload, "read") else payload)
        request_id = f"sync-{call.index}-{call.sends}"
        if call.kind == "lostall" or (call.kind == "lost" and call.sends == 1):
            # The caller's read times out while the function runs: it runs on, unwaited
            # (the network loses its answer), beside whatever the caller does next.
            self.unwaited(function, event, request_id)
            return json_response(request.url, 200, b"null")
        result = self.run(function, event, request_id)
        if isinstance(result, Failure) and result.error_type == "CallerGaveUp":
            # the function ran past the caller's read timeout (a scenario's slow target)
            raise ReadTimeoutError(endpoint_url=f"explore:Invoke:{function.arn}")
        if isinstance(result, Failure):
            body = {"errorType": result.error_type, "errorMessage": result.message}
            return json_response(request.url, 200, body, {"X-Amz-Function-Error": "Unhandled"})
        return json_response(request.url, 200, json.dumps(result).encode())

    # -- Step Functions' Lambda task -----------------------------------------------------------
    def from_states(self, function_arn: str, payload: Any, execution: str) -> tuple[str, Any]:
        """("ok", the payload) or ("error", the error name Step Functions reports)."""
        function = self.lookup(function_arn)
        assert function is not None, f"no function {function_arn} in the model"
        request_id = f"{execution}/{self.clock.now}"
        # An answer lost while the function runs: it runs on, unwaited, beside the retry.
        unwaited = self.injector.faults.get(len(self.injector.calls)) in ("lost", "lostall")

        def invoke() -> Any:
            if not unwaited or self.injector.paused:
                return self.run(function, payload, request_id)
            self.unwaited(function, payload, request_id)
            return None

        try:
            result = self.injector.around(
                "lambda",
                f"Invoke:{function_arn.rsplit(':', 1)[-1]}",
                {"FunctionName": function_arn},
                invoke,
            )
        except Refused as exc:
            if exc.kind == "throttle":
                return "error", "Lambda.TooManyRequestsException"
            return "error", "Lambda.ServiceException"
        except ReadTimeoutError:
            return "error", "Lambda.SdkClientException"
        if isinstance(result, Failure):
            if result.error_type == DIED:
                return "error", "Lambda.Unknown"
            # the function's own error: its name, and the cause Step Functions records
            cause = json.dumps({"errorType": result.error_type, "errorMessage": result.message})
            return "error", (result.error_type, cause)
        return "ok", result

    # -- an asynchronous source ------------------------------------------------------------------
    def deliver_async(
        self,
        function: Function,
        event: Any,
        request_id: str,
        on_retry: Callable[[], None] = lambda: None,
        label: str = "",
        attempts: list[str] | None = None,
    ) -> tuple[str, Any]:
        """Lambda's asynchronous invocation of an event: the first try and two retries, 1 and
        2 minutes apart, each with the same request id; ("ok", result), or ("dlq", the last
        Failure) when all three failed (the on-failure destination keeps the event).
        `attempts` gathers the attempts' process names (`label#n`)."""
        last: Any = None
        for attempt in range(3):
            if attempt:
                self.clock.sleep(60 * attempt)
                on_retry()  # a retry may land in a fresh sandbox (a cold start)
            name = f"{label or request_id}#{attempt}"
            if attempts is not None:
                attempts.append(name)
            result = self.run(function, event, request_id, name)
            if not isinstance(result, Failure):
                return "ok", result
            last = result
        return "dlq", last


def timed_out(function: Function) -> Failure:
    return Failure(TIMED_OUT, f"Task timed out after {function.timeout:.2f} seconds")


def failure_of(exc: BaseException) -> Failure:
    """An invocation's end by `exc`: its sandbox's death, or the function's own error."""
    if isinstance(exc, SandboxDied):
        return Failure(DIED, "the sandbox died")
    return Failure(type(exc).__name__, str(exc))
