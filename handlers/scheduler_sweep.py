"""Pattern 3's sweep: each period, the messages the stream and the slots left behind.

RESERVED messages due within the window go to STANDBY (the stream starts them); STANDBY
ones due in the window whose start never happened (a DLQ'd stream batch, a mapping not yet
polling) start now, under the same name (a duplicate if started); the slot of an overdue
STANDBY one gets its next attempt, one per slot (`scheduler_slots.retry_key`); a FIRING
one whose claimant died gets a restart of its slot; one delivered and never recorded is
left FIRING and reported Overdue.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Container, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from exactly_once.handlers import metrics, scheduler_store
from exactly_once.handlers import scheduler_slots as slots
from exactly_once.handlers.errors import ClientError, aws_code
from exactly_once.handlers.executions import ReusePolicy, execution_arn, start_once
from exactly_once.handlers.runtime import client, lambda_handler, log, request_id
from exactly_once.handlers.scheduler import (
    PATTERN,
    SchedulerSettings,
    read_item,
    start,
    transition,
)
from exactly_once.handlers.scheduler_index import LANES, Status, due, lanes

# A STANDBY message this long past its time was not fired by its execution: that failed
# (claims that kept failing), was stopped, or gave the claim back unsent (a target that
# throttled past its deadline), so the sweep starts its slot's next attempt
# (`scheduler_slots.retry_key`). Until then the execution may still be claiming it.
OVERDUE_SECONDS = 60
# A FIRING message without a lease was claimed by 0.4's waiting machine (every claim since
# holds a lease): normally DONE or FAILED within its target's timeout (Lambda's is at most
# 15 minutes) plus the status write's retries (about 5 minutes, 0.4's).
STUCK_FIRING_SECONDS = 20 * 60
# An execution that has not ended: running, or redriven and about to run again.
LIVE = ("RUNNING", "PENDING_REDRIVE")


T = TypeVar("T")

# Every lane on its own thread: a run takes up the window's messages (65 minutes of them by
# default: 39,000 at 10 a second) side by side, earliest first in each lane, not one after
# another past its timeout (runtime.client pools enough connections for them).
THREADS = LANES
# The sweep's starts, at most this many a second: StartExecution's bucket (300 a second
# in the largest Regions, 150 elsewhere) is the account's, shared with the API and the
# stream starter. A run starts each second's slot once (3,900 at most in the default
# window: 78 s), and a message too near its second for the slot on its own.
STARTS_PER_SECOND = 50
# Stop taking up messages this long before the invocation's end: the metric and the log
# line still go out.
MARGIN_SECONDS = 30


class Unfinished(Exception):
    """A run that left messages: its time ran out, or calls kept failing (a throttle past
    the SDK's retries). What it did stands (moved messages are STANDBY, started ones
    started); it fails so that Lambda retries it (twice, from the top) and the
    sweep-failed alarm says so."""


_COUNT = threading.Lock()


@dataclasses.dataclass
class _Pass:
    """One run's passes: each status's messages due by `horizon`, each lane on a thread,
    each message handed to `work` (its id and publish time) until `stop_at`; a message
    whose work fails is left for the next run (counted, logged), never the end of the
    others'. `_COUNT` is held for no call: nothing waits on another lane's AWS call."""

    config: SchedulerSettings
    stop_at: float | None
    unfinished: bool = False
    failed: int = 0
    next_start: float = 0.0

    def pace(self) -> None:
        """Wait for this run's next start (STARTS_PER_SECOND)."""
        with _COUNT:
            at = max(time.time(), self.next_start)
            self.next_start = at + 1 / STARTS_PER_SECOND
        time.sleep(max(0.0, at - time.time()))

    def out_of_time(self) -> bool:
        if self.stop_at is not None and time.time() >= self.stop_at:
            self.unfinished = True
        return self.unfinished

    def each(
        self, status: Status, horizon: float, work: Callable[[str, float], T]
    ) -> list[tuple[str, T]]:
        def lane_work(status_lane: str) -> list[tuple[str, T]]:
            done = []
            for message_id, publish_at in due(
                client("dynamodb"), self.config.table, status_lane, horizon
            ):
                if self.out_of_time():
                    break
                try:
                    done.append((message_id, work(message_id, publish_at)))
                except Exception as exc:
                    log("WARNING", "sweep: left", message_id=message_id, exc=exc)
                    with _COUNT:  # (from the lanes' threads)
                        self.failed += 1
            return done

        with ThreadPoolExecutor(THREADS) as pool:
            return [each for share in pool.map(lane_work, lanes(status)) for each in share]


def sweep(
    config: SchedulerSettings, now: float | None = None, context: Any = None
) -> dict[str, int]:
    """Move the due RESERVED messages to STANDBY (the stream starts those: nobody but the
    sweep moves them, so first); start the STANDBY messages due in the window that have no
    execution yet (their execution is named by the id, so one already started is a cheap
    duplicate), and the next attempt of the slot of overdue ones (`_firing`, with the
    restarts of dead claimants' slots). Raises Unfinished
    when it left messages (its time ran out, or calls kept failing), after reporting."""
    now = time.time() if now is None else now
    horizon = now + config.window_seconds
    client("dynamodb"), client("stepfunctions")  # built once, before any thread needs one
    remaining = context.get_remaining_time_in_millis() / 1000 if context else None
    run = _Pass(config, None if remaining is None else time.time() + remaining - MARGIN_SECONDS)

    def move(message_id: str, publish_at: float) -> tuple[bool, bool]:
        # (moved, overdue): one moved past its time is one the sweep fell behind on
        moved = transition(config, message_id, (Status.RESERVED,), Status.STANDBY)
        return moved, moved and publish_at < time.time()

    reserved = run.each(Status.RESERVED, horizon, move)
    moved_ids = {message_id for message_id, (moved, _) in reserved if moved}
    restarts: set[int] = set()  # slots to restart (`_firing`; added to from the threads)
    retries: set[int] = set()  # slots of overdue STANDBY messages: their next attempt
    # overdue messages read here STANDBY: the FIRING pass, reading the same lanes
    # (scheduler_index), leaves them be
    standby_read: set[str] = set()
    joiners: dict[int, list[tuple[str, float]]] = {}  # second -> its messages that may join

    def start_standby(message_id: str, publish_at: float) -> tuple[bool, bool]:
        # (started, overdue)
        if message_id in moved_ids:
            return False, False  # just moved: the stream starts it
        if publish_at >= now - OVERDUE_SECONDS:
            # Not overdue: started as the stream starts it, from the index's keys, unread
            # (a stale entry of a message since claimed starts what a stale stream record
            # would: a duplicate, or a slot of one whose claim finds it taken). One that
            # may join its second's slot waits for `_start_slots`: a slot started once.
            # One due about now may be FIRING, listed in its STANDBY lane (scheduler_index):
            # read first, so that a claimed message starts no slot of one to find it taken,
            # nor one claimed and given back (`start`: its claimant's retry's).
            keys = _keys(message_id, publish_at)
            if publish_at <= now + slots.LEAD_SECONDS + slots.LEASE_SKEW_SECONDS:
                image = read_item(config, message_id)
                if not image or image["status"]["S"] != Status.STANDBY:
                    return False, False
                keys = image
            slot = slots.slot_of(publish_at)
            if config.join_slots and time.time() < slots.join_by(slot):
                with _COUNT:
                    joiners.setdefault(slot, []).append((message_id, publish_at))
                return False, False
            run.pace()
            return start(config, keys, context).status == "STARTED", False
        image = read_item(config, message_id)
        if not image or image["status"]["S"] != Status.STANDBY:
            return False, False
        publish_at = float(image["publish_at"]["N"])
        with _COUNT:  # (from the lanes' threads)
            standby_read.add(message_id)
            if publish_at < now - OVERDUE_SECONDS:
                # STANDBY: never claimed, or given back by a claimant (its sends counted:
                # the next claim decides whether they may be followed). Its slot's next
                # attempt takes up every such message of its second, once the FIRING pass
                # has looked at each of that second's and marked what must never be taken
                # over (`_firing`).
                retries.add(slots.slot_of(publish_at))
                return False, True
        run.pace()
        return start(config, image, context).status == "STARTED", False

    standby = run.each(Status.STANDBY, horizon, start_standby)
    joined = _start_slots(config, run, joiners, context)
    restarted_slots, stuck = _firing(config, now, context, restarts, run, standby_read, retries)
    result = {
        "read": len(reserved),
        "moved": len(moved_ids),
        "standby": sum(message_id not in moved_ids for message_id, _ in standby),
        "restarted": sum(started for _, (started, _) in standby) + joined + restarted_slots,
        "overdue": sum(late for _, (_, late) in reserved + standby) + stuck,
        "unfinished": int(run.unfinished),
        "failed": run.failed,
    }
    left = run.unfinished or run.failed > 0
    log(
        "ERROR" if left else "INFO",
        "sweep",
        window_seconds=config.window_seconds,
        **result,
    )
    # Every sweep reports, 0 included: the Overdue alarm sees a datum each period.
    metrics.emit(PATTERN, Overdue=result["overdue"])
    if left:
        raise Unfinished(f"sweep left messages: {result}")
    return result


def _keys(message_id: str, publish_at: float) -> dict[str, Any]:
    """What `start` reads of a message, from the index's keys."""
    return {"id": {"S": message_id}, "publish_at": {"N": f"{publish_at:.3f}"}}


def _start_slots(
    config: SchedulerSettings,
    run: _Pass,
    joiners: dict[int, list[tuple[str, float]]],
    context: Any,
) -> int:
    """Each second's slot started once, earliest first, through its first message's
    `start`: should that start the message on its own instead (the slot's cutoff came,
    or the start straddled it), each of the others is started so too. Executions started."""
    started = 0
    for slot in sorted(joiners):
        for message_id, publish_at in joiners[slot]:
            if run.out_of_time():
                return started
            run.pace()
            try:
                outcome = start(config, _keys(message_id, publish_at), context)
            except Exception as exc:
                log("WARNING", "sweep: left", message_id=message_id, exc=exc)
                run.failed += 1
                continue
            started += outcome.status == "STARTED"
            if outcome.name == slots.slot_name(slot):
                break  # the slot, started or found started, fires the others
    return started


def _due(config: SchedulerSettings, status: Status, horizon: float) -> Iterator[tuple[str, float]]:
    """(id, publish time) of `status` messages due by `horizon`, every lane, every page, one
    after another."""
    for status_lane in lanes(status):
        yield from due(client("dynamodb"), config.table, status_lane, horizon)


def _firing(
    config: SchedulerSettings,
    now: float,
    context: Any,
    restarts: set[int],
    run: _Pass,
    standby: Container[str],
    retries: set[int],
) -> tuple[int, int]:
    """FIRING messages past their time: (slot restarts started, overdue). A slot's claim
    whose lease ended (its claimant stopped renewing it: it died) is taken up by
    a restart of its slot, one per sweep that finds it (`scheduler_slots.restart_name`:
    a restart whose index read missed it is followed by the next sweep's): at least once
    to the target, with the id, as any retried delivery. Not while the claimant's execution
    runs (its Fire's retry takes it up); nor when it failed StatusNotRecorded naming that
    claimant: it delivered the message and could not write so (a restart would deliver it
    again): that one is marked `unrecorded` and stays overdue, for the alarm. One with no
    lease (claimed by 0.4's waiting machine) is counted once it has been FIRING too long.
    `restarts`: slots to restart besides; `standby`: messages this run read STANDBY (listed
    in the same lanes as FIRING ones: not read again); `retries`: slots of overdue STANDBY
    messages, each given its next attempt (`scheduler_slots.retry_key`; not while the
    slot's own execution runs: its Fire's retry takes them up): started here, not as they
    are read, because that attempt, a restart, also takes up its second's FIRING messages
    whose leases ended."""
    restarted = overdue = 0
    ends: dict[str, tuple[str, str]] = {}

    def ended(execution: str) -> tuple[str, str]:
        """`_end_of` an execution, read once per run (a slot's claimants share one)."""
        if execution not in ends:
            ends[execution] = _end_of(execution)
        return ends[execution]

    def consider(message_id: str) -> int:
        """1 if the message is overdue; its slot added to `restarts` if it is to restart."""
        if message_id in standby:
            return 0
        image = read_item(config, message_id)
        if image is None or image["status"]["S"] != Status.FIRING:
            return 0
        publish_at = float(image["publish_at"]["N"])
        stuck = int(publish_at < now - STUCK_FIRING_SECONDS)
        if "lease" not in image:
            return stuck
        if float(image["lease"]["N"]) >= now - slots.LEASE_SKEW_SECONDS:
            # its claimant may still be delivering it; one that holds it this long past its
            # time (a claim stranded under a long lease) is overdue all the same
            return stuck
        claimed_by = image.get("claimed_by", {}).get("S", "")
        status, cause = ended(slots.execution_of(claimed_by))
        if status in LIVE:
            return 1  # its Fire's retry takes it up, or the next sweep decides
        if "unrecorded" in image:
            return 1  # delivered, its status not written: Overdue, never restarted
        if claimed_by and claimed_by in cause.split():
            _mark_unrecorded(config, message_id, claimed_by)
            return 1
        restarts.add(slots.slot_of(publish_at))
        return 1

    finished = True
    unread: set[int] = set()  # slots of messages whose look failed
    # (to the end of each second a retry will take up: every FIRING message it may take
    # over looked at first, its last fraction's too, which is not yet overdue)
    horizon = max([now - OVERDUE_SECONDS, *(slot + 1 for slot in retries)])
    try:
        for message_id, publish_at in _due(config, Status.FIRING, horizon):
            if run.out_of_time():
                finished = False
                break
            try:  # one message's failing call leaves it to the next run, never the others
                late = consider(message_id)
                overdue += late if publish_at < now - OVERDUE_SECONDS else 0
            except Exception as exc:
                log("WARNING", "sweep: left", message_id=message_id, exc=exc)
                run.failed += 1
                unread.add(slots.slot_of(publish_at))
    except Exception as exc:  # an index read failed: what it held waits for the next run
        log("WARNING", "sweep: FIRING lanes left", exc=exc)
        run.failed += 1
        finished = False
    if not finished:
        # A message not looked at may be one delivered and not yet marked `unrecorded`: a
        # restart of its slot would take it over. The next run restarts them.
        return restarted, overdue
    restarts -= unread  # (likewise the slot of one whose look failed: the next run's)
    # Restarts start after every delivered-unrecorded message is marked: a restart never
    # takes one of those over (`scheduler_slots.claim`).
    for slot in sorted(retries - unread - restarts):  # (a restart takes them up too)
        try:
            if ended(execution_arn(config.state_machine_arn, slots.slot_name(slot)))[0] in LIVE:
                continue  # its Fire's retry takes them up, or the next sweep decides
            run.pace()
            outcome = start_once(
                config.state_machine_arn,
                slots.retry_key(slot),
                slots.slot_input(slot),
                request_id(context),
                ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
            )
        except Exception as exc:
            log("WARNING", "sweep: retry left", slot=slot, exc=exc)
            run.failed += 1
            continue
        restarted += outcome.status == "STARTED"
        if outcome.existing_status == "SUCCEEDED":
            # The last attempt ended without firing them (claimed then, and given back
            # unsent, or its index read missed them): a restart of this sweep's fires them.
            restarts.add(slot)
    for slot in sorted(restarts):
        try:
            outcome = start_once(
                config.state_machine_arn,
                slots.restart_name(slot, now),
                slots.slot_input(slot),
                request_id(context),
            )
        except Exception as exc:
            log("WARNING", "sweep: restart left", slot=slot, exc=exc)
            run.failed += 1
            continue
        restarted += outcome.status == "STARTED"
    return restarted, overdue


def _mark_unrecorded(config: SchedulerSettings, message_id: str, claimed_by: str) -> None:
    """A message its claimant delivered and could not record: no claim takes it over (a
    restart of its slot for another message included); it stays FIRING, Overdue."""
    log("WARNING", "delivered, status not written", message_id=message_id)
    # (False: it moved on meanwhile)
    scheduler_store.mark_unrecorded(client("dynamodb"), config.table, message_id, claimed_by)


def _end_of(execution_arn: str) -> tuple[str, str]:
    """(status, cause): the claimant's execution's status, and the cause it failed with if
    StatusNotRecorded (naming the claimant whose deliveries happened). Not an execution,
    or one gone: ("", "")."""
    if not execution_arn.startswith("arn:"):
        return "", ""
    try:
        described = client("stepfunctions").describe_execution(executionArn=execution_arn)
    except ClientError as exc:
        if aws_code(exc) in ("ExecutionDoesNotExist", "InvalidArn"):
            return "", ""
        raise
    status = str(described.get("status", ""))
    if status == "FAILED" and described.get("error") == "StatusNotRecorded":
        cause = str(described.get("cause") or "")
        try:  # Lambda's error document: {"errorType": ..., "errorMessage": ...}
            return status, str(json.loads(cause).get("errorMessage", cause))
        except (ValueError, AttributeError):
            return status, cause
    return status, ""


@lambda_handler
def handler(event: Any, context: Any) -> dict[str, int]:
    return sweep(SchedulerSettings.current(), context=context)
