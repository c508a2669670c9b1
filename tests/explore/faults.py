"""The fault explorer's machinery: every AWS call a handler makes, seen at botocore's event
hooks, and a fault injected at any of them, where AWS would put it: on the wire, under the
client's own retry configuration.

The injector stands in for the network: it replaces moto's request stub on each client it
is attached to, so every send (an API call's first request and each of botocore's
retries) passes through it to the service (moto, or a model of ours: Lambda's invocations,
durable executions). A fault is (call index, kind); kinds, at the API call with that index:

- `error`: the call's first send is refused (503): nothing happened; botocore retries it
  as the client's retry configuration says (standard mode: `max_attempts` retries,
  `total_max_attempts` sends), or the caller sees the error.
- `fail`: every send is refused: the caller sees the error whatever its retries (as when
  the SDK's retry quota is spent: standard mode, 500 tokens, 5 per throttled retry, 14
  per other).
- `throttle`: every send is throttled (the service's throttling code): botocore retries
  throttles with its back-off, spending its quota, then the caller sees it.
- `lost`: the first send takes effect and its answer is lost (a read timeout); botocore
  sends it again if its configuration allows (the second answer is the caller's: a
  conditional write then fails its own condition), else the caller sees the timeout.
- `lostall`: every send takes effect and loses its answer.
- `crash`: the call takes effect and the sandbox dies right after: its invocation ends
  with no answer and makes no further call (no `finally`, no `except BaseException` of
  the handler's reaches AWS).
- `timeout`: the invocation making the call runs out of time just as it sends it:
  whoever waits for it (the source, Step Functions, a synchronous caller) sees the
  timeout at once, while the call in flight still lands, later, beside the retry; then
  the invocation is dead.
- `orphan`: the invocation that synchronously invoked this one runs out of time (its
  caller sees the timeout and may retry) while this one goes on to its own end: Lambda
  stops a timed-out function, not the functions it invoked.
- `twin`: a concurrent duplicate of the work (another delivery, a fresh request id)
  starts just before the call and runs beside it, interleaved call by call.
- `dup`: the same, as the same invocation delivered twice (the same request id).
- `switch`: the running process steps back and the next one runs (after a twin, a
  timeout: their calls interleave).
- `stale`: a read of a global secondary index answers from the index's eventually
  consistent view (tests/explore/dynamo.py).
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ReadTimeoutError
from moto.core.botocore_stubber import MockRawResponse
from moto.core.models import botocore_stubber

from tests.explore.interleave import Interleaver, SandboxDied

NETWORK = ("error", "fail", "throttle", "lost", "lostall")
KINDS = (*NETWORK, "crash", "timeout", "orphan", "twin", "dup", "switch", "stale")
# A service's throttling answer (code, HTTP status), as its API reference gives it.
THROTTLES = {
    "dynamodb": ("ProvisionedThroughputExceededException", 400),
    "lambda": ("TooManyRequestsException", 429),
    "s3": ("SlowDown", 503),
    "sns": ("Throttling", 400),
}
DEFAULT_THROTTLE = ("ThrottlingException", 400)
LATENCY = 0.01  # seconds an API call takes, by the schedule's clock
ORPHAN_MARGIN = 60.0  # an orphaned invocation's next call comes this long before its end


@dataclasses.dataclass(frozen=True)
class Fault:
    call: int
    kind: str

    def __str__(self) -> str:
        return f"{self.kind}@{self.call}"

    @staticmethod
    def parse(text: str) -> tuple[Fault, ...]:
        """`kind@call,kind@call`: a schedule as `str` prints it."""
        faults = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            kind, _, call = part.partition("@")
            assert kind in KINDS, f"no fault kind {kind!r} ({', '.join(KINDS)})"
            faults.append(Fault(int(call), kind))
        return tuple(faults)


class Clock:
    """Epoch seconds the handlers (and botocore's retry back-off) read instead of the wall
    clock; sleeps, the source's retry delays and a Wait advance it. Whoever sleeps lets
    the others run meanwhile."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start
        self.sleeper: Callable[[float], object] | None = None

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Time passes, and the caller goes on (an AWS call's own latency)."""
        self.now += max(0.0, seconds)

    def sleep(self, seconds: float) -> None:
        """Time passes while the caller waits: the others run meanwhile (`sleeper`: the
        schedule's processes, tests/explore/interleave.py)."""
        if self.sleeper is None:
            self.advance(seconds)
        else:
            self.sleeper(seconds)


@dataclasses.dataclass
class Call:
    """One API call, as the explorer saw it."""

    index: int
    service: str
    operation: str
    params: dict[str, Any]
    kind: str | None  # the fault at it
    invocation: bool  # made inside a Lambda invocation (it may crash or time out there)
    process: str = ""  # the explorer process that made it
    label: str = ""  # what that process was doing (a durable step's name)
    lineage: tuple[str, ...] = ()  # that process and the ones it runs for (its callers)
    sends: int = 0
    effects: int = 0  # sends that reached the service
    answers: list[int] = dataclasses.field(default_factory=list)  # the service's statuses

    @property
    def took_effect(self) -> bool:
        """Whether a send reached the service and it said yes (2xx), seen or not."""
        return any(200 <= status < 300 for status in self.answers)

    @property
    def name(self) -> str:
        return f"{self.service}.{self.operation}"

    invoked_in: str = ""  # the invocation it was made in (its process, or a thread of it)
    stale_differs: bool = False  # an index read the lagging index would answer otherwise
    sends_allowed: int = 0  # by its client's retry configuration (0: not a botocore call)
    nested: bool = False  # its invocation was invoked by another, which waits for it
    twins: bool = False  # the scenario had a twin ready to start at it

    @property
    def index_read(self) -> bool:
        return self.operation == "Query" and "IndexName" in self.params


Model = Callable[[Call, Any], "AWSResponse | None"]
"""A service model: the answer to a send of `call` (None: not this model's; moto answers)."""


class Injector:
    """The network of one schedule: counts the API calls (in order, over every client and
    process), injects `faults` at their indexes, and passes each send to the service."""

    def __init__(
        self,
        faults: Iterable[Fault] = (),
        processes: Interleaver | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.faults = {fault.call: fault.kind for fault in faults}
        self.processes = processes or Interleaver()
        self.clock = clock
        self.calls: list[Call] = []
        self.injected: list[str] = []
        self.apis: set[str] = set()  # service.Operation[.Parameter] of every call seen
        self.models: list[Model] = []
        # What a fault starts: the scenario's concurrent twin (fresh request id, or the same)
        self.twin: Callable[[], None] | None = None
        self.dup: Callable[[], None] | None = None
        self.stale: Callable[[Call], Any] | None = None  # the index's stale answer
        self.lagging: Callable[[Call], bool] | None = None  # would `stale` answer otherwise?
        self.observers: list[Callable[[Call], None]] = []  # told of every write that landed
        self._local = threading.local()

    # -- a look at the world, never faulted or counted ---------------------------------------
    @property
    def paused(self) -> bool:
        return bool(getattr(self._local, "paused", False))

    @paused.setter
    def paused(self, value: bool) -> None:
        self._local.paused = value

    def _stack(self) -> list[Any]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    # -- attaching to a client -----------------------------------------------------------------
    def attach(self, client: Any) -> None:
        events = client.meta.events
        service = client.meta.service_model.service_name

        def params(params: Any, model: Any, **kwargs: Any) -> None:
            self._stack().append(("params", dict(params)))
            self.apis.add(f"{service}.{model.name}")
            self.apis.update(f"{service}.{model.name}.{parameter}" for parameter in params)

        sends = client.meta.config.retries or {}
        allowed = int(sends.get("total_max_attempts") or (sends.get("max_attempts", 2) + 1))

        def before(model: Any, **kwargs: Any) -> None:
            self._before(service, model.name, allowed)

        def after(**kwargs: Any) -> None:
            self._after()

        def network(request: Any, **kwargs: Any) -> AWSResponse | None:
            return self._network(client, request, kwargs)

        events.register_last("provide-client-params.*.*", params, unique_id="explore-params")
        events.register_first("before-call.*.*", before, unique_id="explore-before")
        events.register_last("after-call.*.*", after, unique_id="explore-after")
        events.register_last("after-call-error.*.*", after, unique_id="explore-after-error")
        events.unregister("before-send", botocore_stubber)
        events.register("before-send", network, unique_id="explore-network")

    @staticmethod
    def detach(client: Any) -> None:
        events = client.meta.events
        for event, unique_id in (
            ("provide-client-params.*.*", "explore-params"),
            ("before-call.*.*", "explore-before"),
            ("after-call.*.*", "explore-after"),
            ("after-call-error.*.*", "explore-after-error"),
            ("before-send", "explore-network"),
        ):
            events.unregister(event, unique_id=unique_id)
        events.register("before-send", botocore_stubber)

    # -- the hooks -------------------------------------------------------------------------
    def _before(self, service: str, operation: str, sends_allowed: int = 0) -> None:
        stack = self._stack()
        params = stack.pop()[1] if stack and stack[-1][0] == "params" else {}
        if self.paused:
            stack.append(("look", Call(-1, service, operation, params, None, False)))
            return
        self.alive(f"{service}.{operation}")
        call = self.count(service, operation, params)
        call.sends_allowed = sends_allowed
        if call.index_read and self.lagging is not None:
            call.stale_differs = self.lagging(call)
        stack.append(("call", call))
        self._before_effect(call)
        try:  # (a twin or a switch may have taken its time: past its timeout, it is dead)
            self.alive(call.name)
        except SandboxDied:
            stack.pop()
            raise

    def alive(self, what: str) -> None:
        """A dead sandbox makes no call; nor does an invocation past its timeout."""
        invocation = self.processes.invocation()
        if invocation is None:
            return
        deadline = invocation.deadline
        if deadline is not None and self.clock is not None and self.clock.now > deadline:
            invocation.dead = True
        if invocation.dead:
            raise SandboxDied(f"a dead sandbox would call {what}")

    def count(self, service: str, operation: str, params: dict[str, Any]) -> Call:
        if self.clock is not None:
            self.clock.advance(LATENCY)  # time passes between calls (a lock can expire)
        index = len(self.calls)
        me = self.processes.me()
        call = Call(
            index,
            service,
            operation,
            params,
            self.faults.get(index),
            self.processes.invocation() is not None,
            me.name if me is not None else "",
            me.label if me is not None else "",
            lineage(me),
        )
        invocation = self.processes.invocation()
        call.invoked_in = invocation.name if invocation is not None else ""
        call.nested = self.caller() is not None
        call.twins = self.twin is not None or self.dup is not None
        self.calls.append(call)
        return call

    def _before_effect(self, call: Call) -> None:
        """The faults that come before a call's effect: another process's turn, a timeout.
        Each is recorded as it begins (the process making the call may resume much later)."""
        kind = call.kind
        label = f"{kind}@{call.index}:{call.operation}"
        processes = self.processes
        if kind in ("twin", "dup"):
            start = self.twin if kind == "twin" else (self.dup or self.twin)
            if start is not None and processes.me() is not None:
                self.injected.append(label)
                processes.spawn(label, start)
        elif kind == "switch" and processes.me() is not None:
            self.injected.append(label)
            if not processes.switch():
                self.injected.remove(label)
        elif kind == "timeout":  # (at a call of the invocation's, or of a thread of it)
            invocation = processes.invocation()
            if invocation is not None:
                self.time_out(invocation, label)
        elif kind == "orphan":
            caller = self.caller()
            if caller is not None:
                self.time_out(caller, label)
                # it was deep in something long when its caller's time ran out (why else
                # would it outlive it): its next step comes as late as its own time allows
                me = processes.invocation()
                if me is not None and me.deadline is not None and self.clock is not None:
                    processes.sleep(max(0.0, me.deadline - ORPHAN_MARGIN - self.clock.now))

    def time_out(self, invocation: Any, label: str) -> None:
        """`invocation` reaches its timeout: the clock is at its deadline (a function times
        out at its configured timeout, not before), and its waiter sees the timeout. An
        invocation nobody waits for (its caller's read timed out) is left be: the fault
        does not apply, and the clock stays where it is (moved, it delayed everything
        after it with no fault recorded to excuse the delay)."""
        if invocation.waited_by is None:
            return
        self.injected.append(label)
        if invocation.deadline is not None and self.clock is not None:
            self.clock.now = max(self.clock.now, invocation.deadline)
        applied = self.processes.time_out(invocation)
        assert applied, f"{invocation} was waited for, yet did not time out"

    def caller(self) -> Any:
        """The invocation waiting for the one making this call, if any."""
        invocation = self.processes.invocation()
        process = invocation.parent if invocation is not None else None
        while process is not None and not process.invocation:
            process = process.parent
        return process if process is not None and process.waited_by is not None else None

    def _after(self) -> None:
        stack = self._stack()
        call = stack.pop()[1] if stack and stack[-1][0] in ("call", "look") else None
        if call is None or call.index < 0:
            return
        if call.kind == "crash" and call.effects:
            self.die(call, "crash")
        invocation = self.processes.invocation()
        if invocation is not None and invocation.dying:
            self.die(call, "")  # out of time: its last call landed

    def die(self, call: Call, kind: str) -> None:
        """The sandbox of the invocation making `call` dies (a no-op outside any: Step
        Functions or a source has no sandbox to lose)."""
        process = self.processes.invocation()
        if process is None:
            return
        if kind:
            self.injected.append(f"{kind}@{call.index}:{call.operation}")
        process.dead = True
        self.processes.interrupt(process)  # (its threads waiting for another die with it)
        raise SandboxDied(f"killed after {call.name}")

    def _current(self) -> Call | None:
        for kind, value in reversed(self._stack()):
            if kind in ("call", "look"):
                return value  # type: ignore[no-any-return]
        return None

    def _network(self, client: Any, request: Any, kwargs: dict[str, Any]) -> AWSResponse | None:
        call = self._current()
        if call is None or call.index < 0:  # a look at the world, or a call not counted
            return self.service(client, call, request, kwargs)
        send = call.sends
        call.sends += 1
        kind = call.kind
        model = client.meta.service_model
        operation = model.operation_model(call.operation)
        if (kind == "error" and send == 0) or kind == "fail":
            self.injected.append(f"{kind}@{call.index}:{call.operation}#{send}")
            return error_response(request.url, operation, "ServiceUnavailable", 503)
        if kind == "throttle":
            code, status = THROTTLES.get(call.service, DEFAULT_THROTTLE)
            self.injected.append(f"throttle@{call.index}:{call.operation}#{send}")
            return error_response(request.url, operation, code, status)
        if kind == "stale" and call.index_read and self.stale is not None:
            self.injected.append(f"stale@{call.index}:{call.operation}")
            call.effects += 1
            call.answers.append(200)
            return json_response(request.url, 200, self.stale(call))
        answer = self.service(client, call, request, kwargs)
        call.effects += 1
        call.answers.append(getattr(answer, "status_code", 200))
        if 200 <= call.answers[-1] < 300:
            self.observe(call)
        if (kind == "lost" and send == 0) or kind == "lostall":
            self.injected.append(f"{kind}@{call.index}:{call.operation}#{send}")
            raise ReadTimeoutError(endpoint_url=f"explore:{call.operation}")
        return answer

    def service(
        self, client: Any, call: Call | None, request: Any, kwargs: dict[str, Any]
    ) -> AWSResponse | None:
        """The service's answer to one send: a model's, else moto's."""
        if call is not None:
            for model in self.models:
                answer = model(call, request)
                if answer is not None:
                    return answer
        return botocore_stubber(request=request, **kwargs)  # type: ignore[no-any-return]

    def observe(self, call: Call) -> None:
        """Tell the observers (the models of what a write causes: a stream record, an
        index entry) that `call` landed; they look at the world, uncounted."""
        was = self.paused
        self.paused = True
        try:
            for observer in self.observers:
                observer(call)
        finally:
            self.paused = was

    # -- calls that are not botocore's ---------------------------------------------------------
    def around(self, service: str, operation: str, params: dict[str, Any], effect: Any) -> Any:
        """`effect` (a service's own call, such as Step Functions invoking a function: no
        botocore between them) counted and faulted as an API call: refused before it runs,
        its answer lost after, a crash or a timeout of the invocation that made it."""
        if self.paused:
            return effect()
        call = self.count(service, operation, params)
        call.sends_allowed = 1  # (no SDK between: one send, its fault as it is)
        self._before_effect(call)
        self.alive(call.name)
        kind = call.kind
        if kind in ("error", "fail", "throttle"):
            self.injected.append(f"{kind}@{call.index}:{operation}")
            raise Refused(kind, operation)
        answer = effect()
        call.effects += 1
        call.answers.append(200)
        if kind in ("lost", "lostall"):
            self.injected.append(f"{kind}@{call.index}:{operation}")
            raise ReadTimeoutError(endpoint_url=f"explore:{operation}")
        if kind == "crash":
            self.die(call, "crash")
        return answer

    # -- what a schedule did ---------------------------------------------------------------------
    def faulted(self, *kinds: str) -> list[Call]:
        return [c for c in self.calls if c.kind in kinds and self.hit(c)]

    def hit(self, call: Call) -> bool:
        return any(
            f.split(":")[0].split("#")[0] == f"{call.kind}@{call.index}" for f in self.injected
        )


def lineage(process: Any) -> tuple[str, ...]:
    names = []
    while process is not None:
        names.append(process.name)
        process = process.parent
    return tuple(names)


class Refused(Exception):
    """A service refused a call before running it (a model call's `error`, `fail`, `throttle`)."""

    def __init__(self, kind: str, operation: str) -> None:
        super().__init__(f"{operation}: {kind}")
        self.kind = kind


# -- answers on the wire ---------------------------------------------------------------------
def error_response(
    url: str,
    operation: Any,
    code: str,
    status: int,
    message: str = "injected by the fault explorer",
) -> AWSResponse:
    """An AWS error answer as `operation`'s protocol writes it (botocore parses it back)."""
    protocol = operation.service_model.protocol
    headers = {"x-amzn-RequestId": "explore"}
    if protocol in ("json", "rest-json"):
        headers |= {"x-amzn-ErrorType": code, "Content-Type": "application/x-amz-json-1.0"}
        if protocol == "json":
            headers["x-amzn-query-error"] = f"{code};Sender"
        body = json.dumps({"__type": code, "message": message}).encode()
    elif protocol == "rest-xml":
        body = f"<Error><Code>{code}</Code><Message>{message}</Message></Error>".encode()
    else:
        body = (
            f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code>"
            f"<Message>{message}</Message></Error></ErrorResponse>"
        ).encode()
    return AWSResponse(url, status, headers, MockRawResponse(body))


def json_response(url: str, status: int, body: Any, headers: dict[str, str] | None = None) -> Any:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return AWSResponse(
        url, status, {"Content-Type": "application/json", **(headers or {})}, MockRawResponse(raw)
    )


# -- schedules -------------------------------------------------------------------------------
def applicable(call: Call, twins: bool) -> tuple[str, ...]:
    """The kinds that can change anything at `call`: a single fault of another kind there
    is a no-op, or the same schedule as one listed (a client that sends once meets `fail`
    as `error`, `lostall` as `lost`)."""
    kinds: list[str] = ["error", "throttle", "lost"]
    if call.sends_allowed != 1:
        kinds += ["fail", "lostall"]
    if call.invocation:
        kinds += ["crash", "timeout"]
    if call.nested:
        kinds.append("orphan")
    if twins and call.twins:
        kinds += ["twin", "dup"]
    if call.index_read:
        kinds.append("stale")
    return tuple(kinds)


HANDOVER_REACH = 4  # calls after a second run starts at which control may change hands


def handovers_after(faults: tuple[Fault, ...], calls: list[Call]) -> list[tuple[Fault, ...]]:
    """A second run beside the first (a twin, a dup), then control handed over at each of
    the next few calls: where two runs of one key race a read against a write. The random
    schedules reach a given pair about once in a thousand; a scenario whose guards live
    there (a lease, a fence) asks for them all (its `Scenario.after_single`)."""
    [fault] = faults
    last = max((c.index for c in calls), default=fault.call)

    def after(at: int) -> range:
        return range(at + 1, min(at + HANDOVER_REACH, last) + 1)

    if fault.kind in ("twin", "dup"):
        return [(fault, Fault(at, "switch")) for at in after(fault.call)]
    if fault.kind in ("timeout", "crash"):  # a run that died, its retry raced by a twin
        twin = fault.call + 1
        return [(fault, Fault(twin, "twin"), Fault(at, "switch")) for at in after(twin)]
    return []


def schedules(
    calls: list[Call],
    seed: int,
    count: int,
    twins: bool = True,
    only: tuple[str, ...] = KINDS,
) -> Iterable[tuple[Fault, ...]]:
    """No fault; every single fault that applies at every call of a clean run; then `count`
    seeded random schedules over the longer runs faults make: every other one an
    interleaving (something concurrent starts: a twin, a timed-out run's late call, an
    orphaned invocation, an answer lost while the call runs on; then control changes
    hands one to three times, maybe with a fault besides), the others two or three faults
    of any kind anywhere. `only`: the kinds of single faults to try."""
    yield ()
    for call in calls:
        for kind in applicable(call, twins):
            if kind in only:
                yield (Fault(call.index, kind),)
    rng = random.Random(seed)
    reach = len(calls) * 2 + 4
    kinds = [k for k in KINDS if twins or k not in ("twin", "dup")]
    starts = [k for k in ("twin", "dup", "timeout", "orphan", "lost", "lostall") if k in kinds]
    for number in range(count):
        faults: dict[int, str] = {}
        if number % 2:
            begin = rng.randrange(reach)
            faults[begin] = rng.choice(starts)
            for _ in range(rng.choice((1, 2, 3))):  # mostly soon after: where it matters
                faults.setdefault(begin + 1 + int(rng.expovariate(0.25)), "switch")
            if rng.random() < 0.5:
                faults.setdefault(rng.randrange(reach * 2), rng.choice(kinds))
        else:
            for at in rng.sample(range(reach), min(rng.choice((2, 3)), reach)):
                faults[at] = rng.choice(kinds)
        yield tuple(Fault(at, kind) for at, kind in sorted(faults.items()))
