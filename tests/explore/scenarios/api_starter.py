"""Pattern 2, the API Gateway starter: POST /start, whose request mapping template
(components/api_templates.py) turns the request into Step Functions' StartExecution named
by the request's key, no Lambda between; its integration responses
(components/api_starter.py: RESPONSES) turn Step Functions' answer into the caller's.

API Gateway, as it runs an AWS integration (non-proxy), modelled here:
- the request template rendered for each request (tests/vtl.py: airspeed, LocalStack's
  engine, with AWS's `$input`, `$util`, `$context`; each request its own
  `$context.requestId`), its output the StartExecution body, sent once through the
  explorer's network, so every fault applies to it as to any other call (API Gateway
  documents no resend of an integration request; of a Lambda one, "API Gateway does not
  retry any Lambda invocations", Lambda developer guide, "Handling Lambda errors with an
  API Gateway API");
- the integration response chosen by Step Functions' HTTP status: "For all other HTTP and
  AWS back ends, the HTTP status code is matched" against each selectionPattern, and the
  one with no pattern "is the default response that is used to catch any response not yet
  configured" (API Gateway API Reference, IntegrationResponse; developer guide, "Set up
  an integration response in API Gateway"); its template rendered over Step Functions'
  body; a `$context.responseOverride.status` it sets is the answer's status (developer
  guide, "Override your API's request and response parameters and status codes for REST
  APIs"); a status no method response declares is a 500 (the same "Set up an
  integration response");
- no answer from Step Functions (its answer lost): a 504 once the integration's timeout
  (29 s by default) has passed (INTEGRATION_TIMEOUT, "Gateway response types for API
  Gateway");
- the caller's own hop is a call of its own: refused before the integration runs (the
  stage's throttle, 429, THROTTLED; a 5xx), or its answer lost after it ran.

Step Functions is moto's, which does what the API Reference says (StartExecution, as
boto3's start_execution carries it): "StartExecution is idempotent for STANDARD
workflows. For a STANDARD workflow, if StartExecution is called with the same name and
input as a running execution, the call will succeed and return the same response as the
original request. If the execution is closed or if the input is different, it will
return a 400 ExecutionAlreadyExists error"; a name over 80 characters is refused
(ValidationException), one with a character a name must not contain too (InvalidName),
input that is not JSON too (InvalidExecutionInput). (Developer guide, "Execution
guarantees": a Standard workflow "automatically returns an idempotent response on starting
an execution with the same name as a currently-running workflow"; an Express one does
not, and the component refuses EXPRESS.) A model on the explorer's network sees each
StartExecution arrive, so every execution is known by the request whose try started it,
whatever its answer said, or whether one came.

The caller (EventBridge's target, or anyone's well-behaved client) POSTs the key's S3
event and retries a 429, a 5xx or an answer it never got, a few times with back-off; a
concurrent duplicate arrives wherever the schedule says: `twin`, another event of the key
(its next version); `dup`, the same request sent again (API Gateway gives it its own
request id). Then another key, drawn per schedule (`draw`: alike in what a careless name
derivation would merge), and, 5 minutes on, the first key again: a redelivery, or a
deliberate retry (`X-Attempt: 1`, a new name by design), or an attempt the template must
refuse (`01`).

What every answer must agree with, and the end: a 200 (`duplicate: false`) only for the
request that started the execution it names; a 409 (`duplicate: true`) only while an
execution of the request's own key and attempt has the name (never another key's: two
keys are never one execution); a 400 with a reason only for a request the template's rule
refuses (a key too long to name injectively, a bad attempt: `api_templates.
execution_name`, the rule its unit tests hold the template to), never for a good one, and
a refused request starts nothing; a 429, a 5xx or no answer only where a fault hit that
try; at most one execution per key and attempt.
"""

from __future__ import annotations

import base64
import collections
import dataclasses
import itertools
import json
import random
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, ReadTimeoutError

from exactly_once.components import api_starter, api_templates
from tests.explore.faults import Call, Refused, error_response
from tests.explore.scenarios.base import CONCURRENCY, WAIT, Scenario, Verdict, World
from tests.vtl import render
from tooling import events

BUCKET = "uploads"
KEY_SOURCE = "$.detail.object.key"  # the component's default: S3 events through EventBridge
MACHINE = "api-started"
TRIES = 4  # the caller's, its first included
BACKOFF = 2.0  # seconds before the caller's first retry, doubled each time
INTEGRATION_TIMEOUT = 29.0  # API Gateway's default, seconds
# API Gateway's call of Step Functions: one send, what the template rendered as it is
INTEGRATION = Config(
    retries={"total_max_attempts": 1, "mode": "standard"}, parameter_validation=False
)
MEMBERS = ("stateMachineArn", "name", "input", "traceHeader")  # StartExecution's request
METHOD_STATUSES = {int(s) for _, s, _ in api_starter.RESPONSES} | {
    int(s) for s in api_starter.OVERRIDE_STATUSES
}
_ATTEMPT = re.compile(api_templates._ATTEMPT)  # X-Attempt's rule, as the template has it


def attempt_of(header: str) -> int | None:
    """The attempt an X-Attempt header asks for (none: 0), None for one to refuse."""
    if not header:
        return 0
    return int(header) if _ATTEMPT.fullmatch(header) else None


def draw(rng: random.Random, tag: str) -> tuple[str, str, str]:
    """(a key, another key, the X-Attempt of the first key's later request): the two keys
    different, and alike where a careless name derivation would merge them."""
    length = rng.randint(70, 80)  # safe characters: verbatim up to 74, refused past it
    stem = f"{tag}-" + "x" * (length - len(tag) - 2)
    long = f"{tag}/" + "x" * rng.randint(40, 55)  # encoded: 53 UTF-8 bytes fit, no more
    accents = rng.randint(20, 27)  # 2 bytes each
    encoded = base64.urlsafe_b64encode(f"{tag}/a".encode()).decode().rstrip("=")
    pairs = [
        (stem + "a", stem + "b", ""),  # past the name's length, or just within it
        (long + "a", long + "b", ""),
        (f"{tag}/" + "é" * accents, f"{tag}/" + "è" * accents, ""),
        (f"{tag} a", f"{tag}_a", ""),  # a character a name cannot hold
        (f"{tag}/é", f"{tag}/è", ""),  # unicode
        (f"{tag}-a", f"{tag}-A", ""),  # case
        (f"{tag}-a", f"{tag}-a-r1", "1"),  # one looks like the other's retry, which comes
        (f"{tag}/a", f"--{encoded}_", ""),  # one looks like the other's encoded name
        (f"{tag}/it's", f'{tag}/"it"\\s\n', ""),  # what JSON and escapeJavaScript escape
    ]
    key, other, again = pairs[rng.randrange(len(pairs))]
    return key, other, again or rng.choice(("", "", "1", "01"))


@dataclasses.dataclass
class Answer:
    """What one try got back."""

    status: int  # 0: no answer came
    body: Any
    name: str = ""  # the execution name its StartExecution asked for
    faulted: bool = False  # a fault hit one of its own calls

    @property
    def retryable(self) -> bool:
        return self.status in (0, 429) or self.status >= 500


@dataclasses.dataclass
class Request:
    """One caller's POST of a key, and its retries."""

    who: str
    key: str
    header: str  # X-Attempt ("": none)
    tries: list[Answer] = dataclasses.field(default_factory=list)

    @property
    def attempt(self) -> int | None:
        return attempt_of(self.header)

    @property
    def refusable(self) -> bool:
        """Whether the template's rule refuses it (a 400, nothing started)."""
        attempt = self.attempt
        return attempt is None or api_templates.execution_name(self.key, attempt) is None

    def __str__(self) -> str:
        attempt = f", X-Attempt {self.header}" if self.header else ""
        return f"the {self.who} request ({self.key!r}{attempt})"


class Gateway:
    """POST /start of one schedule's world, as the module docstring says, and what each
    StartExecution it sent did."""

    def __init__(self, world: World, sfn: Any, machine: str) -> None:
        self.world = world
        self.sfn = sfn
        self.machine = machine
        self.template = api_templates.request_template(machine, KEY_SOURCE)
        self.ids = itertools.count(1)
        self.started: dict[str, Request] = {}  # execution name -> the request that started it
        self.defects: list[str] = []
        self._sent = threading.local()  # (a process's own) whether its send found the name
        world.injector.models.insert(0, self.arrives)

    # -- Step Functions, as a StartExecution reaches it -----------------------------------
    def executions(self) -> dict[str, Any]:
        """The machine's executions by name (moto's record, read as it is)."""
        from moto.stepfunctions.models import stepfunctions_backends

        _, _, _, region, account, *_ = self.machine.split(":")
        machine = stepfunctions_backends[account][region].describe_state_machine(self.machine)
        return {execution.name: execution for execution in machine.executions}

    def arrives(self, call: Call, request: Any) -> Any:
        """A StartExecution of the machine reaching Step Functions: whether its name had an
        execution then. Its answer is moto's, but for one order moto fixes and AWS does not
        document: moto checks the input before the name; here a name that has an execution
        answers ExecutionAlreadyExists whatever the input (a refused request whose name
        were another's would get that execution's 409)."""
        if call.operation == "StartExecution" and call.params.get("stateMachineArn") == (
            self.machine
        ):
            self._sent.existed = call.params.get("name") in self.executions()
            try:
                json.loads(str(call.params.get("input", "{}")))
            except ValueError:
                if self._sent.existed:
                    model = self.sfn.meta.service_model.operation_model("StartExecution")
                    message = f"Execution Already Exists: '{call.params.get('name')}'"
                    return error_response(
                        request.url, model, "ExecutionAlreadyExists", 400, message
                    )
        return None

    # -- API Gateway ------------------------------------------------------------------------
    def post(self, request: Request, body: str) -> Answer:
        """One try of `request`: the caller's hop (a call of its own), the integration."""
        world = self.world
        request_id = f"{world.tag}-{next(self.ids)}"
        headers = {api_templates.ATTEMPT_HEADER: request.header} if request.header else {}
        me = world.injector.processes.me()
        first = len(world.injector.calls)
        try:
            answer = world.injector.around(
                "execute-api",
                "POST /start",
                {"requestId": request_id},
                lambda: self.integrate(request, body, headers, request_id),
            )
        except Refused as exc:  # before the integration ran: the stage's throttle, a 5xx
            answer = Answer(429 if exc.kind == "throttle" else 503, {"message": str(exc)})
        except ReadTimeoutError:  # it ran; its answer never came
            answer = Answer(0, None)
        name = me.name if me is not None else ""
        answer.faulted = any(
            call.process == name
            and call.kind not in (None, *CONCURRENCY)
            and world.injector.hit(call)
            for call in world.injector.calls[first:]
        )
        return answer

    def integrate(
        self, request: Request, body: str, headers: dict[str, str], request_id: str
    ) -> Answer:
        text, _ = render(self.template, body, headers, request_id)
        try:
            sent = json.loads(text)
        except ValueError:
            self.defects.append(f"{request}: the request template rendered no JSON: {text!r}")
            return Answer(400, {"__type": "SerializationException"})
        name = str(sent.get("name", ""))
        status, raw = self.start_execution(request, {k: sent[k] for k in MEMBERS if k in sent})
        if status == 0:  # no answer: API Gateway waits out its timeout, then 504
            self.world.clock.sleep(INTEGRATION_TIMEOUT)
            return Answer(504, {"message": "Endpoint request timed out"}, name)
        default = [(status_, t) for pattern, status_, t in api_starter.RESPONSES if not pattern]
        chosen = [
            (status_, t)
            for pattern, status_, t in api_starter.RESPONSES
            if pattern and re.fullmatch(pattern, str(status))
        ]
        method_status, template = (chosen or default)[0]
        text, override = render(template, raw, request_id=request_id)
        final = int(override.get("status") or method_status)
        if final not in METHOD_STATUSES:
            return Answer(500, {"message": "Internal server error"}, name)
        try:
            answered = json.loads(text)
        except ValueError:
            self.defects.append(f"{request}: the {status} response template rendered {text!r}")
            answered = text
        return Answer(final, answered, name)

    def start_execution(self, request: Request, params: dict[str, Any]) -> tuple[int, str]:
        """Step Functions' status and body for `params` ((0, "") when its answer was lost);
        an execution this send started is `request`'s."""
        self._sent.existed = None  # (None: the send never reached Step Functions)
        self._sent.answer = (0, "")
        try:
            self.sfn.start_execution(**params)
        except ClientError:
            pass
        except ReadTimeoutError:
            self._sent.answer = (0, "")
        name = params.get("name")
        if self._sent.existed is False and name in self.executions():
            self.started[name] = request
        return self._sent.answer

    def answered(self, http_response: Any, **kwargs: Any) -> None:
        """(botocore's after-call) Step Functions' answer on the wire, as API Gateway reads
        it."""
        self._sent.answer = (http_response.status_code, http_response.content.decode())


class ApiStarter(Scenario):
    """POST /start's callers, API Gateway and Step Functions (the module docstring)."""

    name = "2 api-gateway (mapping templates)"

    def clients(self) -> list[Any]:
        return [self.sfn]

    def setup(self) -> None:
        self.sfn = boto3.client("stepfunctions", region_name="us-east-1", config=INTEGRATION)
        role = boto3.client("iam", region_name="us-east-1").create_role(
            RoleName="api-starter", AssumeRolePolicyDocument="{}"
        )["Role"]["Arn"]
        self.machine = self.sfn.create_state_machine(
            name=MACHINE, definition=json.dumps(WAIT), roleArn=role
        )["stateMachineArn"]
        self.gateway: Gateway | None = None
        self.sfn.meta.events.register("after-call.sfn.StartExecution", self._answered)

    def _answered(self, **kwargs: Any) -> None:
        if self.gateway is not None:
            self.gateway.answered(**kwargs)

    def run(self, world: World) -> Verdict:
        gateway = self.gateway = Gateway(world, self.sfn, self.machine)
        # keys drawn by the schedule's number (its world's random choices are the seed's)
        key, other, again = draw(random.Random(f"{world.tag}:{world.rng.random()}"), world.tag)
        requests: list[Request] = []
        violations: list[str] = []

        def event(key: str, version: str) -> str:
            body = events.eventbridge(BUCKET, key, version, sequencer=f"000{version[-1]}")
            body["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(world.clock.now))
            return json.dumps(body)

        def caller(who: str, key: str, header: str, body: str) -> None:
            """A caller's POST and its retries, each answer checked as it comes."""
            request = Request(who, key, header)
            requests.append(request)
            for number in range(TRIES):
                answer = gateway.post(request, body)
                request.tries.append(answer)
                violations.extend(check(gateway, request, number, answer))
                if not answer.retryable:
                    return
                world.clock.sleep(BACKOFF * 2**number)

        def posted(who: str, key: str, header: str = "") -> None:
            """`key` POSTed by `who`, a concurrent duplicate wherever the schedule says."""
            body = event(key, "v1")
            started: collections.Counter[str] = collections.Counter()

            def beside(kind: str, body: Callable[[], str]) -> Callable[[], None]:
                def run() -> None:
                    started[kind] += 1
                    label = f"{who}-{kind}" + (f"{started[kind]}" if started[kind] > 1 else "")
                    try:
                        caller(label, key, header, body())
                    except Exception as exc:  # (a process's error is otherwise unseen)
                        violations.append(f"the {label} request failed: {exc!r}")

                return run

            world.injector.twin = beside("twin", lambda: event(key, "v2"))  # its next version
            world.injector.dup = beside("dup", lambda: body)  # the same request again
            caller(who, key, header, body)
            world.injector.twin = world.injector.dup = None

        posted("main", key)
        posted("other", other)
        world.clock.sleep(300)
        posted("again", key, again)

        def verdict() -> list[str]:
            self.gateway = None
            return violations + gateway.defects + check_executions(gateway, requests)

        return verdict


def check(gateway: Gateway, request: Request, number: int, answer: Answer) -> list[str]:
    """What one answer may say, by what Step Functions held when it came."""
    body = answer.body if isinstance(answer.body, dict) else {}
    what = f"{request}'s try {number + 1} answered {answer.status} {answer.body}"
    if answer.status in (200, 409) and request.refusable:
        return [f"{what}: a key the template must refuse (it cannot name it injectively)"]
    if answer.status == 200:
        named = str(body.get("executionArn", "")).rsplit(":", 1)[-1]
        if body.get("duplicate") is not False or gateway.started.get(named) is not request:
            return [f"{what}: 'started', yet this request started no execution of that name"]
    elif answer.status == 409:
        holder = gateway.started.get(answer.name)
        if body.get("duplicate") is not True or holder is None:
            return [f"{what}: 'duplicate', yet no execution is named {answer.name!r}"]
        if (holder.key, holder.attempt) != (request.key, request.attempt):
            return [f"{what}: 'duplicate' of {answer.name!r}, which is {holder}'s execution"]
    elif answer.status == 400:
        if not request.refusable:
            return [f"{what}: a good request refused"]
        if body.get("duplicate") is not False or not body.get("error"):
            return [f"{what}: refused without its reason"]
    elif not answer.retryable:
        return [f"{what}: an answer the API does not give"]
    elif not answer.faulted:
        return [f"{what} with no fault in it"]
    return []


def check_executions(gateway: Gateway, requests: list[Request]) -> list[str]:
    """At most one execution per key and attempt; none for a request the rule refuses."""
    violations = []
    runs: collections.Counter[tuple[str, int | None]] = collections.Counter()
    for name, request in gateway.started.items():
        runs[request.key, request.attempt] += 1
        if request.refusable:
            violations.append(f"{request} started {name!r}, though the template must refuse it")
    for (key, attempt), count in runs.items():
        if count > 1:
            violations.append(f"{count} executions of {key!r}, attempt {attempt} (want 1)")
    return violations
