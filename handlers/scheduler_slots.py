"""The scheduler's one firing engine: an execution per second of publish times, or per message.

Messages due in the same second share one STANDARD execution, named by that second
(`slot-<epoch>`, so however many messages, stream records or sweeps start it, it starts
once). It Waits until `LEAD_SECONDS` before the second, then invokes `handler` here,
which reads the second's messages from the status index, claims each with a conditional
write (STANDBY -> FIRING, `claimed_by` the slot's execution: a retried or duplicated
clock fires nothing twice), delivers each at its own millisecond, and writes DONE or
FAILED. A slot past `CHUNK` messages fans out
to the workers function (this handler with a whole vCPU), each worker taking a share of
the status index's lanes. Per message that is two writes and no state transition; the
slot's own two transitions are shared by every message of its second (docs/cost.md).

A message joins its slot only if it is started before `join_by(slot)` (the slot then
reads the index after the message was written, with `JOIN_MARGIN_SECONDS` for the
index to catch up). A later one (registered late or too near its second) gets a slot of
one: an execution of the same state machine, named by its id, whose input names the
message (`slot_input`); the same code claims, delivers, retries and records it, reading
the message by its key instead of the index. Once its
second is over a slot reads the index once more and fires any message the first read
missed (late, not at the next sweep).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import datetime as dt
import functools
import hashlib
import json
import math
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from exactly_once.handlers import metrics, scheduler_pace, scheduler_store, timestamps
from exactly_once.handlers.errors import ClientError, aws_code
from exactly_once.handlers.runtime import lambda_handler, log
from exactly_once.handlers.scheduler_index import PATTERN, Status, due, lanes
from exactly_once.handlers.scheduler_pace import Pace
from exactly_once.handlers.settings import Settings
from exactly_once.handlers.targets import (
    FIFO,
    FIFO_MARGIN_SECONDS,
    FIFO_WINDOW_SECONDS,
    OUTCOME_UNKNOWN_ERROR,
    UNKNOWN_ERRORS,
    Outcome,
    Resend,
    TargetKind,
    address,
    kind_of,
    machine_of,
    resend_policy,
)

LEAD_SECONDS = 2  # the slot wakes this long before its second (as a message's execution)
JOIN_MARGIN_SECONDS = 1  # the index's catch-up before the slot reads it
# The threads that run beside the slot's own, by name: the first read's deliveries (while
# the slot reads again once its second is over), and the workers' invokes.
FIRST_READ, WORKERS = "slot-first-read", "slot-workers"
# Messages the slot function fires itself; a larger slot fans out to the workers function
# (same code, more memory: Lambda allots CPU by memory, and each message costs three AWS
# calls of CPU), handing each worker its share of the ids it read.
CHUNK = 50
# Messages a worker fires (a whole vCPU, 1,769 MB: three AWS calls of CPU a message, about
# 2 ms each over TLS as benchmarks/measured.py finds: 0.6 s of a second for 100); a slot
# of up to 100 a worker, of 101 to 200 two, at most MAX_WORKERS (past 6,400 a second they
# share more each).
WORKER_SHARE = 100
MAX_WORKERS = 64
# Workers are invoked this long before their second, not at the slot's wake (LEAD_SECONDS
# ahead): time for a cold one to start (about 0.6 s), import (0.25 s of its vCPU) and claim
# its share (0.23 s of CPU for 100). A worker's billed time is most of what it costs, and
# it would spend the rest of the lead waiting; a late one makes its messages late, never
# early or twice. A slot whose claims would take longer than that at a new on-demand
# table's write rate (4,000 units a second until it has served more: DynamoDB developer
# guide, "Pre-warming a table for on-demand capacity mode") invokes them at once.
WORKER_LEAD_SECONDS = 1.2
NEW_TABLE_WRITES = 4000
# A dense second (SchedulerArgs.warm_ahead_from messages or more, 1,000 by default) is
# warmed ahead: the stream starter, every PROBE_EVERY of a second's messages it starts,
# counts one lane of the index (times LANES: ids spread evenly over them) and from that
# many starts the second's warm-up execution (`warm_name`), woken WARM_LEAD_SECONDS before
# the second. Its invocation of this function reads the slot as the slot will and pings
# each worker the slot will fan out to (each ping held PING_HOLD_SECONDS, so that each
# lands in an environment of its own), claiming nothing: the slot then wakes to warm
# functions, and a burst after minutes idle fires as one after a busy minute (docs/cost.md,
# "The scheduler in a burst"). Its cold start, read and pings take about 4.5 s, done
# before the slot's wake: one that could not be started WARM_LEAD_SECONDS ahead is not
# started, and one that runs late (its invoke retried) pings nothing past PINGS_BY_SECONDS
# before the second (its pings would hold environments the slot's fan-out needs). Lambda
# "may reuse" an idle environment ("Lambda execution environments", Lambda operator guide):
# a head start, not a guarantee (provisioned concurrency is one).
WARM_LEAD_SECONDS = 8
PING_HOLD_SECONDS = 1.0
PINGS_BY_SECONDS = LEAD_SECONDS + PING_HOLD_SECONDS + 0.5
PROBE_EVERY = 10
WARM_MARK = "-warm"
# Concurrent claims and deliveries per read: one per message of a chunk, so a slow Lambda
# target (invoked synchronously: its answer decides DONE or FAILED) delays only its own
# message; a worker has a thread for each of its share, up to WORKER_SHARE (`fire`'s pool:
# twice that, the slot's second read beside its first), 12,800 a second over 64 workers;
# past that a worker's share queues behind its threads.
THREADS = CHUNK
SLOT_PREFIX = "slot-"
# A delivery's throttles are retried (`deliver`), never taken for a refusal.
THROTTLE_CODES = frozenset(
    {
        "TooManyRequestsException",
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "KMSThrottlingException",
        "Throttled",
        "RequestThrottled",
        "KmsThrottled",
        "KMSThrottling",
        "KmsThrottlingException",
        "EC2ThrottledException",
    }
)
THROTTLED_ATTEMPTS, FAILED_ATTEMPTS = 30, 3
# Sends of one message that may have taken effect, counted on its record before each is
# made (`count_send`), across retries, takeovers and restarts: the first and
# FAILED_ATTEMPTS more. A send refused unrun (a throttle, a 4xx) is not spent.
SEND_BUDGET = 1 + FAILED_ATTEMPTS
# No send starts with less than this left before the deadline: its answer (a Lambda
# target's, waited for at most what is left) must come back while the claim is alive.
MIN_SEND_SECONDS = 5
CLAIM_ATTEMPTS = 4
SLOT_SECONDS = 900  # a slot invocation's most (Lambda's longest timeout), when not told
HOLD_MARGIN_SECONDS = 60  # left of an invocation's time after waiting for a lease to end
# A lease is taken over only this long after it ended: the claimant's clock and the taker's
# are two hosts' (both synchronised by the Amazon Time Sync Service, within milliseconds;
# the margin is for the time a write spends in flight).
LEASE_SKEW_SECONDS = 5
# A claim is held this long at a time (never past its invocation's end), renewed every
# RENEW_SECONDS from its first send until its status is written (`Keeper`): a claimant
# that dies leaves its messages to the slot's retry about a minute later, not at its
# invocation's end. Three renewals may fail in a row before the lease ends under a live
# claimant. A claim still waiting to be sent (not yet sent, or its every send refused
# unrun by a throttling target) is held WAIT_LEASE_SECONDS at a time instead, renewed once
# its lease ends within LEASE_SECONDS: one write in two minutes rather than eight (a
# burst of 1,000 held while a target of concurrency 12 worked through them cost 67
# renewals a second, more than LocalStack's table served, and the leases lapsed under
# live claimants); a claimant that dies leaves those three minutes later.
LEASE_SECONDS = 60
RENEW_SECONDS = 15
WAIT_LEASE_SECONDS = 180
RECORD_ATTEMPTS = 8  # a delivered message's final status write (`record`)
# ...tried until this long after the deadline (the deadline is a minute before the
# invocation's end): a final write still failing then fails StatusNotRecorded, not a timeout
RECORD_MARGIN_SECONDS = 50
RESTART_MARK = "-swept-"  # in the name of a restart's execution (`restart_name`)
OUTCOMES = frozenset({Status.DONE, Status.FAILED, Status.UNKNOWN})  # a claimant's final writes


@dataclasses.dataclass(frozen=True)
class SlotSettings(Settings):
    table: str
    workers_function: str
    """The function a large slot fans out to (this handler, with more memory)."""


class StatusNotRecorded(Exception):
    """A delivered message's final status could not be written: it stays FIRING (the
    sweep counts it overdue). Never retried by the slot's state machine: the deliveries
    happened, and a retry would deliver them again."""


def slot_of(publish_at: float) -> int:
    return math.floor(publish_at)


def join_by(slot: int) -> float:
    """The latest time a message may be started into `slot`'s clock."""
    return slot - LEAD_SECONDS - JOIN_MARGIN_SECONDS


def slot_name(slot: int) -> str:
    return f"{SLOT_PREFIX}{slot}"


def _wake_at(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def slot_input(slot: int, message_id: str | None = None) -> dict[str, Any]:
    """A slot execution's input: its second, and when its Wait ends, a whole second (a
    Wait would drop a fraction: the handler sleeps from there to each message's own
    millisecond); with `message_id`, a slot of one: that message only."""
    found: dict[str, Any] = {"slot": slot, "wakeAt": _wake_at(slot - LEAD_SECONDS)}
    return {**found, "message": message_id} if message_id else found


def warm_name(slot: int) -> str:
    """A dense second's warm-up execution (WARM_LEAD_SECONDS)."""
    return f"{slot_name(slot)}{WARM_MARK}"


def warm_input(slot: int) -> dict[str, Any]:
    return {"slot": slot, "wakeAt": _wake_at(slot - WARM_LEAD_SECONDS), "warm": True}


def restart_name(slot: int, swept_at: float) -> str:
    """The execution that takes up a slot's messages left FIRING by a claimant that died:
    one per sweep that finds such a claim (a restart that missed one, its index lagging,
    is followed by the next sweep's). Its name says it is a restart (`is_restart`): what
    an execution is cannot be told by its input, which any caller could have set."""
    return f"{slot_name(slot)}{RESTART_MARK}{math.floor(swept_at)}"


def retry_key(slot: int) -> str:
    """The key of the executions that take up a slot's messages left STANDBY past their
    time (their claims given back unsent, or never made: the slot's every attempt ended, or
    its target throttled it past them). Started with ALLOW_DUPLICATE_FAILED_ONLY (`-r1`,
    `-r2`, ... after each that failed), so a slot has one such execution at a time, however
    many of its messages each sweep finds: not one per message, each with its own
    invocation and its own pace against a target that is already refusing. A restart
    (`is_restart`)."""
    return f"{slot_name(slot)}{RESTART_MARK}standby"


def is_restart(execution: str) -> bool:
    """Whether the execution (its ARN or name) is a restart of its slot (`restart_name`)."""
    return RESTART_MARK in execution.rsplit(":", 1)[-1]


# -- clients -------------------------------------------------------------------------------
# Sends per call. A delivery (or a worker's invoke) is sent once by the SDK: its retries are
# ours (`deliver`), each a decision, never a silent resend of something that may have run
# (botocore's `max_attempts` counts retries, so 1 would be two sends; `total_max_attempts`
# counts sends). DynamoDB's conditional writes are safe to resend.
DELIVERY_SENDS, DYNAMODB_SENDS = 1, 6


@functools.cache
def _client(service: str) -> Any:
    """Clients sized for this function's threads. A Lambda target (or a worker) may run up
    to 15 minutes: the read timeout outlasts it, or the caller would give up on one still
    running."""
    import boto3
    from botocore.config import Config

    sends = DYNAMODB_SENDS if service == "dynamodb" else DELIVERY_SENDS
    config = Config(
        max_pool_connections=2 * WORKER_SHARE,  # (a worker's threads: `fire`'s pool)
        read_timeout=900 if service == "lambda" else 60,
        # an invoke waited on for minutes keeps its connection (a NAT gateway drops one
        # idle for 350 s)
        tcp_keepalive=service == "lambda",
        retries={"total_max_attempts": sends, "mode": "standard"},
    )
    return boto3.client(service, config=config)  # type: ignore[call-overload]


def clients() -> None:
    """Every client, built once at cold start (not by 32 threads at once, each building one)."""
    for service in ("dynamodb", "lambda", "sqs", "sns", "stepfunctions", "events"):
        _client(service)
    _renewals()


# -- reading the slot ------------------------------------------------------------------------
def members(
    table: str, slot: int, statuses: tuple[str, ...], shard: int = 0, of: int = 1
) -> list[str]:
    """Ids of the slot's messages in `statuses`, in this shard's lanes (shard i of n takes
    lanes i, i + n, ...: a worker of an earlier release's slot, which handed out lanes, not
    ids), by publish time. One Query per lane, side by side."""
    # (each lane once: FIRING messages are listed in the STANDBY lanes)
    wanted = list(dict.fromkeys(lane for status in statuses for lane in lanes(status, shard, of)))
    ddb = _client("dynamodb")

    def read(status_lane: str) -> list[tuple[str, float]]:
        # publish times are stored to the millisecond: the second's last is .999
        return list(due(ddb, table, status_lane, until=slot + 0.999, since=slot))

    with concurrent.futures.ThreadPoolExecutor(min(len(wanted), THREADS)) as pool:
        found = [found for lane_found in pool.map(read, wanted) for found in lane_found]
    # Once each: an index read is eventually consistent, and an item moving between two
    # lanes (RESERVED to STANDBY, an earlier release's FIRING to STANDBY) may be listed in
    # both for a moment (DynamoDB developer guide, "Read consistency for global secondary
    # indexes").
    ordered = (message_id for message_id, _ in sorted(found, key=lambda f: f[1]))
    return list(dict.fromkeys(ordered))


# -- claiming, delivering, recording ---------------------------------------------------------
def claimant(execution: str, attempt: int, invocation: str = "") -> str:
    """Who claims: one invocation of one attempt of a slot execution's Fire (its retry is
    another; so is a second invocation of the same attempt, should one ever run)."""
    return f"{execution}#{attempt}#{invocation}"


def execution_of(claimed_by: str) -> str:
    """The slot execution a claimant (`claimant`, or a worker's) belongs to."""
    return claimed_by.split("#", 1)[0]


@dataclasses.dataclass(frozen=True)
class Claim:
    """A claim's answer: the message (now ours), or why not: `held_until` when a live lease
    holds it (another attempt, still running, delivers it), else cancelled, ended or gone."""

    item: dict[str, Any] | None
    held_until: float | None = None


def send_token(me: str, n: int) -> str:
    """The `n`th send of claimant `me`, as counted in the record's `sends` (a string set:
    a count written twice, its answer lost, is one entry). Short: the item stays small."""
    return f"{hashlib.sha256(me.encode()).hexdigest()[:10]}.{n}"


def claim(table: str, message_id: str, me: str, lease: float) -> Claim:
    """STANDBY -> FIRING for `me`, holding it until `lease` (a minute ahead, renewed by its
    `Keeper` while in hand); or FIRING taken over from a claimant whose lease ended
    `LEASE_SKEW_SECONDS` ago (it stopped renewing: dead, or its renewals failing for
    longer than the lease's slack, when its own sends stop: `Sending.held`); or `me`'s own
    earlier claim (a claim resent after a lost answer). The claim counts its first send
    (`sends`, and `first_sent` if none was before): a claimant that dies after it is taken
    to have sent."""
    now = time.time()
    expired = now - LEASE_SKEW_SECONDS
    first = send_token(me, 0)
    ddb = _client("dynamodb")
    item, old = scheduler_store.claim(ddb, table, message_id, me, lease, first, now, expired)
    if item is not None:
        return Claim(item)
    if old.get("status", {}).get("S") == Status.FIRING and "lease" in old:
        return Claim(None, float(old["lease"]["N"]))
    return Claim(None)


class OutOfTime(Exception):
    """Past the invocation's deadline: nothing more is claimed or sent (its claims' lease
    ends soon after, and another may take them over)."""


def claim_once(
    table: str,
    message_id: str,
    me: str,
    lease: float | Callable[[], float],
    deadline: float | None = None,
) -> Claim | Exception:
    """`claim`, its own errors retried with back-off (a burst may meet the table's
    throughput after the SDK's retries): the claim, or the last error (OutOfTime past
    `deadline`); never a failure that would end the invocation after other messages
    were claimed. `lease` may be a function: each try holds the claim from its own time."""
    for attempt in range(CLAIM_ATTEMPTS):
        if deadline is not None and time.time() >= deadline:
            return OutOfTime(message_id)
        try:
            return claim(table, message_id, me, lease() if callable(lease) else lease)
        except Exception as exc:
            if attempt == CLAIM_ATTEMPTS - 1:
                log("WARNING", "not claimed", message_id=message_id, exc=exc)
                return exc
            time.sleep(min(5.0, 0.2 * 2.0**attempt) * random.random())
    raise AssertionError("unreachable")


class TargetFailed(Exception):
    """The target answered an error (its function's own), or refused the send for good."""

    def __init__(self, error: str, cause: str, outcome: Outcome = Outcome.FAILED) -> None:
        super().__init__(f"{error}: {cause}")
        self.error, self.cause, self.outcome = error, cause, outcome


class OutcomeUnknown(Exception):
    """Sent, and whether it took effect is not known (a timeout, a lost answer, a claimant
    that died after its claim), where a resend could apply it twice: the message ends
    UNKNOWN with this error, never sent again."""

    def __init__(self, error: str, cause: str) -> None:
        super().__init__(f"{error}: {cause}")
        self.error, self.cause = error, cause


NOT_RESENT = "the channel's target does not drop a redelivery (SchedulerArgs: redeliver)"
PAST_WINDOW = "past the FIFO target's 5-minute deduplication interval"


class TakenOver(Exception):
    """The claim is no longer this claimant's: another delivers the message."""


def delivery_of(item: dict[str, Any]) -> dict[str, Any]:
    """What the target receives: the message, its id first (targets drop a redelivery by it)."""
    delivery = {
        "id": item["id"]["S"],
        "channel": item["channel"]["S"],
        "parameters": json.loads(item["parameters"]["S"]),
        "publishTime": float(item["publish_at"]["N"]),
    }
    if "late_on_arrival" in item:
        delivery["lateOnArrival"] = float(item["late_on_arrival"]["N"])
    return delivery


_BUILDING = threading.Lock()  # boto3's session is not thread-safe while it builds a client


@functools.cache
def _target_lambda(read_timeout: int) -> Any:
    """A client for Lambda targets that waits `read_timeout` seconds for an answer at most
    (a sync invoke answers when the function ends): a send never outlives the claim."""
    import boto3
    from botocore.config import Config

    config = Config(
        max_pool_connections=2 * WORKER_SHARE,  # (a worker's threads: `fire`'s pool)
        read_timeout=read_timeout,
        connect_timeout=MIN_SEND_SECONDS,  # (a connection not made is a send not made)
        tcp_keepalive=True,
        retries={"total_max_attempts": DELIVERY_SENDS, "mode": "standard"},
    )
    with _BUILDING:
        return boto3.client("lambda", config=config)


class NotSent(Exception):
    """The send failed before any request left (building its client, its parameters)."""


def answer_within(seconds: float) -> int:
    """A read timeout of at most `seconds` (30 s steps, 5 s below 30: few clients)."""
    step = 30 if seconds >= 30 else MIN_SEND_SECONDS
    return min(SLOT_SECONDS, int(seconds // step) * step)


@functools.cache
def _machine_type(arn: str) -> str:
    """STANDARD or EXPRESS, of the state machine an ARN names (a version's or an alias's
    is its machine's: DescribeStateMachine takes the machine's or a version's ARN)."""
    machine = machine_of(arn)
    return str(_client("stepfunctions").describe_state_machine(stateMachineArn=machine)["type"])


def _express_target(machine: str) -> TargetFailed:
    cause = f"{machine} is an EXPRESS state machine: it does not drop a second start"
    return TargetFailed("Scheduler.ExpressTarget", cause, Outcome.REFUSED)


def _express(machine: str, delivery: dict[str, Any]) -> bool:
    """Whether the machine is EXPRESS; its type unread (DescribeStateMachine failing) is
    OutOfTime: the claim is given back, its counted sends kept, for the Fire's retry (a
    read that failed is never taken for a send). A machine's type never changes while its
    ARN names it (UpdateStateMachine cannot change it; a machine deleted and created again
    under the same name may, and each sandbox reads a type once)."""
    try:
        return _machine_type(machine) != "STANDARD"
    except Exception as exc:
        log("WARNING", "target's type not read", message_id=delivery["id"], exc=exc)
        raise OutOfTime(delivery["id"]) from exc


def _standard(machine: str) -> None:
    """Before a start: the machine is STANDARD, else TargetFailed (never sent to). A read
    that failed never ran anything: a throttle is retried as one, any other error as a
    send never made (NotSent), never counted as a send that may have run."""
    try:
        express = _machine_type(machine) != "STANDARD"
    except ClientError as exc:
        if aws_code(exc) in THROTTLE_CODES:
            raise
        raise NotSent(f"DescribeStateMachine: {exc!r}") from exc
    except Exception as exc:
        raise NotSent(f"DescribeStateMachine: {exc!r}") from exc
    if express:
        raise _express_target(machine)


def send(target_arn: str, delivery: dict[str, Any], within: float | None = None) -> None:
    """One delivery attempt, each kind as components/targets.py's Task sends it; a Lambda
    target's answer waited for `within` seconds at most."""
    kind, where, message_id = kind_of(target_arn), address(target_arn), delivery["id"]
    text = json.dumps(delivery, separators=(",", ":"))
    fifo = {"MessageGroupId": message_id, "MessageDeduplicationId": message_id}
    if kind == TargetKind.LAMBDA:
        try:
            lam = _target_lambda(answer_within(within)) if within is not None else _client("lambda")
        except Exception as exc:
            raise NotSent(repr(exc)) from exc
        answer = lam.invoke(FunctionName=where, Payload=text.encode())
        if answer.get("FunctionError"):
            payload = answer["Payload"].read().decode()
            try:
                error = str(json.loads(payload).get("errorType", "Lambda.Unknown"))
            except (ValueError, AttributeError):
                error = "Lambda.Unknown"
            raise TargetFailed(error, payload, function_error_outcome(error, payload))
    elif kind in (TargetKind.SQS, TargetKind.SQS_FIFO):
        extra = fifo if kind in FIFO else {}
        _client("sqs").send_message(QueueUrl=where, MessageBody=text, **extra)
    elif kind in (TargetKind.SNS, TargetKind.SNS_FIFO):
        extra = fifo if kind in FIFO else {}
        _client("sns").publish(TopicArn=where, Message=text, **extra)
    elif kind == TargetKind.STATES:
        # An EXPRESS machine starts a second execution of a name already started
        # (StartExecution: "Idempotency is not automatically managed"): never sent to.
        _standard(where)
        try:
            _client("stepfunctions").start_execution(
                stateMachineArn=where, name=message_id, input=text
            )
        except ClientError as exc:
            # The execution of this message's name exists: an earlier attempt delivered it.
            if aws_code(exc) != "ExecutionAlreadyExists":
                raise
    else:
        answer = _client("events").put_events(
            Entries=[
                {
                    "EventBusName": where,
                    "Source": "exactly-once",
                    "DetailType": "delivery",
                    "Detail": text,
                }
            ]
        )
        if answer.get("FailedEntryCount"):
            entry = answer["Entries"][0]
            code, reason = str(entry.get("ErrorCode")), str(entry.get("ErrorMessage"))
            # an entry refused unrun ("ThrottlingException": retryable, PutEventsResultEntry
            # in the EventBridge API Reference) is retried as a throttle, never FAILED
            if code in THROTTLE_CODES:
                raise ClientError({"Error": {"Code": code, "Message": reason}}, "PutEvents")
            # "InternalFailure": an unknown error, which may have come after the event was
            # put; any other entry error refuses the entry
            unseen = code == "InternalFailure"
            raise TargetFailed(code, reason, Outcome.UNKNOWN if unseen else Outcome.REFUSED)


# Lambda Invoke's 5xx errors that come before the function runs: its environment could not
# be set up (Lambda API Reference, Invoke: "Errors"). Any other 5xx may have come after.
SETUP_ERRORS = frozenset(
    {
        "EC2ThrottledException",
        "EC2AccessDeniedException",
        "ENILimitReachedException",
        "SubnetIPAddressLimitReachedException",
        "InvalidSubnetIDException",
        "InvalidSecurityGroupIDException",
        "InvalidZipFileException",
        "InvalidRuntimeException",
        "KMSAccessDeniedException",
        "KMSDisabledException",
        "KMSInvalidStateException",
        "KMSNotFoundException",
        "ResourceNotReadyException",
        "EFSMountConnectivityException",
        "EFSMountFailureException",
        "EFSMountTimeoutException",
        "SnapStartException",
        "SnapStartNotReadyException",
        "SnapStartTimeoutException",
    }
)
# A function's own error types for a run that never reached the handler (its init failed)
NOT_RUN_TYPES = (
    "Runtime.ImportModuleError",
    "Runtime.HandlerNotFound",
    "Runtime.UserCodeSyntaxError",
)


def function_error_outcome(error: str, payload: str) -> Outcome:
    """A synchronous invoke answered with an error: the handler never ran (its init
    failed: REFUSED); Lambda ended it, or it ran and its answer could not be returned
    (its timeout, out of memory, the runtime exiting, `Function.ResponseSizeTooLarge`:
    it "might have run completely, partially, or not at all", UNKNOWN); a receiver's
    other run of it still going on (UNKNOWN); or the function's own error (FAILED)."""
    if error in NOT_RUN_TYPES:
        return Outcome.REFUSED
    if error.startswith(("Sandbox.", "Runtime.", "Function.")) or "Task timed out" in payload:
        return Outcome.UNKNOWN
    if error in UNKNOWN_ERRORS:
        return Outcome.UNKNOWN
    return Outcome.FAILED


def outcome_of(exc: Exception) -> Outcome:
    """What a failed send says of its effect. A throttle, a 4xx or an environment not set
    up came before anything ran; so did a connection never made and a request never
    built. A 5xx, a read timeout or a connection closed while waiting may have come after
    it ran."""
    if isinstance(exc, TargetFailed):
        return exc.outcome
    if isinstance(exc, NotSent):
        return Outcome.REFUSED
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 400)
        code = aws_code(exc)
        if code in THROTTLE_CODES or code in SETUP_ERRORS or int(status) < 500:
            return Outcome.REFUSED
        return Outcome.UNKNOWN
    from botocore.exceptions import (
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ParamValidationError,
    )

    never_sent = EndpointConnectionError | ConnectTimeoutError | ParamValidationError
    if isinstance(exc, never_sent | NoCredentialsError):
        return Outcome.REFUSED
    return Outcome.UNKNOWN


@dataclasses.dataclass
class Sending:
    """One claimant's sends of one message, each counted on the record before it is made
    (SEND_BUDGET across every claimant), and what may be resent (handlers/targets.py)."""

    table: str
    message_id: str
    me: str
    policy: Resend
    first_sent: float
    earlier: int  # sends counted by claimants before this one: their outcome is unknown
    spent: int = 1  # counted on the record so far, this claimant's first (its claim's) too
    mine: int = 1  # this claimant's counted sends
    unspent: bool = True  # the last one counted was not made, or was refused unrun
    last: OutcomeUnknown | TargetFailed | None = None  # a send that may have run, and failed
    keeper: Keeper | None = None  # holds the claim: asked before every send (`held`)

    @classmethod
    def of(cls, table: str, item: dict[str, Any], me: str, policy: Resend) -> Sending:
        """From the item the claim returned (its `sends` holding this claimant's first)."""
        tokens = item.get("sends", {}).get("SS", [])
        mine = send_token(me, 0).split(".")[0]
        earlier = sum(1 for t in tokens if not t.startswith(mine + "."))
        first = float(item.get("first_sent", {}).get("N", time.time()))
        return cls(table, item["id"]["S"], me, policy, first, earlier, max(1, len(tokens)))

    def may_resend(self, last: OutcomeUnknown | TargetFailed) -> None:
        """A send that may have run failed (`last`): returns if another may follow, or
        raises `last` (the target answered an error) or OutcomeUnknown when the channel's
        rule (handlers/targets.py) refuses a resend."""
        self.last = last
        if self.policy == Resend.NEVER:
            if isinstance(last, TargetFailed):
                raise last
            raise OutcomeUnknown(last.error, f"{last.cause} (not resent: {NOT_RESENT})")
        self.in_window()

    def held(self) -> None:
        """Before every send: the claim is still this claimant's for long enough to make it
        (its lease renewed: `Keeper`), else TakenOver (another claimant has it) or
        OutOfTime (renewals failing: the lease may end under the send; released)."""
        if self.keeper is None:
            return
        until = self.keeper.held_until(self.message_id)
        if until is None:
            raise TakenOver(self.message_id)
        if until - time.time() < MIN_SEND_SECONDS + LEASE_SKEW_SECONDS:
            raise OutOfTime(self.message_id)
        self.keeper.sending(self.message_id)

    def refused(self) -> None:
        """The send was refused unrun: if no send of this claimant's may have run, the
        claim waits for its next turn on a longer lease (`Keeper.unsent`; one whose send
        may still run keeps the minute's, for a taker's resend to stay near it, as does any
        to a FIFO target: `keep_near`)."""
        if self.keeper is not None and self.last is None and self.policy != Resend.WINDOW:
            self.keeper.unsent(self.message_id)

    def keep_near(self) -> None:
        """A FIFO target's claim keeps the minute's lease even while it waits, as long as
        the queue's deduplication interval of the send its claim counted lasts: its taker
        (should this claimant die) sends within it, or not at all (`in_window`); a
        three-minute lease would leave a message never sent UNKNOWN. Past the interval a
        taker sends nothing however soon it comes: the claim waits on the longer lease
        (a dense second to a FIFO target renews its claims seldom again)."""
        if self.keeper is not None and self.policy == Resend.WINDOW:
            self.keeper.sending(self.message_id, until=self.window_closes())

    def window_closes(self) -> float:
        """When a FIFO target's deduplication interval of the first counted send ends, less
        the margin (the clocks' skew, a send's time in flight)."""
        return self.first_sent + FIFO_WINDOW_SECONDS - FIFO_MARGIN_SECONDS

    def in_window(self) -> None:
        """Before each send that follows one that may have run: a FIFO target's is made
        only inside its deduplication interval (a pause, a throttle or a slow count may
        have carried it past), else OutcomeUnknown."""
        if self.last and self.policy == Resend.WINDOW and time.time() >= self.window_closes():
            last = self.last
            raise OutcomeUnknown(last.error, f"{last.cause} (not resent: {PAST_WINDOW})")

    def count(self, last: OutcomeUnknown | TargetFailed) -> None:
        """Count the next send on the record (none if the last was not made): returns, or
        raises `last` (the budget is spent), TakenOver or OutOfTime (the count failed)."""
        if self.unspent:
            return
        token = send_token(self.me, self.mine)
        answer = count_send(self.table, self.message_id, self.me, token)
        if answer == "SPENT":
            raise last
        if answer == "TAKEN_OVER":
            raise TakenOver(self.message_id)
        if answer == "NOT_COUNTED":
            raise OutOfTime(self.message_id)  # never sent uncounted: released for a retry
        self.mine, self.spent, self.unspent = self.mine + 1, self.spent + 1, True

    def token(self) -> str | None:
        """This claimant's last count, if its send was never made (a release drops it)."""
        return send_token(self.me, self.mine - 1) if self.unspent else None


def count_send(table: str, message_id: str, me: str, token: str) -> str:
    """One more send on `me`'s claim, before it is made: COUNTED (or counted before, its
    answer lost), SPENT (SEND_BUDGET sends counted), TAKEN_OVER, or NOT_COUNTED (the
    table kept failing)."""
    try:
        ddb = _client("dynamodb")
        old = scheduler_store.count_send(ddb, table, message_id, me, token, SEND_BUDGET)
    except Exception as exc:
        log("WARNING", "send not counted", message_id=message_id, exc=exc)
        return "NOT_COUNTED"
    if old is None:
        return "COUNTED"
    ours = old.get("status", {}).get("S") == Status.FIRING
    return "SPENT" if ours and old.get("claimed_by", {}).get("S") == me else "TAKEN_OVER"


def deliver(
    target_arn: str,
    delivery: dict[str, Any],
    sleep: Callable[[float], None] | None = None,
    deadline: float | None = None,
    sending: Sending | None = None,
    pace: Pace | None = None,
) -> None:
    """`send` until delivered, each send counted first (`sending`: without it, as if every
    outcome may be resent). A throttle is retried up to 30 times (1 s growing 1.5x to at
    most 5 s, full jitter), or until `deadline` when later (a throttled call never ran:
    waiting longer loses nothing, where giving up would mark the message FAILED
    undelivered); a send refused for another reason 3 times (1, 2, 4 s), then TargetFailed.
    A send that ran and failed, or may have run, is sent again only as the channel's rule
    allows (`Sending.may_resend`), within the budget; else TargetFailed (the target said
    so) or OutcomeUnknown. No send starts, and no pause ends, within MIN_SEND_SECONDS of
    the deadline (OutOfTime: its claim is released, for a retry to decide). Each send
    waits for its turn at the target's `pace` (handlers/scheduler_pace.py), if given: a
    turn not had by then is OutOfTime too; a throttled send is then sent again within a
    second, or after a turn given back (the pace spaces the sends, not the back-off), and
    no turn is held through another failure's pause."""
    sleep = sleep or time.sleep  # read when called: a test's clock may stand in for time
    throttled = refused = failed = 0
    if sending is not None and sending.earlier:
        # A claimant before this one counted a send and never recorded its outcome: none
        # reached an EXPRESS machine (none is ever sent to), so that refusal stands.
        if kind_of(target_arn) == TargetKind.STATES and _express(address(target_arn), delivery):
            raise _express_target(address(target_arn))
        why = f"{sending.earlier} sends counted by claimants that never recorded an outcome"
        sending.may_resend(OutcomeUnknown("Scheduler.EarlierSend", why))
        if sending.spent > SEND_BUDGET:
            raise OutcomeUnknown("Scheduler.SendBudgetSpent", why)
    turn = False  # had at the target's `pace`
    by = None if deadline is None else deadline - MIN_SEND_SECONDS  # a turn had, or none
    try:
        while True:
            if pace is not None and not turn and not (turn := pace.take(by)):
                raise OutOfTime(delivery["id"])
            left = None if deadline is None else deadline - time.time()
            if left is not None and left < MIN_SEND_SECONDS:
                raise OutOfTime(delivery["id"])
            if sending is not None:
                sending.held()
                sending.in_window()
            sent_at = time.time()
            try:
                send(target_arn, delivery, left)
            except Exception as exc:
                outcome, code = outcome_of(exc), ""
                if isinstance(exc, ClientError):
                    code = aws_code(exc)
                if isinstance(exc, TargetFailed):
                    code = exc.error
                # (a throttle refuses a send unrun: a function that ran and answered an
                # error of that name was not throttled)
                throttle = outcome == Outcome.REFUSED and code in THROTTLE_CODES
                if pace is not None and turn and throttle:
                    turn = pace.throttled(sent_at)  # (False: given back)
                if outcome == Outcome.REFUSED and code == "Scheduler.ExpressTarget":
                    raise
                if outcome == Outcome.REFUSED:  # never ran: nothing spent
                    if sending is not None:
                        sending.refused()
                    if throttle and (throttled < THROTTLED_ATTEMPTS or deadline):
                        throttled += 1
                        if pace is None:
                            pause = random.uniform(0, min(5.0, 1.5**throttled))
                        else:
                            # its pace spaces the sends: a turn kept is used again within a
                            # second, one given back is asked for again at once
                            pause = random.uniform(0, 1.0) if turn else 0.0
                    elif refused < FAILED_ATTEMPTS:
                        refused += 1
                        pause = 2.0 ** (refused - 1)
                    else:
                        raise _failed(exc, code) from exc
                else:  # it ran and failed, or may have run
                    last = _failed(exc, code) if outcome == Outcome.FAILED else _unknown(exc, code)
                    if code == OUTCOME_UNKNOWN_ERROR:  # a receiver that will never run it again
                        raise last from exc
                    if sending is not None:
                        sending.unspent = False
                        sending.may_resend(last)
                    if failed >= FAILED_ATTEMPTS:
                        raise last from exc
                    failed += 1
                    pause = 2.0 ** (failed - 1)
                    if sending is not None:
                        sending.count(last)
                if deadline is not None and time.time() + pause + MIN_SEND_SECONDS >= deadline:
                    raise OutOfTime(delivery["id"]) from exc
                if pace is not None and turn and not throttle:
                    pace.give_back()  # (not held through a failure's back-off)
                    turn = False
                sleep(pause)
                if pace is not None and turn:
                    turn = pace.keep()  # (False: given to one waiting longer)
            else:
                if pace is not None:
                    pace.delivered()
                return
    finally:
        if pace is not None and turn:
            pace.give_back()


def _failed(exc: Exception, code: str) -> TargetFailed:
    if isinstance(exc, TargetFailed):
        return TargetFailed(exc.error, exc.cause)
    return TargetFailed(code or type(exc).__name__, str(exc))


def _unknown(exc: Exception, code: str) -> OutcomeUnknown:
    cause = exc.cause if isinstance(exc, TargetFailed) else str(exc)
    return OutcomeUnknown(code or type(exc).__name__, cause)


def record(
    table: str,
    message_id: str,
    me: str,
    status: Status,
    at: str | None = None,
    error: str | None = None,
    stop_by: float | None = None,
    expires_at: int | None = None,
) -> str:
    """A delivered message's final status (DONE fired `at`, or FAILED or UNKNOWN with
    `error`), the message leaving the status index (expiring at `expires_at`, the
    record's retention: scheduler_store.expiry): written until it lands while the
    claim is still `me`'s (`status`); "TAKEN_OVER" if it no longer is (this claimant
    outlived its lease and another took the message over: the final write is the one that
    delivers it last); "UNRECORDED" if it never landed (about two minutes of trying, or
    until `stop_by`)."""
    for attempt in range(RECORD_ATTEMPTS):
        try:
            ddb = _client("dynamodb")
            old = scheduler_store.finish(ddb, table, message_id, me, status, at, error, expires_at)
            if old is None:
                return status
            if (
                old.get("claimed_by", {}).get("S") == me
                and old.get("status", {}).get("S") in OUTCOMES
            ):
                return status  # an earlier send of this write landed, its answer lost
            log("WARNING", "claim taken over before its status", message_id=message_id)
            return "TAKEN_OVER"
        except Exception as exc:
            log("WARNING", "status not written yet", message_id=message_id, exc=exc)
        pause = min(30.0, 2.0**attempt) * random.random()
        if stop_by is not None and time.time() + pause >= stop_by:
            break  # the invocation ends soon: say so (StatusNotRecorded), not a timeout
        time.sleep(pause)
    return "UNRECORDED"


def release(table: str, message_id: str, me: str, token: str | None = None) -> str:
    """FIRING -> STANDBY, a claim of `me`'s whose last send was never made (out of time, or
    the invocation failing; `token`, its count, dropped): the slot's retry, the stream or
    the sweep fires it, and finds any send this claimant did make counted. Never undoes
    another's claim; a release that fails leaves the claim to end with its lease."""
    try:
        scheduler_store.release(_client("dynamodb"), table, message_id, me, token)
    except Exception as exc:  # (one no longer ours: False, nothing to do)
        log("WARNING", "claim not released", message_id=message_id, exc=exc)
    return "RELEASED"


# A renewal is answered within seconds or given up for the next turn: one hung call must
# not spend a lease's slack (LEASE_SECONDS - RENEW_SECONDS) on its own.
RENEW_READ_SECONDS, RENEW_SENDS = 10, 2


@functools.cache
def _renewals() -> Any:
    """The keeper's DynamoDB client: short timeouts, two sends at most."""
    import boto3
    from botocore.config import Config

    config = Config(
        max_pool_connections=THREADS,
        connect_timeout=RENEW_READ_SECONDS,
        read_timeout=RENEW_READ_SECONDS,
        retries={"total_max_attempts": RENEW_SENDS, "mode": "standard"},
    )
    with _BUILDING:
        return boto3.client("dynamodb", config=config)


def renew(table: str, message_id: str, me: str, lease: float) -> bool | None:
    """`me`'s claim held until `lease`: True, False if it is no longer `me`'s, None if the
    renewal failed (tried again at the next turn, the lease not yet ended)."""
    try:
        return scheduler_store.renew(_renewals(), table, message_id, me, lease)
    except Exception as exc:
        log("WARNING", "lease not renewed", message_id=message_id, exc=exc)
        return None


class Keeper:
    """Holds an invocation's claims while it has their messages in hand: each claim's lease
    is LEASE_SECONDS ahead (never past the invocation's `end`), renewed every RENEW_SECONDS
    on a thread of its own (`run`, started by `beside`), side by side, each from its own
    time; one waiting for its send (claimed and not yet sent, or `unsent`) is renewed
    WAIT_LEASE_SECONDS ahead, and only once its lease ends within LEASE_SECONDS. The thread
    dies with its sandbox (Lambda resets an environment whose invocation timed out or
    crashed), so a claimant that dies stops renewing: its claims end a minute later at
    most, three for one waiting. A sender asks `held_until` before every
    send (`Sending.held`), which marks the claim sending (`sending`)."""

    def __init__(self, table: str, me: str, end: float) -> None:
        self.table, self.me, self.end = table, me, end
        self._held: dict[str, float] = {}  # message id -> its lease, as last written
        self._lost: set[str] = set()  # no longer this claimant's
        # a send under way, or made (renewed by `run` every turn), until when (`sending`)
        self._sending: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def lease(self, seconds: float | None = None) -> float:
        """A lease `seconds` ahead (LEASE_SECONDS, read when called), never past the end."""
        return min(self.end, time.time() + (LEASE_SECONDS if seconds is None else seconds))

    def hold(self, message_id: str, lease: float) -> None:
        with self._lock:
            self._held[message_id] = lease
            self._lost.discard(message_id)

    def drop(self, message_id: str) -> None:
        with self._lock:
            self._held.pop(message_id, None)
            self._sending.pop(message_id, None)

    def sending(self, message_id: str, until: float = math.inf) -> None:
        """A send of it is about to be made: renewed every turn from now on, until dropped
        (or `unsent`), or until `until` (then it waits as one not sent)."""
        with self._lock:
            self._sending[message_id] = until

    def unsent(self, message_id: str) -> None:
        """Its every send so far was refused unrun (a throttle): nothing of it can be under
        way at its target while it waits for its next turn, so its lease is renewed
        WAIT_LEASE_SECONDS ahead, and seldom."""
        with self._lock:
            self._sending.pop(message_id, None)

    def _due(self) -> list[tuple[str, float]]:
        """This turn's renewals, each with its lease's length: every claim sending first, then
        each waiting one whose lease ends within LEASE_SECONDS (so a waiting claim, too, has
        at least LEASE_SECONDS - RENEW_SECONDS left at every turn; a claim waits from its
        claim until its first send: one sent soon after, as nearly all are, is never
        renewed). A waiting claim's lease is drawn from the last third of
        WAIT_LEASE_SECONDS: a burst's claims, made together, are renewed apart after that."""
        now = time.time()
        soon = now + LEASE_SECONDS
        with self._lock:
            sending = [m for m in sorted(self._held) if self._sending.get(m, 0) > now]
            waiting = [
                m
                for m, lease in sorted(self._held.items())
                if m not in sending and lease < soon and lease < self.end
            ]
        wait = WAIT_LEASE_SECONDS
        return [(m, LEASE_SECONDS) for m in sending] + [
            (m, random.uniform(wait * 2 / 3, wait)) for m in waiting
        ]

    def held_until(self, message_id: str) -> float | None:
        """When the claim's lease ends, as last written (None: it is another's now)."""
        with self._lock:
            if message_id in self._lost:
                return None
            return self._held.get(message_id, math.inf)  # (not held here: not ours to say)

    def stop(self) -> None:
        self._stopped.set()

    def run(self, pause: Callable[[float], object] | None = None) -> None:
        """Renew until stopped, `pause` (by default: until stopped, or RENEW_SECONDS) between
        turns. (A thread frozen with its invocation finds itself stopped when it thaws.)"""
        pause = pause or self._stopped.wait
        with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
            while True:
                pause(RENEW_SECONDS)
                if self._stopped.is_set():
                    return
                list(pool.map(lambda due: self._renew(*due), self._due()))

    def _renew(self, message_id: str, seconds: float | None = None) -> None:
        lease = self.lease(seconds)
        if self._stopped.is_set():
            return
        renewed = renew(self.table, message_id, self.me, lease)
        with self._lock:
            if renewed and message_id in self._held:
                self._held[message_id] = lease
            elif renewed is False:
                self._held.pop(message_id, None)
                self._lost.add(message_id)


def beside(run: Callable[[], None]) -> None:
    """`run` on a thread of its own, which never keeps the invocation (or a test) alive."""
    threading.Thread(target=run, name="lease-keeper", daemon=True).start()


def fire_one(
    table: str,
    item: dict[str, Any],
    recorder: concurrent.futures.Executor,
    me: str,
    deadline: float | None = None,
    handled: set[str] | None = None,
    keeper: Keeper | None = None,
    fired: dict[str, float] | None = None,
    pace: Pace | None = None,
) -> concurrent.futures.Future[str]:
    """Sleep to the message's publish time, deliver it, and have `recorder` write DONE,
    FAILED (with the target's error, as Step Functions words a Task's) or UNKNOWN (sent,
    its outcome unseen, not resent): its outcome, TAKEN_OVER or UNRECORDED; RELEASED if
    its last send was never made (past `deadline`). The write does not hold up the next
    delivery (a burst's status writes may meet the table's throughput). `handled`
    collects the messages it took in hand; `fired`, when each one delivered was; its sends
    take turns at `pace`, its target's (`deliver`)."""
    message_id = item["id"]["S"]
    stop_by = deadline + RECORD_MARGIN_SECONDS if deadline is not None else None
    while (left := float(item["publish_at"]["N"]) - time.time()) > 0:
        time.sleep(left)  # by the wall clock, re-checked: a sleep may end early
    if handled is not None:
        handled.add(message_id)
    target = item["target_arn"]["S"]
    redeliver = item.get("redeliver", {}).get("BOOL", False)
    sending = Sending.of(table, item, me, resend_policy(kind_of(target), redeliver))
    sending.keeper = keeper
    sending.keep_near()
    if deadline is not None and time.time() >= deadline:
        return recorder.submit(release, table, message_id, me, sending.token())
    ended: TargetFailed | OutcomeUnknown
    try:
        deliver(target, delivery_of(item), deadline=deadline, sending=sending, pace=pace)
    except OutOfTime:
        return recorder.submit(release, table, message_id, me, sending.token())
    except TakenOver:
        return _answered("TAKEN_OVER")
    except (TargetFailed, OutcomeUnknown) as exc:
        ended = exc
    else:
        now = time.time()
        if fired is not None:
            fired[message_id] = now
        at, expires = timestamps.iso_ms(now), scheduler_store.expiry(item, now)
        return recorder.submit(
            record, table, message_id, me, Status.DONE, at, None, stop_by, expires
        )
    status = Status.FAILED if isinstance(ended, TargetFailed) else Status.UNKNOWN
    cause = json.dumps({"Error": ended.error, "Cause": ended.cause})
    expires = scheduler_store.expiry(item, time.time())
    return recorder.submit(record, table, message_id, me, status, None, cause, stop_by, expires)


def _answered(outcome: str) -> concurrent.futures.Future[str]:
    future: concurrent.futures.Future[str] = concurrent.futures.Future()
    future.set_result(outcome)
    return future


# -- the slot ----------------------------------------------------------------------------
Invoke = Callable[[dict[str, Any]], dict[str, Any]]


def fire(
    table: str,
    slot: int,
    me: str,
    shard: int = 0,
    of: int = 1,
    invoke: Invoke | None = None,
    retried: bool = False,
    deadline: float | None = None,
    lease: float | None = None,
    only: list[str] | None = None,
) -> dict[str, Any]:
    """Fire the slot's messages of this shard (shard 0 of 1: the whole slot, fanned out to
    `invoke`d workers past CHUNK messages, each handed its share of the ids read, while this
    invocation reads again once the second is over); counts by outcome (DONE,
    FAILED, UNRECORDED, NOT_CLAIMED: a claim that kept failing, skipped: cancelled, or
    claimed by another). `me`: this attempt (`claimant`); its claims are held a minute at
    a time (`Keeper`), never past `lease`, this invocation's end. `retried`: a later
    attempt of the slot's Fire, or a restart of a slot that failed: it also reads the
    FIRING lanes 0.4 left, and waits (within its own time) for an earlier attempt's live
    leases to end. Any attempt takes up a FIRING message it reads (FIRING is listed in the
    STANDBY lanes) whose claimant's lease ended, under the same send budget and resend
    rule as a retry's takeover. `deadline`:
    until when a throttled delivery may be retried. `only`: these messages, claimed by
    their keys (no index read: a slot of one, whose message the index cannot miss; or a
    worker's share, its slot reading again)."""
    lease = lease if lease is not None else time.time() + SLOT_SECONDS
    keeper = Keeper(table, me, lease)
    statuses = (Status.STANDBY, Status.FIRING) if retried else (Status.STANDBY,)
    ids = list(only) if only is not None else members(table, slot, statuses, shard, of)
    fans_out = invoke is not None and len(ids) > CHUNK
    counts: collections.Counter[str] = collections.Counter()  # this invocation's own
    shared: collections.Counter[str] = collections.Counter()  # its workers'
    unrecorded_by: list[str] = []  # claimants whose deliveries' statuses did not land
    failed: list[BaseException] = []  # its workers' failures
    held: dict[str, float] = {}  # held by another claimant's live lease: until when
    seen: set[str] = set()
    taken: set[str] = set()
    refused: set[str] = set()  # claims that kept failing (or made past the deadline)
    handled: set[str] = set()  # claimed, and taken in hand (sent, or released)
    in_hand: set[str] = set()  # being claimed, or claimed, by a read of this invocation
    fired: dict[str, float] = {}  # delivered: when
    lateness: list[float] = []  # of each message recorded DONE, ms (`emit_metrics`)
    late = 0  # of those, registered after their time (late on arrival)
    books = threading.Lock()  # (the two reads fire side by side)
    # a thread per message of each read (a worker's share, past THREADS): the second read's
    # never wait for the first's
    fired_here = 0 if fans_out else len(ids)
    threads = 2 * max(THREADS, min(fired_here, WORKER_SHARE))
    pool = concurrent.futures.ThreadPoolExecutor(threads)
    paces: dict[str, Pace] = {}  # its deliveries' turns, by `scheduler_pace.key` of a target
    recorder = concurrent.futures.ThreadPoolExecutor(THREADS)

    def fire_these(ids: list[str]) -> None:
        with books:  # what the other read has in hand is its own, claimed or not yet
            ids = [i for i in ids if i not in in_hand]
            in_hand.update(ids)
            seen.update(ids)

        def fire_held(item: dict[str, Any]) -> concurrent.futures.Future[str]:
            where = scheduler_pace.key(item["target_arn"]["S"])
            with books:  # (one Pace a target, made once)
                pace = paces.get(where) or paces.setdefault(where, Pace(threads))
            future = fire_one(table, item, recorder, me, deadline, handled, keeper, fired, pace)
            message_id: str = item["id"]["S"]

            def done(ended: concurrent.futures.Future[str]) -> None:
                # (one delivered whose status never landed stays held to the invocation's
                # end: it is never delivered again, and the sweep marks it)
                if ended.exception() is not None or ended.result() != "UNRECORDED":
                    keeper.drop(message_id)

            future.add_done_callback(done)
            return future

        def claim_and_fire(
            message_id: str,
        ) -> tuple[dict[str, Any], concurrent.futures.Future[str]] | None:
            # Each message claimed, then fired, on its own thread: the earliest are
            # delivered while later ones are still being claimed (a burst's claims may take
            # longer than the lead, at a new table's write rate). Held from the moment the
            # claim lands, its lease as written.
            answer = claim_once(table, message_id, me, keeper.lease, deadline)
            if not isinstance(answer, Exception) and answer.item is not None:
                keeper.hold(message_id, float(answer.item["lease"]["N"]))
            with books:
                if isinstance(answer, Exception):
                    refused.add(message_id)
                    in_hand.discard(message_id)  # (a later read may try again)
                    return None
                refused.discard(message_id)  # a definite answer, after an earlier read's error
                if answer.item is None:
                    if answer.held_until is not None:
                        held[message_id] = answer.held_until
                    in_hand.discard(message_id)  # (not ours: a later read may try again)
                    return None
                held.pop(message_id, None)
                taken.add(message_id)
            return answer.item, fire_held(answer.item)

        # (submitted by publish time: a worker's share past its threads queues latest last)
        firing = [pool.submit(claim_and_fire, message_id) for message_id in ids]
        failure: BaseException | None = None
        nonlocal late
        for sent in firing:  # every outcome counted, a failed one's beside the others
            try:
                fired_one = sent.result()
                if fired_one is None:
                    continue
                item, recorded = fired_one
                outcome = recorded.result()
            except Exception as exc:
                failure = failure or exc
                continue
            with books:
                counts[outcome] += 1
                if outcome == "UNRECORDED" and me not in unrecorded_by:
                    unrecorded_by.append(me)
                if outcome == Status.DONE:
                    publish_at = float(item["publish_at"]["N"])
                    lateness.append(round((fired[item["id"]["S"]] - publish_at) * 1000))
                    late += "late_on_arrival" in item
        if failure is not None:
            raise failure

    def fan_out(ids: list[str]) -> None:
        assert invoke is not None
        answers, by, failures = _fan_out(slot, me, ids, invoke, retried, lease)
        with books:
            shared.update(answers)
            unrecorded_by.extend(by)
            failed.extend(failures)

    beside(keeper.run)
    try:
        # the pool stops first: a delivery still running hands its status to the recorder
        with recorder, pool:
            if only is not None:
                fire_these(ids)
            else:
                # The index may have missed a message the first read (it lags behind the
                # table: DynamoDB developer guide, "Read consistency for global secondary
                # indexes"). Read again once the second is over, the index having had the
                # whole second to catch up (a message missed twice waits for the sweep),
                # beside the first read's deliveries: a slow target of the first read
                # never holds up what the second finds.
                with concurrent.futures.ThreadPoolExecutor(1, FIRST_READ) as reader:
                    if fans_out:
                        with books:  # the workers' own: the second read leaves them be
                            in_hand.update(ids)
                        first = reader.submit(fan_out, ids)
                    else:
                        first = reader.submit(fire_these, ids)
                    again = slot + 1
                    if deadline is None or again < deadline:
                        time.sleep(max(0.0, again - time.time()))
                    fire_these(members(table, slot, statuses, shard, of))
                    first.result()
                if failed:  # (its retry takes up what they left)
                    raise failed[0]
            if retried and held:
                # An earlier attempt of this slot still holds these, and delivers them while
                # it runs; should it die first, they stay FIRING until its lease (and the
                # clocks' skew) ends: take them up then, if this invocation has the time.
                until = max(held.values()) + LEASE_SKEW_SECONDS
                if until < (deadline if deadline is not None else lease) - HOLD_MARGIN_SECONDS:
                    time.sleep(max(0.0, until - time.time()) + 1)
                    fire_these(sorted(held))
    except Exception as exc:
        # never retried as a plain failure: they were delivered (a worker's own failure
        # that says so, beside them)
        said = [str(f) for f in failed if isinstance(f, StatusNotRecorded)]
        if unrecorded_by:
            said.insert(0, unrecorded(counts["UNRECORDED"] + shared["UNRECORDED"], unrecorded_by))
        if said:
            raise StatusNotRecorded(" ".join(said)) from exc
        raise
    finally:
        keeper.stop()  # (every message recorded, released, or given back below)
        # what this invocation ended, even when it fails now: no retry ends those again
        emit_metrics(slot, counts, lateness, late)
        # An invocation failing between its claims and their sends gives back the rest
        # (after every thread has stopped: none of them is sending); so does a claim whose
        # every answer was lost (it may have landed: `release` is ours only if it did).
        for message_id in sorted(taken - handled):
            release(table, message_id, me, send_token(me, 0))
        for message_id in sorted(refused - taken):
            release(table, message_id, me, send_token(me, 0))
    counts["skipped"] = len(seen - taken - refused)  # cancelled, ended, or another's
    if refused - taken:
        counts["NOT_CLAIMED"] = len(refused - taken)
    if counts["NOT_CLAIMED"]:
        log("WARNING", "claims failed: the slot's retry takes them up", slot=slot)
    log("INFO", "slot fired", slot=slot, shard=shard, of=of, **counts)
    counts.update(shared)  # (each worker logged and emitted its own)
    if unrecorded_by:  # who: StatusNotRecorded names them, for the sweep
        return {**counts, "unrecorded_by": unrecorded_by}
    return dict(counts)


def emit_metrics(
    slot: int, counts: collections.Counter[str], lateness: list[float], late: int
) -> None:
    """This invocation's Fired, Late, LatenessMs (one datum per message recorded DONE: when
    it was delivered minus its publish time), Failed and Unknown: a line for the slot
    (MAX_VALUES latenesses a line), not one per message (and no stream record read for
    it: the table's final images are filtered out of the starter's)."""
    first = lateness[: metrics.MAX_VALUES]
    metrics.emit(
        PATTERN,
        {"slot": slot},
        Fired=counts[Status.DONE],
        Late=late,
        Failed=counts[Status.FAILED],
        Unknown=counts[Status.UNKNOWN],
        **({"LatenessMs": first} if first else {}),
    )
    for at in range(metrics.MAX_VALUES, len(lateness), metrics.MAX_VALUES):
        metrics.emit(PATTERN, {"slot": slot}, LatenessMs=lateness[at : at + metrics.MAX_VALUES])


def _fan_out(
    slot: int, me: str, ids: list[str], invoke: Invoke, retried: bool, lease: float
) -> tuple[collections.Counter[str], list[str], list[BaseException]]:
    """Hand each worker its share of `ids` (every `workers`-th by publish time: each
    share spread over the second, claimed in its order), WORKER_LEAD_SECONDS before the
    second (earlier for claims a new table writes in longer), synchronously (a worker's
    failure fails the slot, whose retry takes up what was left). A worker claims as `me`
    too, holding its claims no longer than this invocation lives (`until`): its function's
    timeout is shorter than this one's, so it is dead by the time a retry of this attempt
    can run. Their counts, who left deliveries unrecorded, and their failures (each
    worker's answer kept beside another's failure)."""
    workers = min(MAX_WORKERS, math.ceil(len(ids) / WORKER_SHARE))
    counts: collections.Counter[str] = collections.Counter()
    unrecorded_by: list[str] = []
    failures: list[BaseException] = []
    event = {"slot": slot, "claimant": me, "of": workers, "retry": int(retried), "until": lease}
    lead = max(WORKER_LEAD_SECONDS, len(ids) / NEW_TABLE_WRITES)
    time.sleep(max(0.0, slot - lead - time.time()))
    with concurrent.futures.ThreadPoolExecutor(workers, WORKERS) as pool:
        shares = [
            pool.submit(invoke, {**event, "shard": shard, "ids": ids[shard::workers]})
            for shard in range(workers)
        ]
        for share in shares:
            try:
                result = share.result()
            except Exception as exc:
                failures.append(exc)
                continue
            unrecorded_by += result.pop("unrecorded_by", [])
            counts.update(result)
    return counts, unrecorded_by, failures


def warm_up(table: str, slot: int, invoke: Invoke | None) -> dict[str, Any]:
    """A warm-up execution's Fire (WARM_LEAD_SECONDS): read the slot as it will be read,
    and ping each worker it will fan out to, side by side; claims nothing. A failure is
    logged, never raised (nor retried): the slot fires all the same, colder."""
    try:
        found = len(members(table, slot, (Status.STANDBY,)))
        workers = min(MAX_WORKERS, math.ceil(found / WORKER_SHARE)) if found > CHUNK else 0
        if time.time() > slot - PINGS_BY_SECONDS:
            log("WARNING", "warm-up too late: nothing pinged", slot=slot)
            return {"warmed": 0}
        if workers and invoke is not None:
            with concurrent.futures.ThreadPoolExecutor(workers, WORKERS) as pool:
                list(pool.map(lambda _: invoke({"ping": True}), range(workers)))
    except Exception as exc:
        log("WARNING", "warm-up failed: the slot fires all the same", slot=slot, exc=exc)
        return {"warmed": 0}
    log("INFO", "slot warmed", slot=slot, messages=found, workers=workers)
    return {"warmed": workers}


def unrecorded(count: int, claimants: list[str]) -> str:
    """StatusNotRecorded's message: it names the claimants whose deliveries happened (the
    sweep reads it in the execution's cause, and leaves their claims be)."""
    return f"{count} delivered messages are still FIRING, claimed by {' '.join(claimants)}"


def _invoker(function_arn: str) -> Invoke:
    def invoke(event: dict[str, Any]) -> dict[str, Any]:
        answer = _client("lambda").invoke(FunctionName=function_arn, Payload=json.dumps(event))
        payload = json.loads(answer["Payload"].read() or b"{}")
        if answer.get("FunctionError"):
            if payload.get("errorType") == "StatusNotRecorded":  # names its claimant
                raise StatusNotRecorded(str(payload.get("errorMessage", "")))
            worker = f"{event.get('shard')}/{event.get('of')}" if "shard" in event else "ping"
            raise RuntimeError(f"slot worker {worker} failed: {payload}")
        counts = {k: v for k, v in payload.items() if isinstance(v, int)}
        return {**counts, "unrecorded_by": [str(c) for c in payload.get("unrecorded_by", [])]}

    return invoke


@lambda_handler
def handler(event: Any, context: Any) -> dict[str, Any]:
    """The state machine invokes it with {input: the execution's (`slot_input`), execution,
    retry} (a 0.4 slot's definition: {slot, execution, retry}); the slot invokes a worker
    with {slot, claimant, shard, of, retry, until, ids} (its share); a warm-up execution's
    input says `warm` (`warm_up`), and its pings are {ping}. Each invocation claims
    as itself (its
    request id in `claimant`): a second invocation of one attempt, should one ever run,
    never finds the first's claims its own."""
    settings = SlotSettings.current()
    clients()  # once per cold start, before any thread needs one
    if event.get("ping"):  # a warm-up's (`warm_up`): this environment, started and held
        time.sleep(PING_HOLD_SECONDS)
        return {"pinged": 1}
    table = settings.table
    shard, of = int(event.get("shard", 0)), int(event.get("of", 1))
    # (a worker, invoked with its slot's claimant, never fans out again, and answers its
    # counts to its slot, which decides what they mean)
    worker = "claimant" in event
    fans_out = not worker and settings.workers_function
    invoke = _invoker(settings.workers_function) if fans_out else None
    attempt = int(event.get("retry", 0))
    given = event.get("input", event)
    slot = int(given["slot"])
    if given.get("warm"):
        return warm_up(table, slot, invoke)
    # a slot of one, its message; a worker, its share (one invoked by an earlier release's
    # slot has none: it reads its shard of the lanes)
    only = [str(given["message"])] if given.get("message") else event.get("ids")
    invocation = str(getattr(context, "aws_request_id", "") or "")
    if "claimant" in event:  # a worker: its slot's attempt, and this invocation
        retried = bool(event.get("retry"))
        me = f"{event['claimant']}#{invocation}"
    else:
        execution = str(event["execution"])
        retried = attempt > 0 or is_restart(execution)
        me = claimant(execution, attempt, invocation)
    # Claims are held until this invocation ends (a worker's: no later than its slot's);
    # throttled deliveries are retried until a minute before.
    remaining = context.get_remaining_time_in_millis() / 1000 if context else SLOT_SECONDS
    lease = time.time() + remaining
    if "until" in event:
        lease = min(lease, float(event["until"]))
    counts = fire(table, slot, me, shard, of, invoke, retried, lease - 60, lease, only)
    if not worker and counts.get("UNRECORDED"):  # after every delivery, never before
        raise StatusNotRecorded(unrecorded(counts["UNRECORDED"], counts["unrecorded_by"]))
    if not worker and (counts.get("NOT_CLAIMED") or counts.get("RELEASED")):
        # the Fire's retry takes them up
        left = counts.get("NOT_CLAIMED", 0) + counts.get("RELEASED", 0)
        raise ClaimsFailed(f"{left} messages could not be claimed or sent in time")
    return counts


class ClaimsFailed(Exception):
    """Some of the slot's messages could not be claimed (the table refusing for longer
    than the claims' retries): retried by the slot's state machine, which takes them up
    (they are STANDBY, or FIRING under a lease that ends)."""
