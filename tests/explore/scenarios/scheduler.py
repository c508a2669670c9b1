"""Pattern 3, the precise scheduler, as its sources and its state machine run it.

A message registered through the API (its client retrying a 5xx or a timeout, with the
same Idempotency-Key; a concurrent duplicate registration at the twin point), started by
the API and by the stream (every record of the table, in order, each batch retried on
failure, and every record delivered again after all that: stale images), fired by its
second's slot clock (`slots`: the slot state machine interpreted, its Fire invoking the
real slot function, which fans out to workers past CHUNK) or, registered too near its
time to join its slot, by a slot of one (its own execution of the same machine and
function), the sweep run once it would be overdue. With `cancel`, a DELETE comes at the
twin point.

Verdict: each message ends DONE (or CANCELLED if a cancel said 200, never fired), is
delivered to its target at least once and never before its time, and at most once more
than the faults that made a delivery ambiguous: a fault at the target's own invoke (its
answer lost, its invocation died or timed out), or a death or a failed status write of
the invocation that had claimed it, between its claim and its record.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

from exactly_once.components.scheduler import (
    SLOT_TIMEOUT_SECONDS,
    STREAM_FILTERS,
    SWEEP_TIMEOUT_SECONDS,
    WORKERS_TIMEOUT_SECONDS,
    slot_definition,
)
from exactly_once.handlers import (
    metrics,
    runtime,
    scheduler,
    scheduler_api,
    scheduler_index,
    scheduler_pace,
    scheduler_slots,
    scheduler_sweep,
    settings,
)
from exactly_once.handlers.targets import FIFO_WINDOW_SECONDS
from tests.explore import interleave
from tests.explore.dynamo import EventSourceMapping, Table
from tests.explore.faults import Call, Fault, error_response, json_response
from tests.explore.lambdas import DIED, TIMED_OUT, Failure
from tests.explore.machine import Machine, ended, integration_client
from tests.explore.scenarios.base import (
    ARN,
    CONCURRENCY,
    WAIT,
    Delivery,
    Scenario,
    Verdict,
    World,
    clocked,
    faulted,
    unexcused_failures,
)

TABLE = "explore-messages"
RECORD_ATTEMPTS = 2  # the slot's tries of a final write, explored (an outage of both: in reach)
# A message's sends, explored: 1 in every other schedule (one lost answer spends it: a
# resend past the budget is then one fault away), else 2 (a resend within it)
SEND_BUDGETS = (1, 2)
TARGET_FN = ARN.format("lambda", "function:target")
SLOT_FN = ARN.format("lambda", "function:slot")
WORKERS_FN = ARN.format("lambda", "function:slot-workers")
API_FN = ARN.format("lambda", "function:api")
STARTER_FN = ARN.format("lambda", "function:stream-starter")
SWEEP_FN = ARN.format("lambda", "function:sweep")
# A target's run time by schedule number (% 10; others answer at once): one past every
# timeout (the slot's wait for it ends first: its caller stops waiting while it runs on, an
# outcome unseen), one slow. (Numbers the kept replays of tests/explore/test_explore.py
# use are left alone: their schedules replay as they were found.)
TARGET_SECONDS = {9: 2000.0, 2: 40.0}
# ...and every 20th from the 12th, a target that answers after longer than a claim's lease
# (never renewed, it would end while its claimant waits: another would take it over) and
# well within its caller's wait
LONGER_THAN_A_LEASE = 100.0


def target_seconds(number: int) -> float:
    if number % 20 == 12:
        return LONGER_THAN_A_LEASE
    return TARGET_SECONDS.get(number % 10, 0.0)


FIFO_ARN = ARN.format("sqs", "target.fifo")
FIFO_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/target.fifo"
FIFO_SCHEDULES = 2  # (number % 3) the plain scenario's message goes to a FIFO queue


class FifoQueue:
    """An SQS FIFO queue as AWS runs it, on the schedule's clock: a message whose
    MessageDeduplicationId was accepted in the last 5 minutes is accepted again and not
    delivered ("Exactly-once processing in Amazon SQS"); past that it is delivered."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.accepted: dict[str, float] = {}  # deduplication id -> when first accepted
        self.delivered: dict[str, list[float]] = {}  # message id -> deliveries

    def answer(self, call: Any, request: Any) -> Any:
        if not (call.service == "sqs" and call.operation == "SendMessage"):
            return None
        if call.params.get("QueueUrl") != FIFO_URL:
            return None
        dedup, body = call.params["MessageDeduplicationId"], call.params["MessageBody"]
        first = self.accepted.get(dedup)
        if first is None or self.clock.now - first >= FIFO_WINDOW_SECONDS:
            self.accepted[dedup] = self.clock.now
            self.delivered.setdefault(json.loads(body)["id"], []).append(self.clock.now)
        digest = hashlib.md5(body.encode()).hexdigest()
        return json_response(request.url, 200, {"MessageId": dedup, "MD5OfMessageBody": digest})


# Every 20th schedule from the 14th, the later sweep runs twice at once: its schedule
# invokes it asynchronously, and Lambda's event queue may hand one event to two
# invocations ("your function might receive the same event more than once", Lambda
# developer guide, asynchronous invocation), or a slow run overlaps the next period's.
OVERLAPPING_SWEEPS = 14
SWEEPS = ("sweep#", "later", "next")  # the sweeps' invocations, by their names' start
BUS_ARN = ARN.format("events", "event-bus/target-bus")
FLOW_ARN = ARN.format("states", "stateMachine:target-flow")
EXPRESS_ARN = ARN.format("states", "stateMachine:target-express")


def target_of(number: int, plain: bool) -> str:
    """The plain scenario's message's channel by schedule number: a FIFO queue (every third
    from the 2nd), an EXPRESS state machine (every 14th from the 10th), an event bus (every
    11th from the 6th), a STANDARD state machine (every 7th from the 3rd), else the Lambda
    target that drops no redelivery. (Numbers the kept replays use keep their channel.)"""
    if not plain:
        return "demo"
    if number % 3 == FIFO_SCHEDULES:
        return "fifo"
    if number % 14 == 10:
        return "express"
    if number % 11 == 6:
        return "bus"
    return "flow" if number % 7 == 3 else "demo"


class Workflows:
    """Step Functions as a scheduler target, on the schedule's clock. DescribeStateMachine
    answers each machine's type. StartExecution of a STANDARD machine starts one
    execution per name: a second start of a name answers ExecutionAlreadyExists (its
    execution here ends at once: "If an execution with the same name [...] has already
    completed", StartExecution, Step Functions API Reference); an EXPRESS machine starts
    every time ("Idempotency is not automatically managed")."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self.started: dict[str, list[float]] = {}  # message id -> executions started
        self.names: set[tuple[str, str]] = set()

    def answer(self, call: Any, request: Any) -> Any:
        arn = call.params.get("stateMachineArn")
        if call.service != "stepfunctions" or arn not in (FLOW_ARN, EXPRESS_ARN):
            return None
        kind = "EXPRESS" if arn == EXPRESS_ARN else "STANDARD"
        if call.operation == "DescribeStateMachine":
            found = {"stateMachineArn": arn, "name": arn.rsplit(":", 1)[-1], "type": kind}
            found |= {"definition": "{}", "roleArn": ARN.format("iam", "role/r")}
            return json_response(request.url, 200, {**found, "creationDate": 0})
        if call.operation != "StartExecution":
            return None
        name = call.params["name"]
        if kind == "STANDARD" and (arn, name) in self.names:
            operation = runtime.client("stepfunctions").meta.service_model.operation_model(
                "StartExecution"
            )
            return error_response(request.url, operation, "ExecutionAlreadyExists", 400)
        self.names.add((arn, name))
        self.started.setdefault(name, []).append(self.clock.now)
        execution = f"{arn.replace(':stateMachine:', ':execution:')}:{name}"
        return json_response(
            request.url, 200, {"executionArn": execution, "startDate": self.clock.now}
        )


class EventBus:
    """An EventBridge bus as a scheduler target. PutEvents answers 200 with each entry's
    own outcome ("PutEventsResultEntry", EventBridge API Reference): by schedule number,
    the first put of a message is refused unrun (`ThrottlingException`), or answered
    `InternalFailure`, an unknown error, after the event was put (the effect happened,
    its answer says failed); every later one is put. A bus delivers at least once: its
    consumers key the effect by the message id."""

    def __init__(self, clock: Any, number: int) -> None:
        self.clock = clock
        self.first = ("ThrottlingException", "InternalFailure", None)[number % 3]
        self.put: dict[str, list[float]] = {}  # message id -> events put
        self.tried: set[str] = set()
        self.unseen: dict[str, int] = {}  # message id -> puts answered InternalFailure

    def answer(self, call: Any, request: Any) -> Any:
        if not (call.service == "events" and call.operation == "PutEvents"):
            return None
        [entry] = call.params["Entries"]
        if entry.get("EventBusName") != BUS_ARN:
            return None
        message_id = json.loads(entry["Detail"])["id"]
        first = message_id not in self.tried
        self.tried.add(message_id)
        if first and self.first == "ThrottlingException":  # refused: nothing put
            failed = {"ErrorCode": self.first, "ErrorMessage": "Rate exceeded"}
            return json_response(request.url, 200, {"FailedEntryCount": 1, "Entries": [failed]})
        self.put.setdefault(message_id, []).append(self.clock.now)
        if first and self.first == "InternalFailure":
            self.unseen[message_id] = 1  # (its sender cannot tell it was put)
            failed = {"ErrorCode": self.first, "ErrorMessage": "an internal error"}
            return json_response(request.url, 200, {"FailedEntryCount": 1, "Entries": [failed]})
        entries = [{"EventId": message_id}]
        return json_response(request.url, 200, {"FailedEntryCount": 0, "Entries": entries})


class CallerGaveUp(Exception):
    """The target still ran when its caller's read timed out (the Lambda model answers the
    caller ReadTimeoutError: the effect happened, its answer never came)."""


# A message fires this close to its time when no fault could delay it past its slot (the
# lateness goals themselves are the benchmarks' to show: the explorer's clock is a model).
ON_TIME_SECONDS = 60
# What a claimant's death costs its messages: its lease's minute, the clocks' skew, the
# Fire's first retry (2 s, jittered) and its wait past the lease (1 s), with room
CRASH_SECONDS = scheduler_slots.LEASE_SECONDS + scheduler_slots.LEASE_SKEW_SECONDS + 30


def passes_filters(record: dict[str, Any]) -> bool:
    """The stream mapping's filter criteria (components/scheduler.py: STREAM_FILTERS)."""
    change = record["dynamodb"]
    new = (change.get("NewImage") or {}).get("status", {}).get("S")
    old = (change.get("OldImage") or {}).get("status", {}).get("S")
    for pattern in STREAM_FILTERS:
        wanted_new = pattern["dynamodb"]["NewImage"]["status"]["S"]
        wanted_old = pattern["dynamodb"].get("OldImage", {}).get("status", {}).get("S")
        if new in wanted_new and (wanted_old is None or old in wanted_old):
            return True
    return False


class SchedulerScenario(Scenario):
    def __init__(
        self, cancel: bool = False, slots: bool = False, messages: int = 1, reserved: bool = False
    ) -> None:
        """`messages` registered (in one batch request with `slots`), due together; with
        `reserved`, one more due beyond the window (RESERVED until a sweep moves it)."""
        self.cancel = cancel
        self.slots = slots
        self.messages = messages + reserved
        self.reserved = reserved
        self.name = "3 scheduler" + (
            ", slot clock" if slots else ", cancelled anywhere" if cancel else ""
        )
        self.parts = 4 if slots else 2
        self.cancel_answers: collections.Counter[int] = collections.Counter()
        self.budget = 1
        self.waited = float(SLOT_TIMEOUT_SECONDS)  # the last target invoke's read timeout
        self.gave_up: collections.Counter[str] = collections.Counter()  # by message id
        self.gave_up_by: collections.Counter[tuple[str, str]] = collections.Counter()
        self.reported: list[tuple[str, dict[str, float]]] = []  # (invocation, its metrics)

    def clients(self) -> list[Any]:
        services = ("dynamodb", "stepfunctions", "lambda")
        found = [runtime.client(s) for s in services]
        found += [
            scheduler_slots._client(s)
            for s in ("dynamodb", "lambda", "sqs", "stepfunctions", "events")
        ]
        return [*found, scheduler_slots._renewals(), self.integration]

    def after_single(self, faults: tuple[Fault, ...], calls: list[Call]) -> list[tuple[Fault, ...]]:
        """After a stale read of a sweep's, each of its later calls but its index reads
        failing for good, one schedule each (one message's look failing must not end the
        run: finding 6 of the targets issue); and the call two on (past the lagging view's
        own read: the first look), should this run's index have been far behind
        (`Table.far`: the read listed nothing more). Each twice: each runs at a number of
        its own, which draws its index's lag (only one write behind lists a fired message
        as FIRING: three pairs in four have one) and may shift its calls. The slot clock: after a
        duplicated clock or a restart beside it (`twin`, `dup`: an invocation no Step
        Functions execution retries), its sandbox dying after each claim it made: only the
        sweep's restart takes those messages up."""
        [fault] = faults
        if fault.kind == "stale" and fault.call < len(calls):
            sweep = calls[fault.call].process
            if not sweep.startswith(SWEEPS):
                return []
            looks = {
                c.index
                for c in calls
                if c.index > fault.call and c.process == sweep and c.operation != "Query"
            }
            return 2 * [(fault, Fault(at, "fail")) for at in sorted(looks | {fault.call + 2})]
        if not self.slots or fault.kind not in ("twin", "dup"):
            return []
        beside = ("a-duplicated-clock", scheduler_slots.RESTART_MARK)
        return [
            (fault, Fault(c.index, "crash"))
            for c in calls
            if c.index > fault.call
            and any(mark in name for name in c.lineage for mark in beside)
            and writes(c, None, "FIRING")
        ]

    def setup(self) -> None:
        iam = runtime.client("iam")
        self.role = iam.create_role(RoleName="waiter", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        scheduler_slots._client.cache_clear()  # its clients in this moto world
        scheduler_slots._renewals.cache_clear()
        self.integration = integration_client("dynamodb")

    def fresh(self, world: World) -> None:
        """The schedule's own table and state machines (what it lists and queries stays the
        size of one schedule's work, however many ran in the world before it)."""
        tag = world.tag
        ddb = runtime.client("dynamodb")
        sfn = runtime.client("stepfunctions")

        def create() -> list[str]:
            ddb.create_table(TableName=f"{TABLE}-{tag}", **scheduler_index.table_schema())
            channels = {
                "demo": {"target_arn": {"S": TARGET_FN}},
                "fifo": {"target_arn": {"S": FIFO_ARN}},  # a FIFO queue (FifoQueue)
                # a STANDARD and an EXPRESS state machine (Workflows), an EventBridge bus
                "flow": {"target_arn": {"S": FLOW_ARN}},
                "express": {"target_arn": {"S": EXPRESS_ARN}},
                "bus": {"target_arn": {"S": BUS_ARN}},
                # the same target, said to drop a redelivery (SchedulerArgs.redeliver)
                "again": {"target_arn": {"S": TARGET_FN}, "redeliver": {"BOOL": True}},
            }
            ddb.batch_write_item(  # (one call: every schedule makes them)
                RequestItems={
                    f"{TABLE}-{tag}": [
                        {"PutRequest": {"Item": {"pk": {"S": f"INVOKER#{channel}"}, **item}}}
                        for channel, item in channels.items()
                    ]
                }
            )
            return [
                sfn.create_state_machine(
                    name=f"{name}-{tag}", definition=json.dumps(WAIT), roleArn=self.role
                )["stateMachineArn"]
                for name in ("slots",)
            ]

        machines = world.quietly(create)
        self.config = scheduler.SchedulerSettings(
            table=f"{TABLE}-{tag}",
            state_machine_arn=machines[0],
            window_seconds=120,
            late_tolerance_seconds=60,
        )
        self.slot = slot_definition(SLOT_FN)

    @contextlib.contextmanager
    def patched(self, world: World) -> Iterator[None]:
        """Two lanes, not sixteen (the logic is the same for any number, and each lane is one
        more Query, one more fault point, in every read); a slot of more than one message
        fans out to its workers."""
        self.fresh(world)
        saved = scheduler_index.LANES, scheduler_slots.CHUNK, scheduler_slots.RECORD_ATTEMPTS
        share, earlier = scheduler_slots.WORKER_SHARE, scheduler_index._EARLIER_LANES
        # (and no lanes of 0.4's: no scenario writes a message there, and each is a Query,
        # a fault point, in every sweep)
        scheduler_index._EARLIER_LANES = {}
        targets, budget = scheduler_slots._target_lambda, scheduler_slots.SEND_BUDGET
        keeper = scheduler_slots.beside
        self.budget = SEND_BUDGETS[int(world.tag.lstrip("s")) % len(SEND_BUDGETS)]
        scheduler_slots.SEND_BUDGET = self.budget
        # (and two tries of a final write: the outage of both is within a schedule's reach)
        scheduler_index.LANES, scheduler_slots.CHUNK, scheduler_slots.WORKER_SHARE = 2, 1, 1

        # a target's invoke through the world's Lambda client; its read timeout kept for the
        # target's model (the invoke follows at once: no other process runs in between)
        def target_client(read_timeout: int) -> Any:
            self.waited = float(read_timeout)
            return scheduler_slots._client("lambda")

        scheduler_slots._target_lambda = target_client  # type: ignore[assignment]
        keepers = iter(range(1, 1_000_000))

        def beside(run: Any) -> None:
            """The lease keeper's thread: a process of the invocation's own, pausing by the
            schedule's clock (its renewals are calls the schedule may fault)."""
            processes = world.injector.processes
            me = processes.me()
            name = f"{me.name if me else ''}:keeper{next(keepers)}"
            processes.companion(name, lambda: run(world.clock.sleep))

        scheduler_slots.beside = beside  # type: ignore[assignment]
        emit = metrics.emit

        def reported(
            pattern: str, properties: Any = None, /, **values: float
        ) -> None:  # (each EMF line, by the invocation that wrote it)
            invocation = world.injector.processes.invocation()
            # (what its line carries: METRICS_DISABLED writes none here)
            self.reported.append((invocation.name if invocation else "", metrics.kept(values)))
            emit(pattern, properties, **values)

        metrics.emit = reported  # type: ignore[assignment]
        scheduler_slots.RECORD_ATTEMPTS = RECORD_ATTEMPTS
        scheduler_slots._machine_type.cache_clear()  # (each schedule reads a machine's type)
        settings._CURRENT[scheduler_slots.SlotSettings] = scheduler_slots.SlotSettings(
            table=self.config.table, workers_function=WORKERS_FN
        )
        try:
            with (
                clocked(world.clock, scheduler, scheduler_pace, scheduler_slots, scheduler_sweep),
                # the slot's first read delivering while it reads again; its workers, side by
                # side (their invokes' threads)
                interleave.beside(
                    world.injector.processes, scheduler_slots.FIRST_READ, scheduler_slots.WORKERS
                ),
            ):
                yield
        finally:
            scheduler_index.LANES, scheduler_slots.CHUNK, scheduler_slots.RECORD_ATTEMPTS = saved
            scheduler_slots.WORKER_SHARE, scheduler_index._EARLIER_LANES = share, earlier
            scheduler_slots._target_lambda = targets  # type: ignore[assignment]
            scheduler_slots.beside = keeper  # type: ignore[assignment]
            metrics.emit = emit  # type: ignore[assignment]
            scheduler_slots.SEND_BUDGET = budget
            settings._CURRENT.pop(scheduler_slots.SlotSettings, None)

    # -- the schedule --------------------------------------------------------------------------
    def run(self, world: World) -> Verdict:
        config = self.config
        clock = world.clock
        # (in every other schedule, a stale index read is far behind: `Table.far`; in the
        # slot clock's with a target past every timeout, behind its newest write only: a
        # message of the batch missed, another listed and slow to deliver)
        number = int(world.tag.lstrip("s"))
        newest = self.slots and number % 10 == 9
        far = world.rng.random() < 0.5 and not newest
        table = Table(config.table, "pk", lambda: runtime.client("dynamodb"), clock, far, newest)
        table.watch(world.injector)
        scheduler.forget_sandbox()
        fires: dict[str, list[float]] = {}
        fired_by: dict[str, list[str]] = {}
        target_runs: list[TargetRun] = []
        self.gave_up.clear()
        self.gave_up_by.clear()
        self.reported.clear()
        seconds = target_seconds(number)
        queue = FifoQueue(clock)
        workflows = Workflows(clock)
        bus = EventBus(clock, number)
        world.injector.models += [queue.answer, workflows.answer, bus.answer]
        plain = target_of(number, not (self.slots or self.cancel))
        fifo = plain == "fifo"
        # (the target drops repeats itself; a bus's consumers do, by the id)
        dropping = plain in ("fifo", "flow", "express", "bus")

        def target(event: Any, context: Any) -> Any:
            """Its effect at once, then its run time: past its caller's read timeout, the
            caller is answered ReadTimeoutError (the effect happened, unseen)."""
            fires.setdefault(event["id"], []).append(clock.now)
            processes = world.injector.processes
            process = processes.invocation()
            # (by the invocation sending it: its threads' sends are one sender's)
            sender = processes.invocation_of(process.parent if process is not None else None)
            fired_by.setdefault(event["id"], []).append(sender.name if sender else "")
            delivery = TargetRun(
                event["id"], sender.name if sender else "", len(world.injector.calls)
            )
            target_runs.append(delivery)
            waited = self.waited
            if seconds > waited:
                clock.sleep(waited)
                delivery.ended = len(world.injector.calls)
                self.gave_up[event["id"]] += 1
                self.gave_up_by[(event["id"], fired_by[event["id"]][-1])] += 1
                raise CallerGaveUp(event["id"])
            if seconds:
                clock.sleep(seconds)
            delivery.ended = len(world.injector.calls)
            return {"id": event["id"]}

        lambdas = world.lambdas
        lambdas.register(TARGET_FN, target, timeout=SLOT_TIMEOUT_SECONDS)
        slot_function = lambdas.register(
            SLOT_FN, scheduler_slots.handler, timeout=SLOT_TIMEOUT_SECONDS
        )
        lambdas.register(WORKERS_FN, scheduler_slots.handler, timeout=WORKERS_TIMEOUT_SECONDS)
        api = lambdas.register(API_FN, lambda e, c: scheduler_api.serve(e, config, c))
        starter = lambdas.register(STARTER_FN, lambda e, c: scheduler.start_records(config, e, c))
        sweeper = lambdas.register(
            SWEEP_FN,
            lambda e, c: scheduler_sweep.sweep(config, context=c),
            timeout=SWEEP_TIMEOUT_SECONDS,
        )
        machines = {config.state_machine_arn: self.slot}
        ran: set[str] = set()
        attempts: list[str] = []  # every invocation of a source's, for the verdict
        # in time to join its second's slot; or too near it (a slot of one: its own)
        ahead = 30 if self.slots else scheduler_slots.LEAD_SECONDS
        publish = round(clock.now + ahead, 3)
        cancels: list[int] = []

        def call_api(request: dict[str, Any], who: str) -> Any:
            """The API's client: a 5xx or a timeout is sent again (up to 3 tries)."""
            answer: Any = None
            for attempt in range(3):
                name = f"{who}#{attempt}"
                attempts.append(name)
                answer = lambdas.run(api, request, f"r-{who}-{attempt}", name)
                if not isinstance(answer, Failure) and answer["statusCode"] < 500:
                    return answer
                clock.sleep(1)
            return answer

        started = clock.now

        def channel_of(i: int) -> str:
            """The slot's second message goes to a channel whose target drops redeliveries;
            the plain scenario's, in every third schedule, to a FIFO queue."""
            return "again" if self.slots and i == 1 else plain

        def publish_of(i: int) -> float:
            if self.reserved and i == self.messages - 1:
                return round(started + config.window_seconds + 30, 3)  # beyond the window
            return publish + i * 0.25

        def body_of(i: int) -> dict[str, Any]:
            return {"publishTime": publish_of(i), "channel": channel_of(i), "parameters": {"i": i}}

        def register(i: int, who: str) -> Any:
            request = {
                "httpMethod": "POST",
                "body": json.dumps(body_of(i)),
                "headers": {"Idempotency-Key": f"{world.tag}-{i}"},
                "requestContext": {"requestTimeEpoch": int(clock.now * 1000)},
            }
            return call_api(request, who)

        def register_batch(who: str) -> list[Any]:
            """POST /messages/batch, every message by its own key; sent again (whole)
            while an entry failed on the service's side."""
            entries = [
                {"id": f"e{i}", "idempotencyKey": f"{world.tag}-{i}", **body_of(i)}
                for i in range(self.messages)
            ]
            request = {
                "httpMethod": "POST",
                "resource": "/messages/batch",
                "body": json.dumps({"entries": entries}),
                "requestContext": {"requestTimeEpoch": int(clock.now * 1000)},
            }
            answer: Any = None
            for attempt in range(3):
                answer = call_api(request, f"{who}{attempt}")
                if isinstance(answer, Failure) or answer["statusCode"] >= 500:
                    return [answer]
                if not json.loads(answer["body"])["failed"]:
                    break
            answers = json.loads(answer["body"])
            assert not answers["failed"], f"entries refused: {answers['failed']}"
            return [
                {"statusCode": 201, "body": json.dumps(entry["message"])}
                for entry in sorted(answers["successful"], key=lambda e: e["id"])
            ]

        def register_all(who: str) -> list[Any]:
            if self.slots:
                return register_batch(who)
            return [register(i, f"{who}{i}") for i in range(self.messages)]

        ids: list[str] = []

        def cancel() -> None:
            request = {"httpMethod": "DELETE", "pathParameters": {"id": ids[0]}}
            answer = call_api(request, "cancel")
            if not isinstance(answer, Failure):
                cancels.append(answer["statusCode"])
                self.cancel_answers[answer["statusCode"]] += 1

        def batch(events: list[dict[str, Any]], name: str) -> bool:
            attempts.append(name)
            return not isinstance(lambdas.run(starter, {"Records": events}, name, name), Failure)

        mapping = EventSourceMapping(passes_filters, batch, clock.sleep)

        def stream(records: list[Any], who: str) -> None:
            mapping.deliver(records, who)

        def executions() -> None:
            """Every execution not run yet, run by the model; a failed one redriven once."""
            sfn = runtime.client("stepfunctions")
            for machine_arn, definition in machines.items():
                if not machine_arn:
                    continue
                listed = world.quietly(lambda m=machine_arn: sfn.list_executions(stateMachineArn=m))
                for execution in listed["executions"]:
                    arn = execution["executionArn"]
                    seconds = {scheduler_slots.slot_of(publish_of(i)) for i in range(len(ids))}
                    mine = execution["name"].startswith(tuple(ids)) or (
                        execution["name"].startswith(scheduler_slots.SLOT_PREFIX)
                        and any(str(second) in execution["name"] for second in seconds)
                    )
                    if arn in ran or not mine:
                        continue
                    ran.add(arn)
                    document = json.loads(
                        world.quietly(lambda a=arn: sfn.describe_execution(executionArn=a))["input"]
                    )
                    model = Machine(definition, lambdas, clock, world.injector, self.integration)
                    run = model.run(arn, document)
                    # an operator's redrive, from the state that failed; never of a slot
                    # that failed StatusNotRecorded (docs/scheduler.md: its deliveries
                    # happened, and the sweep reads that failure to leave them be)
                    if run.status == "FAILED" and run.error != "StatusNotRecorded":
                        ended(arn, run, clock.now)
                        run = model.run(arn, run.failed_input, start_at=run.failed_state)
                    ended(arn, run, clock.now)

        def duplicated_clock(execution: str) -> None:
            slot = scheduler_slots.slot_of(publish)
            event = {"slot": slot, "execution": execution}
            attempts.append(execution)
            lambdas.run(slot_function, event, execution, execution)

        swept: list[str] = []  # every sweep's attempts

        def sweep(who: str) -> None:
            """The sweep's schedule (EventBridge) invokes it asynchronously: Lambda's
            retries, 1 and 2 minutes apart."""
            tries: list[str] = []
            lambdas.deliver_async(sweeper, {}, who, label=who, attempts=tries)
            attempts.extend(tries)
            swept.extend(tries)

        # a concurrent duplicate registration (the same keys) wherever the schedule says
        twins = iter(range(1, 1_000))  # each its own process: a twin's twin is `twin2-`
        world.injector.twin = lambda: register_all(
            f"twin{n}-" if (n := next(twins)) > 1 else "twin"
        )
        registered = register_all("register")
        if any(isinstance(a, Failure) or a["statusCode"] >= 500 for a in registered):
            return lambda: []  # never registered: the client was told (5xx every time)
        for answer in registered:
            assert answer["statusCode"] in (200, 201), f"registration refused: {answer}"
            ids.append(json.loads(answer["body"])["id"])
        if self.cancel:  # from now on, the concurrent request is a cancel
            world.injector.twin = cancel
        elif self.slots:  # from now on, another clock of the slot: a duplicated Fire, or
            # a restart (which also reads what is FIRING, as the sweep's restart does)
            clocks = iter(range(1, 1_000))  # (each its own name: an invocation of its own)
            world.injector.twin = lambda: duplicated_clock(f"a-duplicated-clock-{next(clocks)}")
            world.injector.dup = lambda: duplicated_clock(
                scheduler_slots.restart_name(scheduler_slots.slot_of(publish), clock.now)
            )
        stream(list(table.stream), "stream")
        executions()
        clock.sleep(scheduler_sweep.OVERDUE_SECONDS + 10)
        sweep("sweep")
        executions()
        stream(list(table.stream), "again")  # every record again, late: stale images
        executions()
        # a later sweep (the next period's), once any claim's lease has ended; and, while a
        # message has not ended, the next one (what one sweep's read missed, the next reads)
        clock.sleep(SLOT_TIMEOUT_SECONDS + 60)
        if number % 20 == OVERLAPPING_SWEEPS:
            world.injector.processes.spawn("later-twin", lambda: sweep("later-twin"))
        sweep("later")
        executions()
        for n in range(2):
            pending = [
                m
                for m in ids
                if world.quietly(lambda m=m: scheduler.get(config, m))["status"]
                in ("STANDBY", "FIRING", "RESERVED")
            ]
            if not pending:
                break
            clock.sleep(3600)
            sweep(f"next{n}")
            executions()
        world.injector.twin = world.injector.dup = None
        # No cancel came during the schedule: one now, after every sweep, must find the
        # message ended (409): a 200 means it was still pending, never fired.
        late_cancel = self.cancel and not cancels
        if late_cancel:
            world.quietly(cancel)

        def verdict() -> list[str]:
            violations: list[str] = []
            for i, message_id in enumerate(ids):
                final = world.quietly(lambda m=message_id: scheduler.get(config, m))
                delivered = queue.delivered if fifo else fires
                if plain in ("flow", "express"):
                    delivered = workflows.started
                if plain == "bus":
                    delivered = bus.put
                fired = delivered.get(message_id, [])
                message_publish = publish_of(i)
                if i == 0 and late_cancel and cancels and cancels[0] == 200:
                    violations.append(f"{message_id[:8]}: still pending when the schedule ended")
                    continue
                if i == 0 and cancels and cancels[0] == 200:  # cancelled in time: never fires
                    if fired or final is None or final["status"] != "CANCELLED":
                        violations.append(
                            f"cancelled (200) yet ended {final and final['status']}, "
                            f"fired {len(fired)}"
                        )
                    continue
                if i == 0 and cancels and cancels[0] != 409:
                    violations.append(f"a cancel answered {cancels[0]}")
                ambiguous = self.ambiguous(world, message_id)
                unseen = self.ambiguous(world, message_id, unseen=True)
                if plain == "bus":  # (an entry answered InternalFailure after it was put)
                    ambiguous += bus.unseen.get(message_id, 0)
                    unseen += bus.unseen.get(message_id, 0)
                found = verdict_of(
                    final, fired, ambiguous, unseen, message_publish, channel_of(i), self.budget
                )
                if (
                    final
                    and final["status"] in ("RESERVED", "STANDBY")
                    and self.swept_in_vain(world, message_id, swept)
                ):
                    # every sweep since the message last went back to waiting failed (an
                    # outage of the table): a message only a sweep moves or restarts waits
                    # for one that works (the sweep-failed alarm)
                    found = [v for v in found if not v.startswith(("ended", "never fired"))]
                if final and final["status"] == "FIRING" and unrecordable(world, message_id):
                    # StatusNotRecorded: delivered, never delivered again, left FIRING for
                    # the Overdue alarm (docs/scheduler.md)
                    found = [v for v in found if not v.startswith("ended FIRING")]
                excused = self.lateness_excused(world, swept)
                if excused is not None and not behind_a_delivery(world, message_id, target_runs):
                    # (the model runs the deliveries of one read, and the slots' executions,
                    # one after another: a slow target may delay the next by its run time)
                    excused += seconds
                if fired and not found and excused is not None:
                    late = min(fired) - message_publish
                    if late > ON_TIME_SECONDS + excused:
                        found.append(
                            f"fired {late:.0f}s late, where its faults excuse {excused:.0f}s"
                        )
                if not dropping:  # (a FIFO queue, a state machine drop a repeat themselves)
                    found += self.resent_unseen(world, message_id, fired_by.get(message_id, []))
                violations += [f"{message_id[:8]}: {v}" for v in found]
            violations += self.unreported_sweeps(world, swept)
            if self.slots:
                violations += self.own_executions_after_the_end(
                    world, table, ids, config.state_machine_arn
                )
            # ClaimsFailed: claims not sent in time, given back for the retry
            out_of_time = ("ClaimsFailed",)
            deliveries = self.deliveries_of(attempts)
            return violations + unexcused_failures(world, deliveries, out_of_time=out_of_time)

        return verdict

    def ambiguous(self, world: World, message_id: str, unseen: bool = False) -> int:
        """How many times a delivery of the message may have happened unknown to whoever
        delivers it next: a target invoke whose answer was lost or whose caller died as
        it went out; and a claim whose claimant never landed the final write (it died
        or timed out, or the write kept failing): the message stays FIRING, and is
        delivered again once its claim is taken over. A claimant that wrote the final
        status leaves nothing ambiguous; nor does one alive to write it: a transient
        error at its final write is its to retry. With `unseen`, a 5xx at the target's
        invoke too: the sender cannot tell it from one after the function ran (it did
        not, in this model), so it may end the message UNKNOWN."""
        calls = world.injector.calls
        kinds = ("lost", "lostall", "crash", "timeout", *(("error", "fail") if unseen else ()))
        count = sum(
            1
            for c in calls
            if c.kind in kinds and world.injector.hit(c) and is_target_invoke(c, message_id)
        )
        count += self.gave_up[message_id]  # the caller stopped waiting: an outcome unseen
        key = f"MESSAGE#{message_id}"
        for claim in (c for c in calls if writes(c, key, "FIRING") and c.took_effect):
            landed = any(
                c.process == claim.process
                and c.index > claim.index
                and final_write(c, key)
                and c.took_effect
                for c in calls
            )
            failure = world.lambdas.failures.get(invocation_of(claim))
            died = failure is not None and failure.error_type in (DIED, TIMED_OUT)
            count += not landed and died
        return count

    @staticmethod
    def swept_in_vain(world: World, message_id: str, swept: list[str]) -> bool:
        """Whether the message was left waiting by faults alone: there were sweeps after it
        last went back to STANDBY (a slot that gave it back: a send it could not count, a
        claim it released), or after its registration, and every one of them failed with
        a fault injected into it; and it never ended before (an ended message is never
        waiting again)."""
        key = f"MESSAGE#{message_id}"
        calls = world.injector.calls
        back = [c.index for c in calls if writes(c, key, "STANDBY") and c.took_effect]
        since = max(back, default=-1)
        if any(c.index < since and c.took_effect and final_write(c, key) for c in calls):
            return False
        later = [n for n in swept if world.lambdas.spans.get(n, (since + 1,))[0] > since]
        return bool(later) and all(
            name in world.lambdas.failures and faulted(world, name) for name in later
        )

    def unreported_sweeps(self, world: World, swept: list[str]) -> list[str]:
        """Every sweep run reports its Overdue datum, 0 included, whatever it left (a
        message whose calls kept failing, its time run out): the Overdue alarm, its missing
        data ignored, sees one each period (finding 6 of the targets issue: one throttle in
        the FIRING pass ended the run before it). Not a run that died (its sandbox, its
        timeout), nor one whose index read failed: it could not count."""
        found = []
        for name in swept:
            failure = world.lambdas.failures.get(name)
            if failure is not None and failure.error_type in (DIED, TIMED_OUT):
                continue
            # (the RESERVED and STANDBY passes end the run at an unanswered index read; the
            # FIRING pass reports what it could read)
            calls = world.injector.calls
            reads = [
                c
                for c in calls
                if invocation_of(c) == name
                and c.operation == "Query"
                and lane_of(c).startswith(("RESERVED", "STANDBY"))
            ]
            if any(unanswered(world, c) for c in reads):
                continue
            if not any(who == name and "Overdue" in values for who, values in self.reported):
                ended = failure.error_type if failure is not None else "ok"
                found.append(f"the sweep {name} ({ended}) reported no Overdue datum")
        return found

    @staticmethod
    def own_executions_after_the_end(
        world: World, table: Table, ids: list[str], machine: str
    ) -> list[str]:
        """A message whose every STANDBY record was written before its slot's cutoff is in
        the index its slot reads: once it has ended, a late stream record of it (a
        redelivery) starts no execution of its own, a slot of one whose claim finds it
        ended (its execution and transitions paid for nothing: finding 7 of the targets
        issue). One written later may get one (the claim decides); so may one the index
        missed while it waited (the sweep, the stream, once the slot's reads are over: a
        consistent read says it is still STANDBY)."""
        found = []
        calls = world.injector.calls
        for message_id in ids:
            key = f"MESSAGE#{message_id}"
            history = [image for _, image in table.images.get(key, []) if image]
            if not history:
                continue
            slot = scheduler_slots.slot_of(float(history[-1]["publish_at"]["N"]))
            waits = [
                when
                for when, image in table.images[key]
                if image and image["status"]["S"] == "STANDBY"
            ]
            if not waits or max(waits) + 1 > scheduler_slots.join_by(slot):
                continue
            ends = [
                c.index
                for c in calls
                if c.took_effect and (final_write(c, key) or writes(c, key, "CANCELLED"))
            ]
            starts = [
                c.index
                for c in calls
                if c.service == "stepfunctions"
                and c.operation == "StartExecution"
                and c.params.get("stateMachineArn") == machine  # (not a target's delivery)
                and c.params.get("name") == message_id
                and 200 in c.answers
            ]
            if ends and starts and min(starts) > min(ends):
                found.append(
                    f"{message_id[:8]}: an execution of its own started after it ended, its "
                    "record written in time for its slot"
                )
        return found

    def resent_unseen(self, world: World, message_id: str, senders: list[str]) -> list[str]:
        """A sender sends a message again only after an outcome it did not see: each
        invocation's sends of it are at most one more than its own unseen outcomes (a
        message listed twice by one read, claimed twice by its own claimant, is not)."""
        found = []
        for sender, sends in collections.Counter(senders).items():
            unseen = self.gave_up_by[(message_id, sender)] + sum(
                1
                for c in world.injector.calls
                if invocation_of(c) == sender
                and c.kind in ("lost", "lostall", "error", "fail", "timeout", "crash")
                and world.injector.hit(c)
                and is_target_invoke(c, message_id)
            )
            if sends > 1 + unseen:
                found.append(f"sent {sends} times by {sender}, {unseen} of its sends unseen")
        return found

    @staticmethod
    def lateness_excused(world: World, swept: list[str]) -> float | None:
        """How late past ON_TIME_SECONDS the schedule's faults may make a message fire (None:
        no bound is checked). A sandbox that dies (`crash`) leaves its claims to the Fire's
        retry (2 s at first) once their lease ends: a minute and the clocks' skew after its
        last renewal (CRASH_SECONDS each). Not bounded here: an invocation that timed out
        or was orphaned (its claims held until its end), Step Functions' own invokes of the
        slot function failing (a retried Fire, or a sweep's restart), a sweep that failed
        (a message due beyond the window moves at the next), and an index lagging more than
        once or at a sweep (the next sweep finds what it hid). A transient error at a
        handler's own call is retried within its invocation: no excuse."""
        if any(name in world.lambdas.failures for name in swept):
            return None
        excused = 0.0
        for call in world.injector.calls:
            if call.kind is None or not world.injector.hit(call):
                continue
            if call.kind in ("timeout", "orphan"):
                return None
            if call.kind == "crash":
                excused += CRASH_SECONDS
            elif call.operation.startswith("Invoke:") and call.kind not in CONCURRENCY:
                return None
        stale = [c for c in world.injector.calls if c.kind == "stale" and world.injector.hit(c)]
        if len(stale) >= 2 or any(c.process.startswith("sweep") for c in stale):
            return None
        return excused

    @staticmethod
    def deliveries_of(attempts: list[str]) -> list[Any]:
        """The sources' invocations, each as a delivery of its own (for the rule that good
        work fails only for a reason)."""
        return [Delivery(name, "?", None, [name]) for name in attempts]


@dataclasses.dataclass
class TargetRun:
    """A delivery to the Lambda target: the message, the invocation sending it, and the
    calls made before it began and before it ended (0: it has not)."""

    message_id: str
    sender: str
    began: int
    ended: int = 0


def behind_a_delivery(world: World, message_id: str, deliveries: list[TargetRun]) -> bool:
    """Whether the message's first delivery came from an index read its invocation made
    after another message's delivery by it had ended: the second read waiting for the
    first read's deliveries (finding 5 of the targets issue), where it should read once
    its second is over, beside them. (Sound while a slow target takes longer than the
    second between the reads, as every one here does, 40 s or more: a sub-second one would
    withdraw the excuse from a message merely queued behind a second read's delivery.)"""
    first = next((d for d in deliveries if d.message_id == message_id), None)
    if first is None:
        return False
    reads = [
        c.index
        for c in world.injector.calls[: first.began]
        if c.operation == "Query" and invocation_of(c) == first.sender
    ]
    return any(
        d.message_id != message_id
        and d.sender == first.sender
        and 0 < d.ended < first.began
        and any(d.ended < r for r in reads)
        for d in deliveries
    )


def invocation_of(call: Call) -> str:
    """The invocation a call was made in (its own process, or a thread of it)."""
    return call.invoked_in or call.process


def lane_of(call: Call) -> str:
    """The status lane an index Query reads."""
    return str(call.params.get("ExpressionAttributeValues", {}).get(":lane", {}).get("S", ""))


def unanswered(world: World, call: Call) -> bool:
    """Whether the caller never had the service's answer to `call`: every send refused or
    its answer lost, or the one send its client makes."""
    if call.kind is None or not world.injector.hit(call):
        return False
    return call.kind in ("fail", "throttle", "lostall") or (
        call.kind in ("error", "lost") and call.sends < 2
    )


def unrecordable(world: World, message_id: str) -> bool:
    """Whether a claimant's every try of the message's final write failed (its slot then
    fails StatusNotRecorded) and no final write ever landed."""
    key = f"MESSAGE#{message_id}"
    finals = [c for c in world.injector.calls if final_write(c, key)]
    failed = collections.Counter(c.process for c in finals if not c.took_effect)
    landed = any(c.took_effect for c in finals)
    return not landed and any(n >= RECORD_ATTEMPTS for n in failed.values())


def is_target_invoke(call: Any, message_id: str) -> bool:
    """A send to the target (an invoke, a FIFO queue's SendMessage, a state machine's
    StartExecution) of `message_id`."""
    if call.service == "events" and call.operation == "PutEvents":
        entries = call.params.get("Entries") or [{}]
        detail = json.loads(entries[0].get("Detail") or "{}")
        return bool(entries[0].get("EventBusName") == BUS_ARN and detail.get("id") == message_id)
    if call.service == "stepfunctions" and call.operation == "StartExecution":
        machine = call.params.get("stateMachineArn")
        return bool(machine in (FLOW_ARN, EXPRESS_ARN) and call.params.get("name") == message_id)
    if call.service == "sqs" and call.operation == "SendMessage":
        body = call.params.get("MessageBody") or "{}"
        return bool(
            call.params.get("QueueUrl") == FIFO_URL and json.loads(body)["id"] == message_id
        )
    if not (
        call.service == "lambda"
        and call.operation == "Invoke"
        and call.params.get("FunctionName") == TARGET_FN
    ):
        return False
    payload = call.params.get("Payload") or b"{}"
    return bool(json.loads(payload).get("id") == message_id)


def writes(call: Any, key: str | None, status: str) -> bool:
    """An UpdateItem of the message `key` (None: of any) that sets `status` (not one that
    only names it in its condition)."""
    if not (
        call.service == "dynamodb"
        and call.operation == "UpdateItem"
        and key in (None, call.params.get("Key", {}).get("pk", {}).get("S"))
    ):
        return False
    assigned = re.search(r"(?:SET|,) #s = (:\w+)", str(call.params.get("UpdateExpression", "")))
    values = call.params.get("ExpressionAttributeValues", {})
    return assigned is not None and values.get(assigned.group(1), {}).get("S") == status


def final_write(call: Any, key: str) -> bool:
    return any(writes(call, key, status) for status in ("DONE", "FAILED", "UNKNOWN"))


def verdict_of(
    final: dict[str, Any] | None,
    fired: list[float],
    ambiguous: int,
    unseen: int,
    publish: float,
    channel: str,
    budget: int,
) -> list[str]:
    """Never before `publish`; then by the channel's rule (handlers/targets.py). A target
    that drops no redelivery ("demo"), a FIFO queue: fired once at most, DONE when fired,
    UNKNOWN only after a send whose outcome the sender did not see (`unseen`). One resent
    after an unseen outcome ("again", an event bus, a STANDARD machine): fired at least
    once and at most once more per send that may have run unseen (`ambiguous`), within
    the send `budget` (a STANDARD machine: started once), DONE; UNKNOWN only once that
    many sends went unseen. An EXPRESS machine: never started, FAILED."""
    violations = []
    status = final and final["status"]
    if channel == "express":  # never sent to: FAILED, nothing started
        failed = status == "FAILED" and "Scheduler.ExpressTarget" in str(final and final["error"])
        if fired:
            violations.append(f"an EXPRESS target started {len(fired)} times")
        if not failed:  # (one left FIRING, its final write unrecordable, is excused below)
            violations.append(f"ended {status}, not FAILED: an EXPRESS target")
        return violations
    if channel in ("demo", "fifo"):  # (a FIFO queue: delivered once however often sent)
        if len(fired) > 1:
            violations.append(f"fired {len(fired)} times to a target that drops no redelivery")
        if status == "UNKNOWN" and not unseen:
            violations.append("ended UNKNOWN with no send whose outcome was lost")
        elif status not in ("DONE", "UNKNOWN"):
            violations.append(f"ended {status}, not DONE")
        elif status == "DONE" and not fired:
            violations.append("ended DONE, never fired")
    else:
        # (a budget of 1 is spent by the claim's own send: UNKNOWN after one unseen outcome)
        spent = status == "UNKNOWN" and unseen >= max(1, budget - 1)
        # ("again", a bus, a STANDARD machine: resent after an unseen outcome, within the
        # budget; a STANDARD machine starts a name once however often it is sent)
        allowed = 1 if channel == "flow" else min(1 + ambiguous, budget)
        if status != "DONE" and not spent:
            violations.append(f"ended {status}, not DONE")
        if not fired and not spent:
            violations.append("never fired")
        elif len(fired) > allowed:
            violations.append(f"fired {len(fired)} times (allowed {allowed})")
    if fired and min(fired) < publish:
        violations.append(f"fired {publish - min(fired):.3f}s early")
    return violations
