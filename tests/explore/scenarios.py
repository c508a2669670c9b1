"""The explorer's scenarios: each pattern's handlers, run the way their source runs them,
under a schedule of faults, then checked against what the pattern promises.

A scenario sets up its world once (moto, in-process), then runs each schedule on work of
its own (a fresh key), so schedules share the world and still cannot see each other:
- the main delivery (Lambda's asynchronous invoke: two retries, same request id);
- a concurrent twin of it, when the schedule says so (run whole at that call; should it
  fail, its own retries come after the main delivery, as Lambda's are minutes apart);
- a redelivery after completion (at-least-once sources deliver again later).
`check` returns the violations of the invariants, each a line.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import json
import types
from collections.abc import Callable, Iterator
from typing import Any

from botocore.awsrequest import AWSResponse

from exactly_once.handlers import etl, executions, names, runtime, starter
from tests.explore.faults import Clock, Injector, SandboxDied, around, lambda_async
from tooling import events

ARN = "arn:aws:{}:us-east-1:123456789012:{}"
WAIT = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}


class Context:
    """A Lambda context: its request id and 30 s left, by the scenario's clock."""

    def __init__(self, request_id: str) -> None:
        self.aws_request_id = request_id
        self.function_name = "explored"
        self.invoked_function_arn = ARN.format("lambda", "function:explored")

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 30_000


@contextlib.contextmanager
def clocked(clock: Clock, *modules: types.ModuleType) -> Iterator[None]:
    """`modules` read `clock` wherever they call time.time()."""
    import time as real

    fake = types.SimpleNamespace(
        time=clock.time,
        sleep=clock.advance,
        monotonic=clock.time,
        strftime=real.strftime,
        gmtime=real.gmtime,
    )
    saved = [module.time for module in modules]  # type: ignore[attr-defined]
    for module in modules:
        module.time = fake  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, original in zip(modules, saved, strict=True):
            module.time = original  # type: ignore[attr-defined]


@contextlib.contextmanager
def powertools_clocked(clock: Clock) -> Iterator[None]:
    """Powertools' idempotency records (its expiry, its in-progress lock) by `clock`."""
    import datetime as real

    from aws_lambda_powertools.utilities.idempotency.persistence import base, dynamodb

    class Now(real.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return real.datetime.fromtimestamp(clock.time(), tz)

    fake = types.SimpleNamespace(datetime=Now, timedelta=real.timedelta, timezone=real.timezone)
    saved = base.dt, dynamodb.dt
    base.dt = dynamodb.dt = fake  # type: ignore[assignment]
    try:
        yield
    finally:
        base.dt, dynamodb.dt = saved


class Scenario:
    """One pattern (and backend or strategy) to explore."""

    name = ""
    services: tuple[str, ...] = ()
    at_least_once_kinds: frozenset[str] = frozenset()

    def setup(self) -> None:
        raise NotImplementedError

    def run(self, tag: str, injector: Injector, clock: Clock) -> list[str]:
        raise NotImplementedError

    # -- the source: Lambda's asynchronous invoke --------------------------------------
    def deliveries(
        self,
        injector: Injector,
        clock: Clock,
        deliver: Callable[[str], Any],
        cold: Callable[[], None] = lambda: None,
    ) -> list[tuple[str, str, Any]]:
        """(who, outcome, answer) of the main delivery, a twin (if the schedule has one)
        and a redelivery after completion."""
        outcomes: list[tuple[str, str, Any]] = []
        deferred: list[str] = []

        def twin() -> None:
            try:
                outcomes.append(("twin", "ok", deliver("r-twin")))
            except Exception:  # (retried by Lambda, later)
                deferred.append("r-twin")

        injector.twin = twin
        outcomes.append(("main", *lambda_async(deliver, "r-main", clock, cold)))
        injector.twin = lambda: None
        for request_id in deferred:
            clock.advance(60)
            cold()
            outcomes.append(("twin", *lambda_async(deliver, request_id, clock, cold)))
        clock.advance(300)
        outcomes.append(("again", *lambda_async(deliver, "r-again", clock, cold)))
        return outcomes


# -- pattern 1: the name-dedup starter, Step Functions --------------------------------------
class StarterSteps(Scenario):
    """One execution per key, whatever fails where; never a duplicate without one."""

    services = ("stepfunctions", "sqs")

    def __init__(self, policy: str = "REJECT_DUPLICATE") -> None:
        self.policy = executions.ReusePolicy(policy)
        self.name = f"1 starter (step-functions, {policy})"

    def setup(self) -> None:
        iam = runtime.client("iam")
        role = iam.create_role(RoleName="explore", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        self.machine = runtime.client("stepfunctions").create_state_machine(
            name="explored", definition=json.dumps(WAIT), roleArn=role
        )["stateMachineArn"]
        queue = runtime.client("sqs").create_queue(QueueName="starter-dlq")["QueueUrl"]
        self.config = starter.StarterSettings(
            backend=executions.Backend.STEP_FUNCTIONS,
            target_arn=self.machine,
            key_strategy="object-key",
            reuse_policy=self.policy,
            hide_key=False,
        )
        self.dlq = queue

    def run(self, tag: str, injector: Injector, clock: Clock) -> list[str]:
        import os

        os.environ["DLQ_URL"] = self.dlq
        sfn = runtime.client("stepfunctions")
        key = f"uploads/in/{tag}.csv"
        injector.paused = True
        if self.policy == executions.ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY:
            # an earlier run of this key failed: the policy re-runs it once, as `-r1`
            failed = sfn.start_execution(
                stateMachineArn=self.machine, name=names.execution_name(key), input="{}"
            )["executionArn"]
            sfn.stop_execution(executionArn=failed)
        injector.paused = False
        event = events.eventbridge("uploads", f"in/{tag}.csv", "v1")

        def mine() -> list[str]:
            listed = quietly(injector, lambda: sfn.list_executions(stateMachineArn=self.machine))[
                "executions"
            ]
            return [e["name"] for e in listed if e["name"].startswith(names.name_body(key))]

        unfounded: list[str] = []

        def deliver(request_id: str) -> Any:
            answer = starter.start(event, Context(request_id), self.config)
            if answer.get("status") == "REJECTED":
                raise AssertionError(f"a good event was dead-lettered: {answer['reason']}")
            if answer.get("status") == "DUPLICATE" and answer["name"] not in mine():
                unfounded.append(f"{request_id}: DUPLICATE of {answer['name']}, which never ran")
            return answer

        outcomes = self.deliveries(injector, clock, deliver, starter.unusable.cache_clear)
        wanted = 1 if self.policy == executions.ReusePolicy.REJECT_DUPLICATE else 2
        found = mine()
        return unfounded + check_one_start(outcomes, len(found), wanted, found)


def check_one_start(
    outcomes: list[tuple[str, str, Any]], count: int, wanted: int, found: list[str]
) -> list[str]:
    violations = []
    rejected = [o for o in outcomes if o[1] == "ok" and o[2].get("status") == "REJECTED"]
    if rejected:
        violations.append(f"good events dead-lettered: {rejected}")
    delivered = any(outcome == "ok" for _, outcome, _ in outcomes)
    if count > wanted:
        violations.append(f"{count} executions for one key (want {wanted}): {found}")
    elif count < wanted and delivered:
        violations.append(f"lost: {count} executions although a delivery succeeded: {outcomes}")
    elif count < wanted:  # every delivery failed: Lambda's on-failure destination keeps it
        pass
    return violations


# -- pattern 1: the name-dedup starter, a durable function ---------------------------------
class FakeDurable:
    """Lambda's durable-execution API as its developer guide describes it, answered from a
    dict at botocore's before-call hook: a new DurableExecutionName starts an execution;
    the same name and payload while it runs answers that execution; anything else is
    DurableExecutionAlreadyStartedException (kept for the retention)."""

    def __init__(self, function_arn: str) -> None:
        self.function_arn = function_arn
        self.executions: dict[str, dict[str, str]] = {}

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call.lambda.*", self.answer, unique_id="durable")

    def answer(self, model: Any, params: dict[str, Any], **kwargs: Any) -> Any:
        body = json.loads(params.get("body") or b"{}") if model.name != "Invoke" else None
        del body
        headers = params.get("headers", {})
        if model.name == "GetFunctionConfiguration":
            return ok({"FunctionName": "durable", "DurableConfig": {"RetentionPeriodInDays": 14}})
        if model.name == "Invoke":
            name = headers.get("X-Amz-Durable-Execution-Name")
            payload = params["body"]
            found = self.executions.get(name)
            if found is None:
                arn = f"{self.function_arn}/durable-execution/{name}/1"
                self.executions[name] = {"payload": payload, "status": "RUNNING", "arn": arn}
                return ok({"StatusCode": 202, "DurableExecutionArn": arn}, status=202)
            if found["status"] == "RUNNING" and found["payload"] == payload:
                return ok({"StatusCode": 202, "DurableExecutionArn": found["arn"]}, status=202)
            return error("DurableExecutionAlreadyStartedException", 409)
        if model.name == "ListDurableExecutionsByFunction":
            name = params.get("query_string", {}).get("DurableExecutionName")
            listed = [
                {"DurableExecutionName": n, "DurableExecutionArn": e["arn"], "Status": e["status"]}
                for n, e in self.executions.items()
                if n == name
            ]
            return ok({"DurableExecutions": listed})
        raise AssertionError(f"the fake durable service has no {model.name}")


def ok(parsed: dict[str, Any], status: int = 200) -> tuple[AWSResponse, dict[str, Any]]:
    return AWSResponse("explore", status, {}, None), {
        **parsed,
        "ResponseMetadata": {"HTTPStatusCode": status},
    }


def error(code: str, status: int) -> tuple[AWSResponse, dict[str, Any]]:
    return AWSResponse("explore", status, {}, None), {
        "Error": {"Code": code, "Message": "explore"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }


class StarterDurable(Scenario):
    name = "1 starter (durable-function)"
    services = ("lambda", "sqs")

    def setup(self) -> None:
        self.function = ARN.format("lambda", "function:durable:1")
        self.fake = FakeDurable(self.function)
        self.fake.attach(runtime.client("lambda"))
        self.dlq = runtime.client("sqs").create_queue(QueueName="durable-dlq")["QueueUrl"]
        self.config = starter.StarterSettings(
            backend=executions.Backend.DURABLE_FUNCTION,
            target_arn=self.function,
            key_strategy="object-key",
            reuse_policy=executions.ReusePolicy.REJECT_DUPLICATE,
            hide_key=False,
        )

    def run(self, tag: str, injector: Injector, clock: Clock) -> list[str]:
        import os

        os.environ["DLQ_URL"] = self.dlq
        key = f"uploads/in/{tag}.csv"
        event = events.eventbridge("uploads", f"in/{tag}.csv", "v1")

        name = names.durable_execution_name(self.function, key)
        unfounded: list[str] = []

        def deliver(request_id: str) -> Any:
            answer = starter.start(event, Context(request_id), self.config)
            if answer.get("status") == "DUPLICATE" and answer["name"] not in self.fake.executions:
                unfounded.append(f"{request_id}: DUPLICATE of {answer['name']}, which never ran")
            return answer

        outcomes = self.deliveries(injector, clock, deliver, starter.unusable.cache_clear)
        found = [n for n in self.fake.executions if n.startswith(name)]
        return unfounded + check_one_start(outcomes, len(found), 1, found)


# -- pattern 5: the idempotent S3 ETL --------------------------------------------------------
CSV = b"id,name,amount\n1,alpha,2.5\n2,beta,3\n"


class Etl(Scenario):
    """Exactly one output per input version, whole and right; never a good input rejected."""

    services = ("s3", "dynamodb", "sqs")

    def __init__(self, strategy: str) -> None:
        self.strategy = strategy
        self.name = f"5 ETL ({strategy})"

    def setup(self) -> None:
        s3 = runtime.client("s3")
        for bucket in ("explore-in", "explore-out"):
            s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket="explore-in", VersioningConfiguration={"Status": "Enabled"})
        runtime.client("dynamodb").create_table(
            TableName="explore-control",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        queue = runtime.client("sqs").create_queue(QueueName="etl-dlq")["QueueUrl"]
        self.config = etl.EtlSettings(
            output_bucket="explore-out",
            strategy=self.strategy,  # type: ignore[arg-type]
            output_suffix=".jsonl",
            control_table="explore-control",
            dlq_url=queue,
        )
        from etl_transforms import csv_jsonl

        self.transform = csv_jsonl.transform
        self.expected = b"".join(csv_jsonl.transform(io.BytesIO(CSV), None))  # type: ignore[arg-type]

    def run(self, tag: str, injector: Injector, clock: Clock) -> list[str]:
        s3 = runtime.client("s3")
        injector.paused = True
        put = s3.put_object(Bucket="explore-in", Key=f"in/{tag}.csv", Body=CSV)
        injector.paused = False
        event = events.notification("explore-in", f"in/{tag}.csv", put["VersionId"], put["ETag"])

        def deliver(request_id: str) -> Any:
            [result] = etl.transform_once(event, self.transform, self.config, Context(request_id))[
                "results"
            ]
            if result["status"] == "REJECTED":
                raise AssertionError(f"a good input was rejected: {result['reason']}")
            return result

        with clocked(clock, etl), powertools_clocked(clock):
            outcomes = self.deliveries(injector, clock, deliver)
        injector.paused = True
        try:
            listed = s3.list_objects_v2(Bucket="explore-out", Prefix=f"in/{tag}.csv").get(
                "Contents", []
            )
            bodies = [
                s3.get_object(Bucket="explore-out", Key=o["Key"])["Body"].read() for o in listed
            ]
        finally:
            injector.paused = False
        violations = []
        delivered = any(outcome == "ok" for _, outcome, _ in outcomes)
        if len(listed) > 1:
            violations.append(f"{len(listed)} outputs for one version")
        if not listed and delivered:
            violations.append(f"lost: no output although a delivery succeeded: {outcomes}")
        if any(body != self.expected for body in bodies):
            violations.append("an output is not the transform's whole output")
        return violations


# -- the state machines' scenarios ----------------------------------------------------------
CLOCK_FN = ARN.format("lambda", "function:clock")
TARGET_FN = ARN.format("lambda", "function:target")


def quietly(injector: Injector, call: Callable[[], Any]) -> Any:
    """A look at the world (the check's, or the source's own read), never faulted or counted."""
    injector.paused = True
    try:
        return call()
    finally:
        injector.paused = False


def faults_at(injector: Injector, name: str, kinds: tuple[str, ...]) -> int:
    return sum(1 for f in injector.injected if f.split("@")[0] in kinds and f.endswith(name))


class SchedulerScenario(Scenario):
    """Pattern 3: a message registered by API (its client retrying), started by the API
    and the stream, its waiting execution run by the model (a failed one redriven), the
    sweep once it would be overdue: it ends DONE, fired once (more only where a fault hit
    the target's own invoke after it ran: documented at least once), never early."""

    services = ("dynamodb", "stepfunctions")

    def __init__(self, cancel: bool = False) -> None:
        # with `cancel`: a DELETE of the message at the schedule's twin point after its
        # registration (or, without one, at the end): cancelled (200) means never fired,
        # refused (409) means fired once
        self.cancel = cancel
        self.name = "3 scheduler" + (", cancelled anywhere" if cancel else "")
        self.cancel_answers: collections.Counter[int] = collections.Counter()

    def setup(self) -> None:
        from exactly_once.components.scheduler import waiting_definition
        from exactly_once.handlers import scheduler, scheduler_index

        ddb = runtime.client("dynamodb")
        ddb.create_table(
            TableName="explore-messages",
            **scheduler_index.table_schema(),
        )
        ddb.put_item(
            TableName="explore-messages",
            Item={"pk": {"S": "INVOKER#demo"}, "target_arn": {"S": TARGET_FN}},
        )
        iam = runtime.client("iam")
        role = iam.create_role(RoleName="waiter", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        machine = runtime.client("stepfunctions").create_state_machine(
            name="waiter", definition=json.dumps(WAIT), roleArn=role
        )["stateMachineArn"]
        self.config = scheduler.SchedulerSettings(
            table="explore-messages",
            state_machine_arn=machine,
            window_seconds=120,
            late_tolerance_seconds=60,
        )
        self.definition = waiting_definition("explore-messages", CLOCK_FN)
        self.fires: dict[str, list[float]] = {}
        self.ran: set[str] = set()

    def run(self, tag: str, injector: Injector, clock: Clock) -> list[str]:
        from exactly_once.handlers import scheduler_index

        # Two lanes, not sixteen: the logic is the same for any number, and each lane is
        # one more Query (one more fault point) in every sweep.
        lanes, scheduler_index.LANES = scheduler_index.LANES, 2
        try:
            return self._run(tag, injector, clock)
        finally:
            scheduler_index.LANES = lanes

    def _run(self, tag: str, injector: Injector, clock: Clock) -> list[str]:
        from exactly_once.handlers import scheduler, scheduler_api
        from tests.explore.machine import Machine

        config = self.config
        publish = round(clock.now + 30, 3)
        body = json.dumps({"publishTime": publish, "channel": "demo", "parameters": {"t": tag}})

        def register(request_id: str) -> Any:
            request = {
                "httpMethod": "POST",
                "body": body,
                "headers": {"Idempotency-Key": tag},
                "requestContext": {"requestTimeEpoch": int(clock.now * 1000)},
            }
            answer = scheduler_api.serve(request, config, Context(request_id))
            if answer["statusCode"] >= 500:  # API Gateway's 5xx: the client retries
                raise RuntimeError(answer)
            if answer["statusCode"] not in (200, 201):
                raise AssertionError(f"registration refused: {answer}")
            return json.loads(answer["body"])

        def clock_fn(payload: dict[str, Any]) -> Any:
            clock.now = max(clock.now, float(payload["publishTime"]))
            return {"late": 0}

        def target(payload: dict[str, Any]) -> Any:
            self.fires.setdefault(payload["id"], []).append(clock.now)
            return {"id": payload["id"]}

        model = Machine(self.definition, {CLOCK_FN: clock_fn, TARGET_FN: target}, clock, injector)
        with clocked(clock, scheduler):
            outcomes = self.deliveries(injector, clock, register)
            answers = [a for _, outcome, a in outcomes if outcome == "ok"]
            if not answers:
                return []  # never registered: the client was told (5xx every time)
            message_id = answers[0]["id"]
            cancels: list[int] = []

            def cancel() -> None:
                request = {"httpMethod": "DELETE", "pathParameters": {"id": message_id}}
                answer = scheduler_api.serve(request, config, Context("cancel"))
                cancels.append(answer["statusCode"])
                self.cancel_answers[answer["statusCode"]] += 1

            if self.cancel:
                injector.twin = cancel
            item = quietly(injector, lambda: scheduler._item(config, message_id))
            self.stream(item, clock)
            self._executions(injector, model, message_id)
            self.sweep_when_overdue(clock)
            self._executions(injector, model, message_id)
            injector.twin = lambda: None
            if self.cancel and not cancels:
                quietly(injector, cancel)
        final = quietly(injector, lambda: scheduler.get(config, message_id))
        fired = self.fires.get(message_id, [])
        allowed = 1 + faults_at(injector, f"Invoke:{TARGET_FN}", ("lost", "crash", "resent"))
        violations = []
        if cancels and cancels[0] == 200:  # cancelled in time: it must never fire
            if fired or final is None or final["status"] != "CANCELLED":
                violations.append(
                    f"cancelled (200) yet ended {final and final['status']}, fired {len(fired)}"
                )
            return violations
        if cancels and cancels[0] != 409:
            violations.append(f"a cancel answered {cancels[0]}")
        return violations + self.verdict(final, fired, allowed, publish)

    def stream(self, item: dict[str, Any], clock: Clock) -> None:
        """The stream: the message's STANDBY image, retried by the event source mapping."""
        from exactly_once.handlers import scheduler

        record = {"eventName": "INSERT", "dynamodb": {"NewImage": item}}
        for _ in range(6):
            try:
                scheduler.start_records(self.config, {"Records": [record]}, Context("stream"))
                return
            except (Exception, SandboxDied):
                clock.advance(1)

    def sweep_when_overdue(self, clock: Clock) -> None:
        """The sweep once the message would be overdue, run again next period on failure."""
        from exactly_once.handlers import scheduler

        clock.advance(scheduler.OVERDUE_SECONDS + 10)
        for _ in range(2):
            try:
                scheduler.sweep(self.config, context=Context("sweep"))
                return
            except (Exception, SandboxDied):
                clock.advance(60)

    @staticmethod
    def verdict(
        final: dict[str, Any] | None, fired: list[float], allowed: int, publish: float
    ) -> list[str]:
        """DONE, fired at least once and at most `allowed` times, never before `publish`."""
        violations = []
        if final is None or final["status"] != "DONE":
            violations.append(f"message ended {final and final['status']}, not DONE")
        if not fired:
            violations.append("never fired")
        elif len(fired) > allowed:
            violations.append(f"fired {len(fired)} times (allowed {allowed})")
        if fired and min(fired) < publish:
            violations.append(f"fired {publish - min(fired):.3f}s early")
        return violations

    def _executions(self, injector: Injector, model: Any, message_id: str) -> None:
        """Run every execution of the message not run yet; redrive a failed one once."""
        sfn = runtime.client("stepfunctions")
        listed = quietly(
            injector, lambda: sfn.list_executions(stateMachineArn=self.config.state_machine_arn)
        )["executions"]
        for execution in listed:
            arn = execution["executionArn"]
            if not execution["name"].startswith(message_id) or arn in self.ran:
                continue
            self.ran.add(arn)
            document = json.loads(
                quietly(injector, lambda a=arn: sfn.describe_execution(executionArn=a))["input"]
            )
            run = model.run(arn, document)
            if run.status == "FAILED":  # an operator's redrive: from the state that failed
                model.run(arn, run.failed_input, start_at=run.failed_state)
            quietly(injector, lambda a=arn: sfn.stop_execution(executionArn=a))


class SlotScenario(SchedulerScenario):
    """Pattern 3 through its slot clock: a message registered 30 s ahead (its slot's
    clock started by the API and the stream), the slot's Fire run (retried as its state
    machine retries it: the second attempt also takes up its own claims) with a
    duplicated clock running whole at the twin point, then the sweep once it would be
    overdue (which starts its own execution, should no clock have claimed it). It ends
    DONE, fired once (more only where a fault hit the target's invoke after it ran:
    documented at least once), never early."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "3 scheduler, slot clock"

    def setup(self) -> None:
        super().setup()
        from exactly_once.handlers import scheduler_slots

        iam = runtime.client("iam")
        role = iam.create_role(RoleName="slots", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        slots = runtime.client("stepfunctions").create_state_machine(
            name="slots", definition=json.dumps(WAIT), roleArn=role
        )["stateMachineArn"]
        self.config = dataclasses.replace(self.config, slot_machine_arn=slots)
        scheduler_slots._client.cache_clear()  # its clients in this moto world

    def _run(self, tag: str, injector: Injector, clock: Clock) -> list[str]:
        from exactly_once.handlers import scheduler, scheduler_slots
        from tests.explore.machine import Machine

        config = self.config
        scheduler._STARTED_SLOTS.clear()
        ddb = scheduler_slots._client("dynamodb")
        injector.attach(ddb)
        publish = round(clock.now + 30, 3)
        fires: list[float] = []

        def send(target_arn: str, delivery: dict[str, Any]) -> None:
            def effect() -> None:
                fires.append(clock.now)

            around(injector, f"Invoke:{TARGET_FN}", effect)

        def target(payload: dict[str, Any]) -> Any:  # a message's own execution's Fire
            fires.append(clock.now)
            return {"id": payload["id"]}

        def clock_fn(payload: dict[str, Any]) -> Any:
            clock.now = max(clock.now, float(payload["publishTime"]))
            return {"late": 0}

        model = Machine(self.definition, {CLOCK_FN: clock_fn, TARGET_FN: target}, clock, injector)
        saved = (scheduler_slots.send, scheduler_slots.THREADS)
        # one thread: the calls in one order, the same in every run of a schedule
        scheduler_slots.send, scheduler_slots.THREADS = send, 1
        try:
            with clocked(clock, scheduler, scheduler_slots):
                body = {"publishTime": publish, "channel": "demo", "parameters": {"t": tag}}
                message, _ = quietly(injector, lambda: scheduler.register(config, body, tag))
                message_id = message["id"]
                slot = scheduler_slots.slot_of(publish)
                item = quietly(injector, lambda: scheduler._item(config, message_id))
                scheduler._STARTED_SLOTS.clear()  # the stream starter: another sandbox
                self.stream(item, clock)
                execution = scheduler_slots.slot_name(slot)
                injector.twin = lambda: self._fire(scheduler_slots, slot, "a-duplicated-clock")
                clock.now = max(clock.now, slot - scheduler_slots.LEAD_SECONDS)  # its Wait
                self._fire(scheduler_slots, slot, execution)
                injector.twin = lambda: None
                self.sweep_when_overdue(clock)
                self._executions(injector, model, message_id)
        finally:
            scheduler_slots.send, scheduler_slots.THREADS = saved
            Injector.detach(ddb)
        final = quietly(injector, lambda: scheduler.get(config, message_id))
        allowed = 1 + faults_at(injector, f"Invoke:{TARGET_FN}", ("lost", "crash", "resent"))
        return self.verdict(final, fires, allowed, publish)

    def _fire(self, slots: Any, slot: int, execution: str) -> None:
        """The slot's Fire task: its attempts (LAMBDA_RETRY's, then States.ALL's), the
        later ones told they are retries; one that could not record a status is not
        retried (its handler raises StatusNotRecorded)."""
        for attempt in range(4):
            try:
                slots.fire(self.config.table, slot, execution, retried=attempt > 0)
                return
            except (Exception, SandboxDied):
                continue


CHECKPOINT_FN = ARN.format("lambda", "function:checkpoint")


class StepBroken(Exception):
    """A step's own failure, retried by no rule: its run fails there."""


STEPS = ("s1", "s2", "s3")


class ResumableScenario(Scenario):
    """Pattern 4, the state machine form: a run of a key whose second step fails (once),
    re-run (`ops rerun`: the next attempt's name) until it completes; the failed run is
    redriven (RedriveExecution, from its failed step) while the re-run is in flight (a
    `twin` fault: at that call) or after it; then a duplicate run after completion. Each
    step's effect happens once, more only in its own window (a fault on its invoke or its
    checkpoint write, or a redrive restarting at it: documented at least once); the key
    ends completed."""

    name = "4 resumable (step-functions)"
    services = ("dynamodb", "stepfunctions")

    def setup(self) -> None:
        from exactly_once.components import resumable_asl

        runtime.client("dynamodb").create_table(
            TableName="explore-checkpoints",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        iam = runtime.client("iam")
        role = iam.create_role(RoleName="workflow", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        self.machine = runtime.client("stepfunctions").create_state_machine(
            name="workflow", definition=json.dumps(WAIT), roleArn=role
        )["stateMachineArn"]
        steps = [resumable_asl.Step(s, ARN.format("lambda", f"function:{s}")) for s in STEPS]
        self.definition = resumable_asl.definition(
            steps, "explore-checkpoints", CHECKPOINT_FN, "$.orderId"
        )
        self.effects: dict[tuple[str, str], int] = {}

    def run(self, tag: str, injector: Injector, clock: Clock) -> list[str]:
        from exactly_once.handlers import resumable
        from tests.explore.machine import Machine

        config = resumable.ResumableSettings("explore-checkpoints", list(STEPS), 86400, 86400)
        sfn = runtime.client("stepfunctions")

        def checkpoint(payload: dict[str, Any]) -> Any:
            if payload["action"] == "load":
                return resumable.load(config, payload["key"], payload["execution"])
            return resumable.finish(config, payload["key"], payload["execution"])

        broken = {"s2"}  # fails its first call, for good: the run fails there

        def step(name: str) -> Callable[[Any], Any]:
            def effect(payload: dict[str, Any]) -> Any:
                if name in broken:
                    broken.discard(name)
                    raise StepBroken(f"{name} failed")
                key = (payload["orderId"], name)
                self.effects[key] = self.effects.get(key, 0) + 1
                return {"step": name}

            return effect

        lambdas = {CHECKPOINT_FN: checkpoint}
        lambdas |= {ARN.format("lambda", f"function:{s}"): step(s) for s in STEPS}
        model = Machine(self.definition, lambdas, clock, injector)
        failed: list[tuple[str, Any]] = []
        redriven_at: list[str] = []

        def start(attempt: int) -> Any:
            name = tag if attempt == 0 else f"{tag}-r{attempt}"
            arn = quietly(
                injector,
                lambda: sfn.start_execution(
                    stateMachineArn=self.machine, name=name, input=json.dumps({"orderId": tag})
                ),
            )["executionArn"]
            run = model.run(arn, {"orderId": tag})
            quietly(injector, lambda: sfn.stop_execution(executionArn=arn))  # it ended
            if run.status == "FAILED":
                failed.append((arn, run))
            return run

        def redrive() -> None:
            while failed:  # redriven once each, from the state that failed
                arn, run = failed.pop(0)
                redriven_at.append(run.failed_state)
                model.run(arn, run.failed_input, start_at=run.failed_state)

        with clocked(clock, resumable):
            attempt = 0
            while start(attempt).status != "SUCCEEDED" and attempt < 4:
                attempt += 1  # an operator (or the next delivery) re-runs the key
                clock.advance(60)
                injector.twin = redrive  # a redrive may come while the re-run is in flight
            injector.twin = lambda: None
            redrive()  # or after it
            start(attempt + 1)  # a duplicate run after completion: runs no step
        item = quietly(
            injector,
            lambda: runtime.client("dynamodb").get_item(
                TableName="explore-checkpoints", Key={"pk": {"S": tag}}, ConsistentRead=True
            ),
        ).get("Item", {})
        violations = []
        if "completed_at" not in item:
            violations.append(f"the key never completed ({len(failed)} failed runs)")
        for name in STEPS:
            count = self.effects.get((tag, name), 0)
            # its window: its invoke, and the checkpoint write that records it
            window = model.faults_in(name, f"Save{name}", f"Resync{name}")
            allowed = 1 + window + redriven_at.count(name)
            if count == 0:
                violations.append(f"step {name} never ran")
            elif count > allowed:
                violations.append(f"step {name} ran {count} times (allowed {allowed})")
        return violations


class FakeDurableContext:
    """The durable SDK's context as handlers/resumable_durable.py uses it: `step` (a named
    step's result checkpointed in `store` and replayed by position; its retry strategy
    deciding retries) and `state.durable_execution_arn`. A sandbox killed mid-run is
    invoked again with the same store: every finished step replays, the one in progress
    runs again, as Lambda's durable runtime does."""

    def __init__(self, arn: str, store: dict[int, Any], clock: Clock, injector: Injector) -> None:
        self.state = types.SimpleNamespace(durable_execution_arn=arn)
        self.store, self.clock, self.injector = store, clock, injector
        self.position = 0
        self.state_of_call: dict[int, str] = {}

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
        while True:
            attempt += 1
            first = len(self.injector.calls)
            try:
                result = func(types.SimpleNamespace(logger=None))
            except Exception as exc:
                self._label(first, name)
                decision = config.retry_strategy(exc, attempt) if config else None
                if decision is not None and decision.should_retry:
                    self.clock.advance(decision.delay_seconds)
                    continue
                error = (f"{type(exc).__module__}.{type(exc).__qualname__}", str(exc))
                self.store[position] = ("error", error)
                raise StepError(error[1], error_type=error[0]) from DurableOperationError(
                    error[1], error_type=error[0]
                )
            finally:
                self._label(first, name)
            self.store[position] = ("ok", json.dumps(result))
            return result

    def _label(self, first: int, name: str) -> None:
        for index in range(first, len(self.injector.calls)):
            self.state_of_call.setdefault(index, name)


class ResumableDurableScenario(Scenario):
    """Pattern 4 as a durable function: the same runs as the state machine form (a step
    failing for good once, re-runs, a duplicate run after completion), its crashes replayed
    from the checkpointed steps; no redrive (durable executions have none)."""

    name = "4 resumable (durable-function)"
    services = ("dynamodb", "lambda")

    def setup(self) -> None:
        runtime.client("dynamodb").create_table(
            TableName="explore-durable",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        self.ended: dict[str, str] = {}  # a durable execution's ARN -> its status
        runtime.client("lambda").meta.events.register(
            "before-call.lambda.GetDurableExecution", self._get, unique_id="durable-get"
        )
        self.effects: dict[tuple[str, str], int] = {}

    def _get(self, params: dict[str, Any], **kwargs: Any) -> Any:
        from urllib.parse import unquote

        path = unquote(params["url_path"])
        arn = next((a for a in self.ended if a in path), None)
        status = self.ended.get(arn or "", "RUNNING")
        return ok({"DurableExecutionArn": arn or path, "Status": status, "StartTimestamp": 0})

    def run(self, tag: str, injector: Injector, clock: Clock) -> list[str]:
        from exactly_once.handlers import resumable, resumable_durable

        function = ARN.format("lambda", "function:workflow:1")
        settings = resumable.ResumableDurableSettings(
            table="explore-durable",
            steps=list(STEPS),
            step_functions=[ARN.format("lambda", f"function:{s}") for s in STEPS],
            key_path="$.orderId",
            checkpoint_ttl_seconds=86400,
            retention_seconds=86400,
        )
        broken = {"s2": 3}  # fails all three tries of its first run: the run fails there
        labels: dict[int, str] = {}

        def invoke_step(function_arn: str, state: dict[str, Any]) -> Any:
            name = function_arn.rsplit(":", 1)[-1]

            def effect() -> Any:
                if broken.get(name):
                    broken[name] -= 1
                    raise resumable_durable.StepFailed(f"{name} failed")
                key = (state["orderId"], name)
                self.effects[key] = self.effects.get(key, 0) + 1
                return {"step": name}

            return around(injector, f"Invoke:{function_arn}", effect)

        handler = resumable_durable.handler.__wrapped__  # the SDK's wrapper is the runtime's

        def execute(name: str) -> str:
            arn = f"{function}/durable-execution/{name}/1"
            store: dict[int, Any] = {}
            status = "FAILED"
            for _ in range(5):  # a crashed invocation is invoked again: replay
                context = FakeDurableContext(arn, store, clock, injector)
                try:
                    handler({"orderId": tag}, context)
                    status = "SUCCEEDED"
                    break
                except SandboxDied:
                    continue
                except Exception:
                    break
                finally:
                    labels.update(context.state_of_call)
            self.ended[arn] = status
            return status

        saved = resumable_durable.invoke_step, resumable.ResumableDurableSettings.current
        resumable_durable.invoke_step = invoke_step  # type: ignore[assignment]
        resumable.ResumableDurableSettings.current = classmethod(  # type: ignore[method-assign]
            lambda cls: settings
        )
        try:
            with clocked(clock, resumable):
                attempt = 0
                while execute(tag if not attempt else f"{tag}-r{attempt}") != "SUCCEEDED":
                    attempt += 1
                    clock.advance(60)
                    if attempt > 4:
                        break
                execute(f"{tag}-r{attempt + 1}")  # a duplicate run after completion
        finally:
            resumable_durable.invoke_step = saved[0]  # type: ignore[assignment]
            resumable.ResumableDurableSettings.current = saved[1]  # type: ignore[method-assign]
        item = quietly(
            injector,
            lambda: runtime.client("dynamodb").get_item(
                TableName="explore-durable", Key={"pk": {"S": tag}}, ConsistentRead=True
            ),
        ).get("Item", {})
        violations = []
        if "completed_at" not in item:
            violations.append("the key never completed")
        for name in STEPS:
            count = self.effects.get((tag, name), 0)
            window = 0
            for fault in injector.injected:
                if fault.startswith("twin@"):
                    continue
                index = int(fault.split("@")[1].split(":")[0])
                window += labels.get(index) in (name, f"Save{name}")
            if count == 0:
                violations.append(f"step {name} never ran")
            elif count > 1 + window:
                violations.append(f"step {name} ran {count} times (allowed {1 + window})")
        return violations


def more() -> list[Scenario]:
    """The scenarios that run a state machine's model (scheduler, resumable workflow)."""
    return [
        SchedulerScenario(),
        SchedulerScenario(cancel=True),
        SlotScenario(),
        ResumableScenario(),
        ResumableDurableScenario(),
    ]
