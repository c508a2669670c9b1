"""The fault explorer's machinery: every AWS call a handler makes, intercepted at botocore's
event hooks, and a fault injected at any of them; the way each source delivers again; a
clock the handlers read, advanced as the source's retry delays would.

A fault is (call index, kind). Kinds, at the call with that index in the schedule:
- `error`: the call fails before it reaches the service (a 503): nothing happened.
- `lost`: the call reaches the service and takes effect, but its answer is lost (a read
  timeout the SDK gave up on): the caller sees an error.
- `resent`: the answer is lost and the SDK sends the same request again, as botocore's
  retry of a read timeout does; the caller gets the second answer.
- `crash`: the call takes effect and the sandbox dies right after (SandboxDied, which no
  handler can catch): the invocation ends with no answer, and its source delivers again.
- `twin`: just before the call, a concurrent twin delivery of the same work runs whole.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterable
from typing import Any

from botocore.exceptions import ClientError, ReadTimeoutError

KINDS = ("error", "lost", "resent", "crash", "twin")


class SandboxDied(BaseException):  # (what happened, not an error to handle)
    """The execution environment was killed right after an AWS call took effect."""


@dataclasses.dataclass(frozen=True)
class Fault:
    call: int
    kind: str

    def __str__(self) -> str:
        return f"{self.kind}@{self.call}"


class Clock:
    """Epoch seconds the handlers read instead of the wall clock; the source's retry delays
    and a Wait's sleep advance it."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Injector:
    """Counts the AWS calls of a schedule (in order, over every client it is attached to)
    and injects `faults` at their indexes. `twin` runs the scenario's concurrent twin."""

    def __init__(self, faults: Iterable[Fault] = ()) -> None:
        self.faults = {fault.call: fault.kind for fault in faults}
        self.calls: list[str] = []
        self.injected: list[str] = []
        self.paused = False
        self.twin: Callable[[], None] = lambda: None
        self.apis: set[str] = set()  # service.Operation.Parameter of every call seen
        # per call in flight: (index, kind, the API parameters) for the after-call hook
        self._flight: list[tuple[int, str | None, dict[str, Any]]] = []

    def attach(self, client: Any) -> None:
        events = client.meta.events

        service = client.meta.service_model.service_name

        def params(params: Any, model: Any, **kwargs: Any) -> None:
            self._flight.append((-1, None, dict(params)))
            self.apis.add(f"{service}.{model.name}")
            self.apis.update(f"{service}.{model.name}.{parameter}" for parameter in params)

        def before(model: Any, **kwargs: Any) -> None:
            self._before(model)

        def after(model: Any, parsed: Any, **kwargs: Any) -> None:
            self._after(client, model, parsed)

        events.register_last("provide-client-params.*.*", params, unique_id="explore-params")
        events.register_first("before-call.*.*", before, unique_id="explore-before")
        events.register_last("after-call.*.*", after, unique_id="explore-after")

    @staticmethod
    def detach(client: Any) -> None:
        events = client.meta.events
        for event, unique_id in (
            ("provide-client-params.*.*", "explore-params"),
            ("before-call.*.*", "explore-before"),
            ("after-call.*.*", "explore-after"),
        ):
            events.unregister(event, unique_id=unique_id)

    def _before(self, model: Any) -> None:
        params = self._flight.pop()[2] if self._flight and self._flight[-1][0] == -1 else {}
        if self.paused:
            self._flight.append((-1, None, params))
            return
        index = len(self.calls)
        self.calls.append(model.name)
        kind = self.faults.get(index)
        self._flight.append((index, kind, params))
        if kind == "error":
            self._flight.pop()
            self.injected.append(f"error@{index}:{model.name}")
            raise unavailable(model.name)
        if kind == "twin":
            self.run_twin(f"twin@{index}:{model.name}")

    def run_twin(self, label: str) -> None:
        """The concurrent twin, whole, before the call `label` names; its calls unfaulted."""
        self.injected.append(label)
        self.paused = True
        try:
            self.twin()
        finally:
            self.paused = False

    def _after(self, client: Any, model: Any, parsed: dict[str, Any]) -> None:
        index, kind, params = self._flight.pop() if self._flight else (-1, None, {})
        if kind not in ("lost", "resent", "crash"):
            return
        self.injected.append(f"{kind}@{index}:{model.name}")
        if kind == "crash":
            raise SandboxDied(f"killed after {model.name}")
        if kind == "lost":
            raise ReadTimeoutError(endpoint_url=f"explore:{model.name}")
        # resent: the SDK sends the same request again; its answer is the caller's
        self.paused = True
        try:
            answer = getattr(client, _snake(model.name))(**params)
        except ClientError:
            raise  # the second answer is an error (a condition the first write now fails)
        finally:
            self.paused = False
        parsed.clear()
        parsed.update(answer)


def around(injector: Injector, name: str, call: Callable[[], Any]) -> Any:
    """`call` (not botocore's: a Lambda function the state machine model invokes in-process)
    counted and faulted as an AWS call named `name`."""
    if injector.paused:
        return call()
    index = len(injector.calls)
    injector.calls.append(name)
    kind = injector.faults.get(index)
    if kind == "error":
        injector.injected.append(f"error@{index}:{name}")
        raise unavailable(name)
    if kind == "twin":
        injector.run_twin(f"twin@{index}:{name}")
    answer = call()
    if kind == "resent":
        injector.injected.append(f"resent@{index}:{name}")
        answer = call()
    elif kind == "lost":
        injector.injected.append(f"lost@{index}:{name}")
        raise ReadTimeoutError(endpoint_url=f"explore:{name}")
    elif kind == "crash":
        injector.injected.append(f"crash@{index}:{name}")
        raise SandboxDied(f"killed after {name}")
    return answer


def unavailable(operation: str) -> ClientError:
    """The injected error: a 503 before the call reached the service."""
    error = {
        "Error": {"Code": "ServiceUnavailable", "Message": "injected"},
        "ResponseMetadata": {"HTTPStatusCode": 503},
    }
    return ClientError(error, operation)  # type: ignore[arg-type]


def _snake(name: str) -> str:
    """A botocore operation name as its client method (PutItem -> put_item)."""
    out = ""
    for i, char in enumerate(name):
        before = name[i - 1] if i else ""
        after = name[i + 1] if i + 1 < len(name) else ""
        if char.isupper() and i and (before.islower() or after.islower()):
            out += "_"
        out += char.lower()
    return out


def lambda_async(
    deliver: Callable[[str], Any], request_id: str, clock: Clock, on_retry: Callable[[], None]
) -> tuple[str, Any]:
    """Lambda's asynchronous invocation of a handler: the first try and two retries (about
    1 and 2 minutes later), each with the same request id; ("ok", answer), or ("dlq", the
    last error) when all three failed (the function's on-failure destination keeps it)."""
    last: BaseException | None = None
    for attempt in range(3):
        if attempt:
            clock.advance(60 * attempt)
            on_retry()  # a retry may land in a fresh sandbox (a cold start)
        try:
            return "ok", deliver(request_id)
        except (Exception, SandboxDied) as exc:  # (any failure is retried)
            last = exc
    return "dlq", last


def schedules(
    calls: int, seed: int, count: int, kinds: tuple[str, ...] = KINDS
) -> Iterable[tuple[Fault, ...]]:
    """Every single fault at every call of a clean run (`calls` of them), then `count`
    seeded random schedules of two or three faults anywhere in the longer runs faults make."""
    yield ()
    for call in range(calls):
        for kind in kinds:
            yield (Fault(call, kind),)
    rng = random.Random(seed)
    for _ in range(count):
        size = rng.choice((2, 3))
        picked = sorted(rng.sample(range(calls * 2 + 4), size))
        yield tuple(Fault(call, rng.choice(kinds)) for call in picked)
