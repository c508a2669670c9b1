"""The scheduler against AWS's prices and quotas: cost per million messages by density, and
the lateness of a burst of messages due in the same second, for the slot clock and for one
execution per message. Every figure is a parameter (list prices, published default quotas,
per-call latencies), and the per-message counts are the ones tests count
(tests/unit/test_scheduler_slots.py: COUNTS; the e2e tests read the Wait and Fire of a
slot, or of a slot of one, from execution histories).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random

from benchmarks import measured
from exactly_once.components.scheduler import (
    SLOT_MEMORY_MB,
    SWEEP_MEMORY_MB,
    SWEEP_TIMEOUT_SECONDS,
    THROTTLED_INVOKE,
)
from exactly_once.handlers import metrics, scheduler_index, scheduler_slots, scheduler_sweep

# -- prices (us-east-1 list prices, docs/cost.md) --------------------------------------------
TRANSITION = 25.0  # $ per million STANDARD state transitions
LAMBDA_REQUEST = 0.20  # $ per million invocations
GB_SECOND = 16.6667  # $ per million GB-seconds
WRITE_UNIT = 0.625  # $ per million DynamoDB on-demand write request units
READ_UNIT = 0.125  # $ per million read request units
API_REQUEST = 3.50  # $ per million REST API requests
LOG_GB = 0.50  # $ per GB ingested into CloudWatch Logs (standard class)
STORAGE_GB_MONTH = 0.25  # $ per GB-month of a DynamoDB table (standard class)
PITR_GB_MONTH = 0.20  # $ per GB-month of point-in-time recovery (continuous backups)
PRICES_AS_OF = "2026-12-06"  # the pricing pages these were read from (docs/cost.md)

# What `bash scripts/bench cpu` measured (benchmarks/measured.py): CPU per call and per
# cold start, the handlers' log bytes. Re-measure there; nothing here is a guess of it.
MEASURED = measured.load()


@dataclasses.dataclass(frozen=True)
class Counts:
    """What firing one message costs, by path (the units tests count)."""

    transitions_per_execution: int
    executions_per_message: float  # 1 per message; 1 per slot, shared by its messages
    invocations_per_execution: int
    seconds_per_invocation: float
    memory_gb: float
    write_units_per_message: int
    read_units_per_execution: float


# The claim leaves the message in its lane of the status index (a FIRING message is listed
# in its STANDBY lane: scheduler_index), so it writes the table alone; the final write
# removes it from the index: the table's write and the index's delete (DynamoDB developer
# guide, "Provisioned throughput considerations for global secondary indexes": an update
# that changes no key or projected attribute of an index writes nothing to it; one that
# removes its key, a delete).
CLAIM_UNITS, FINAL_UNITS = 1, 2
SLOT = Counts(
    transitions_per_execution=2,  # Wait, Fire
    executions_per_message=0,  # set per density: 1 / messages in the slot
    invocations_per_execution=1,
    # woken LEAD_SECONDS ahead, the slot's second, delivery and the status writes
    seconds_per_invocation=scheduler_slots.LEAD_SECONDS + 1.2,
    memory_gb=SLOT_MEMORY_MB / 1024,
    write_units_per_message=CLAIM_UNITS + FINAL_UNITS,
    # a Query per lane, twice (the wake's read and the read after the deliveries),
    # eventually consistent under 4 KB: half a unit each
    read_units_per_execution=2 * scheduler_index.LANES * 0.5,
)
# A slot of one: a message's own execution (too late for its second's slot, or every
# message with join_slots off): the same machine and function, for one message.
PER_MESSAGE = Counts(
    transitions_per_execution=2,  # Wait, Fire
    executions_per_message=1,
    invocations_per_execution=1,
    # woken LEAD_SECONDS ahead, it sleeps to the instant, delivers and records
    seconds_per_invocation=scheduler_slots.LEAD_SECONDS + 0.6,
    memory_gb=SLOT_MEMORY_MB / 1024,
    write_units_per_message=CLAIM_UNITS + FINAL_UNITS,
    read_units_per_execution=0,  # claimed by its key: no index read
)
# What every message costs whichever clock fires it: the stream starter's share of its
# invocations for the STANDBY images (the only records its filter passes): registered in
# batches of 100, a batch's records reach it 25 at a time (its mapping's batch size),
# each invocation 256 MB for about 0.1 s (a start per second's slot, remembered for the
# batch's other messages of the same second).
STARTER_BATCH = 25
STARTER_SECONDS = 0.1
STARTER_INVOCATION = LAMBDA_REQUEST + 0.25 * STARTER_SECONDS * GB_SECOND
STREAM_STARTER = STARTER_INVOCATION / STARTER_BATCH
REGISTRATION = {
    # one POST: the request, the API function (256 MB, ~50 ms), PutItem (table + index);
    # its stream record reaches the starter about alone (Lambda polls a shard four times a
    # second: "Using AWS Lambda with Amazon DynamoDB"), an invocation where firing counts
    # a 25th of one
    "one POST each": API_REQUEST
    + LAMBDA_REQUEST
    + 0.25 * 0.05 * GB_SECOND
    + 2 * WRITE_UNIT
    + STARTER_INVOCATION
    - STREAM_STARTER,
    # POST /messages/batch of 100: a hundredth of the request and invocation (~0.4 s)
    "batches of 100": (API_REQUEST + LAMBDA_REQUEST + 0.25 * 0.4 * GB_SECOND) / 100
    + 2 * WRITE_UNIT,
}


# A worker (1,769 MB) of a second past CHUNK messages, invoked WORKER_LEAD_SECONDS before
# its second and billed until its share's last message (due at the second's end) is
# delivered and recorded, about 50 ms more (it does not read again: its slot does).
WORKER_SECONDS = scheduler_slots.WORKER_LEAD_SECONDS + 1.05
WORKER = LAMBDA_REQUEST + WORKER_SECONDS * 1.769 * GB_SECOND


def firing_parts(counts: Counts, per_second: float) -> dict[str, float]:
    """$ per million messages to fire them at `per_second` messages a second (spread
    evenly: a slot holds per_second of them, at least one), by what pays: transitions,
    the slot function, its workers, index reads, table writes, the stream starter."""
    per_slot = max(1.0, per_second)
    executions = counts.executions_per_message or 1 / per_slot
    workers = 0
    if counts is SLOT and per_slot > scheduler_slots.CHUNK:
        workers = min(
            scheduler_slots.MAX_WORKERS, math.ceil(per_slot / scheduler_slots.WORKER_SHARE)
        )
    invocation = LAMBDA_REQUEST + counts.seconds_per_invocation * counts.memory_gb * GB_SECOND
    return {
        "transitions": executions * counts.transitions_per_execution * TRANSITION,
        "slot Lambda": executions * counts.invocations_per_execution * invocation,
        "workers": executions * workers * WORKER,
        "reads": executions * counts.read_units_per_execution * READ_UNIT,
        "writes": counts.write_units_per_message * WRITE_UNIT,
        "starter": STREAM_STARTER,
    }


def firing_cost(counts: Counts, per_second: float) -> float:
    return sum(firing_parts(counts, per_second).values())


DENSITIES = {"1/min": 1 / 60, "1/s": 1.0, "10/s": 10.0, "100/s": 100.0}


# -- all in: what a team pays per million messages ------------------------------------------
def log_bytes_per_message(per_second: float) -> float:
    """Every function's lines for one message, as measured (`MEASURED["log_bytes"]`): the
    API's batch of 100, the starter's batch of STARTER_BATCH and the slot's invocation
    each shared by their messages, with Lambda's START, END and REPORT lines per
    invocation, and what each writes per message (a lateness datum, say)."""
    logged, platform = MEASURED["log_bytes"], MEASURED["platform_log_bytes"]
    per_slot = max(1.0, per_second)
    shares = {"api (batches)": 100, "starter": STARTER_BATCH, "slot": per_slot}
    return sum(
        (logged[function]["per_invocation"] + platform) / shared + logged[function]["per_message"]
        for function, shared in shares.items()
    )


# Fixed a month per component, whatever the traffic (docs/cost.md, "Watching it"): the
# scheduler's custom metrics ($0.30 each), its alarms ($0.10 each; a unit test counts
# what the component declares) and its dashboard ($3.00 past an account's first three).
SCHEDULER_METRICS = len(metrics.CATALOGUE["scheduler"])
SCHEDULER_ALARMS = 7
MONITORING_MONTH = SCHEDULER_METRICS * 0.30 + SCHEDULER_ALARMS * 0.10 + 3.00
SECONDS_A_MONTH = 30 * 24 * 3600
RETENTION_DAYS = 7  # SchedulerArgs.retention_days' default
# DynamoDB deletes an expired item "within a few days" of its expiry, and bills it until
# then ("Working with expired items"): two days counted
TTL_LAG_DAYS = 2
# A Lambda cold start's INIT, billed since 1 August 2025 like the invoke (AWS Compute
# Blog, "AWS Lambda standardizes billing for INIT Phase"): the handlers import lazily.
INIT_SECONDS = 0.5
# A message registered further ahead than the window is RESERVED, and moved to STANDBY by
# the sweep: one more UpdateItem (the table, and the index's delete and put).
RESERVED_MOVE_UNITS = 3


def all_in(
    per_second: float,
    item_kb: int = 1,
    beyond_window: float = 0.0,
    retention_days: int = RETENTION_DAYS,
) -> dict[str, float]:
    """$ per million messages fired by the slot clock at `per_second`, registered in
    batches of 100, everything counted: firing, registration, log ingestion (as measured),
    items of `item_kb` KB (each table write is a unit per KB; the index holds keys and
    lane only), the share `beyond_window` registered past the window (one more write), the
    slot function's INIT when its environment is new (a slot a minute apart or more: every
    invocation; at a second apart or less Lambda keeps it warm), each ended record's
    storage and point-in-time recovery for `retention_days`, the component's monitoring
    shared by a month's messages, and the default sweep's share."""
    per_slot = max(1.0, per_second)
    table_writes = 3  # registration, claim, final status: one table write each
    kept_months = (retention_days + TTL_LAG_DAYS) / 30 if retention_days else 0.0
    parts = {
        "firing": firing_cost(SLOT, per_second),
        "registration": REGISTRATION["batches of 100"],
        "logs": log_bytes_per_message(per_second) / 1e9 * LOG_GB * 1e6,
        "storage": item_kb / 1024**2 * kept_months * (STORAGE_GB_MONTH + PITR_GB_MONTH) * 1e6,
        "monitoring": MONITORING_MONTH / (per_second * SECONDS_A_MONTH) * 1e6,
        "item size": table_writes * (item_kb - 1) * WRITE_UNIT,
        "reserved": beyond_window * RESERVED_MOVE_UNITS * WRITE_UNIT,
        "init": (INIT_SECONDS * SLOT.memory_gb * GB_SECOND / per_slot) if per_second < 1 else 0.0,
        # the default sweep (every 60 minutes, a 65-minute window): its finds, and its
        # runs shared by the month's messages
        "sweep": sweep_per_message(60, 65)
        + sweep_month(60)["dollars"] / (per_second * MINUTES_A_MONTH * 60) * 1e6,
    }
    return {**parts, "total": sum(parts.values())}


ALL_IN_RATES = {"1/s": 1.0, "10/s": 10.0, "100/s": 100.0}


def cost_table() -> dict[str, dict[str, float]]:
    """density -> path -> $ per million (firing; registration separately)."""
    return {
        name: {
            "slot clock": firing_cost(SLOT, rate),
            "per message": firing_cost(PER_MESSAGE, rate),
        }
        for name, rate in DENSITIES.items()
    }


# -- the sweep: a cost per period, whatever the traffic ----------------------------------------
# An idle sweep reads one page of every lane of three statuses (RESERVED and STANDBY due in
# the window, FIRING overdue), eventually consistent, half a unit each: the calls
# tests/unit/test_scheduler.py counts. Its invocation (SWEEP_MEMORY_MB: a whole vCPU) is
# billed 0.5 s (48 Queries of a few milliseconds each) and its INIT each time (runs minutes
# apart find no warm environment: an upper bound); its lines (the sweep's, its metric and
# Lambda's START/END/REPORT) about 1 KB. The schedule's event is counted at EventBridge's
# custom-event price, $1.00 per million (an upper bound: its pricing page prices custom,
# partner and opt-in events).
SWEEP_QUERIES = sum(
    len(scheduler_index.lanes(status)) for status in ("RESERVED", "STANDBY", "FIRING")
)
SWEEP_SECONDS = 0.5
SWEEP_MEMORY_GB = SWEEP_MEMORY_MB / 1024
SWEEP_LOG_BYTES = 1024
SCHEDULE_EVENT = 1.00
MINUTES_A_MONTH = 30 * 24 * 60


def sweep_month(period_minutes: int, memory_gb: float = SWEEP_MEMORY_GB) -> dict[str, float]:
    """The sweep's runs and $ a month at a period of `period_minutes`, idle (each message
    it finds costs what `sweep_per_message` counts)."""
    runs = MINUTES_A_MONTH / period_minutes
    per_run = (
        LAMBDA_REQUEST
        + (SWEEP_SECONDS + INIT_SECONDS) * memory_gb * GB_SECOND
        + SWEEP_QUERIES * 0.5 * READ_UNIT
        + SWEEP_LOG_BYTES / 1e9 * LOG_GB * 1e6
        + SCHEDULE_EVENT
    )
    return {"runs": runs, "dollars": runs * per_run / 1e6}


SWEEP_PERIODS = (1, 5, 60)
# Each STANDBY message due in the window is found by every run while it waits, at most
# window / period runs: started from the index's keys, unread unless overdue (a duplicate
# once started; StartExecution is not billed, it draws on the account's bucket, and its
# second's slot is started once per run), with a log line for each (an upper bound: a
# second's messages share their slot's start and line); ~2 ms of the function (its share
# of an index page, its start's share, the line).
SWEEP_SECONDS_PER_MESSAGE = 0.002
SWEEP_LOG_BYTES_PER_MESSAGE = 0  # (its starts log at DEBUG: one summary line a run)


def sweep_per_message(period_minutes: int, window_minutes: int) -> float:
    """$ per million messages for the sweep's finding each one STANDBY in the window."""
    runs = max(1.0, window_minutes / period_minutes)
    per_find = (
        SWEEP_SECONDS_PER_MESSAGE * SWEEP_MEMORY_GB * GB_SECOND
        + SWEEP_LOG_BYTES_PER_MESSAGE / 1e9 * LOG_GB * 1e6
    )
    return runs * per_find


SWEEP_SETTINGS = ((60, 65), (5, 10), (1, 65), (1, 5))  # (period, window) minutes


def sweep_moves_a_run(
    cpu_per_call: float = MEASURED["cpu_per_call"], memory_mb: int = SWEEP_MEMORY_MB
) -> float:
    """How many RESERVED messages one run moves (an UpdateItem each, `cpu_per_call` seconds
    of one vCPU) within the function's timeout less the sweep's margin, CPU-bound."""
    seconds = SWEEP_TIMEOUT_SECONDS - scheduler_sweep.MARGIN_SECONDS
    return seconds * vcpu(memory_mb) / cpu_per_call


# -- a burst: N messages due in the same second ---------------------------------------------
@dataclasses.dataclass(frozen=True)
class Quotas:
    """Published defaults (no increase asked for), largest Regions; per account and Region
    unless said. Step Functions developer guide, "Step Functions service quotas"; Lambda
    developer guide, "Lambda quotas" and "Understanding Lambda function scaling"; DynamoDB
    developer guide, "Service quotas", "Partitions and data distribution" and "Warm
    throughput"."""

    start_bucket: int = 1300  # StartExecution: bucket, refill per second
    start_refill: float = 300
    transition_bucket: int = 5000  # StateTransition (STANDARD): bucket, refill per second
    transition_refill: float = 1500
    lambda_concurrency: int = 1000  # concurrent executions, shared by every function
    lambda_scaling: int = 1000  # new environments per function per 10 s
    # a new on-demand table's warm write throughput, units per second ("Pre-warming a
    # table for on-demand capacity mode"; more once it served more, or pre-warmed: a table
    # setting, no account quota)
    table_writes: float = 4000

    def claims_per_second(self) -> float:
        """A claim writes the table alone (1 unit; the index is written when the message
        leaves it, after its delivery: not in the claims' way), over the table's
        partitions."""
        return self.table_writes


@dataclasses.dataclass(frozen=True)
class Latencies:
    """Seconds per call, as a Lambda function in the same Region sees them."""

    write: float = 0.008  # a DynamoDB UpdateItem
    deliver: float = 0.030  # a warm target: its invoke and its own work
    cold_start: float = 0.6  # a Python function's first invocation
    read_page: float = 0.020  # a Query page (1 MB)
    # CPU an AWS call costs the caller (botocore's serializing, signing and parsing, over a
    # kept-alive TLS connection), seconds of one vCPU, as measured (benchmarks/measured.py);
    # Lambda allots one vCPU at 1,769 MB, in proportion below it
    cpu_per_call: float = MEASURED["cpu_per_call"]
    # CPU a cold start spends before the first call, seconds of one vCPU: the handler's
    # imports and its clients, built once (scheduler_slots.clients), as measured: it takes
    # 1 / vCPU times as long in a smaller function
    init_cpu: float = MEASURED["init_cpu"]
    # CPU of opening a new TLS connection (a cold function's threads open one each)
    connect_cpu: float = MEASURED["tls_connect_cpu"]


def vcpu(memory_mb: int) -> float:
    """Lambda's CPU share: a whole vCPU at 1,769 MB, in proportion below it (Lambda
    developer guide, "Configure Lambda function memory")."""
    return min(1.0, memory_mb / 1769)


SLOT_VCPU, WORKER_VCPU = vcpu(SLOT_MEMORY_MB), 1.0  # the slots function, its workers


def _token_times(requests: list[float], bucket: int, refill: float) -> list[float]:
    """When each request (sorted times) gets a token from a bucket full at the start."""
    tokens, last, granted = float(bucket), requests[0] if requests else 0.0, []
    for at in requests:
        at = max(at, last)
        tokens = min(bucket, tokens + (at - last) * refill)
        if tokens < 1:
            at += (1 - tokens) / refill
            tokens = 1.0
        tokens -= 1
        last = at
        granted.append(at)
    return granted


def slot_burst(
    n: int,
    quotas: Quotas = Quotas(),
    latency: Latencies = Latencies(),
    chunk: int = scheduler_slots.CHUNK,
    threads: int = scheduler_slots.THREADS,
    slot_vcpu: float = SLOT_VCPU,
) -> list[float]:
    """Lateness of each of `n` messages due in one second (spread evenly over it) fired by
    one slot clock: woken LEAD_SECONDS ahead, the slot function reads the index and fires
    up to `chunk` messages itself, or hands each of up to MAX_WORKERS workers (a vCPU each)
    its share of the ids, invoking them one after another (a TLS connection and a call
    each, of the slot's CPU) WORKER_LEAD_SECONDS before the second, or at once when the
    claims need longer at a new table's rate. Each claims its share in publish order and
    delivers each message at its time once claimed (`fire`: a thread per message, its
    claim then its delivery), as far as its threads and its CPU go (three AWS calls a
    message); every worker's claims share the table's write rate. `latency` says whether
    the functions start cold (its cold_start and init_cpu; zero for warm ones)."""
    wake = -float(scheduler_slots.LEAD_SECONDS)
    read = latency.read_page * max(1, math.ceil(n * 80 / 1_000_000))

    def pool(messages: int) -> int:  # scheduler_slots.fire's threads
        return 2 * max(threads, min(messages, scheduler_slots.WORKER_SHARE))

    # woken, started, its lanes read over a connection each
    ready = wake + latency.cold_start + latency.init_cpu / slot_vcpu + read
    ready += scheduler_index.LANES * latency.connect_cpu / slot_vcpu
    if n > chunk:
        workers = min(scheduler_slots.MAX_WORKERS, math.ceil(n / scheduler_slots.WORKER_SHARE))
        if workers + 1 > quotas.lambda_concurrency:
            raise ValueError("more workers than the account's concurrency")
        lead = max(scheduler_slots.WORKER_LEAD_SECONDS, n / scheduler_slots.NEW_TABLE_WRITES)
        invoking = max(ready, -lead)
        per_invoke = (latency.connect_cpu + latency.cpu_per_call) / slot_vcpu
        starts = [
            invoking
            + (k + 1) * per_invoke
            + latency.cold_start
            + latency.init_cpu / WORKER_VCPU
            # (past lambda_scaling new environments, the next 10 s)
            + 10.0 * (k // quotas.lambda_scaling)
            for k in range(workers)
        ]
        share_vcpu = WORKER_VCPU
    else:
        workers, starts, share_vcpu = 1, [ready], slot_vcpu
    threads_each = pool(math.ceil(n / workers))
    per_claim_cpu = latency.cpu_per_call / share_vcpu
    per_delivery_cpu = 2 * latency.cpu_per_call / share_vcpu
    due = [i / n for i in range(n)]
    # when each message's claim is sent: its worker's connections first, then a claim per
    # thread as its CPU allows (a thread each, in publish order)
    sent, cpu_after_claims = [0.0] * n, [0.0] * workers
    for worker, start in enumerate(starts):
        mine = range(worker, n, workers)
        cpu = start + min(len(mine), threads_each) * latency.connect_cpu / share_vcpu
        for i in mine:
            cpu += per_claim_cpu
            sent[i] = cpu
        cpu_after_claims[worker] = cpu
    claimed = _table_writes(sent, due, quotas.claims_per_second(), latency)
    lateness: list[float] = []
    for worker in range(workers):
        # each delivery at its time once claimed, its thread's, after the claims' CPU (a
        # thread waiting for its time takes none; a delivery due while claims still run
        # waits its turn)
        cpu = cpu_after_claims[worker]
        for i in range(worker, n, workers):
            sending = max(due[i], claimed[i], cpu)
            cpu = sending + per_delivery_cpu
            lateness.append(sending + latency.deliver - due[i])
    return sorted(lateness)


def _table_writes(
    sent: list[float], due: list[float], rate: float, latency: Latencies
) -> list[float]:
    """When each message's claim lands, the table writing `rate` units a second, one a
    claim, and one for each delivered message's final status (pending from its delivery,
    at its time once claimed: the index's delete is the index's own rate), taken in no
    order among those pending: a write past the rate is throttled and retried by the SDK
    after a random back-off (1 KB messages: a write unit each)."""
    rng = random.Random(0)  # (the same figures every run)
    arrivals = sorted(range(len(sent)), key=lambda i: sent[i])
    finals: list[float] = []  # when each pending final write became pending
    pending: list[int] = []  # claims waiting (message index), and -1 for each final write
    claimed = [0.0] * len(sent)
    left, next_arrival, t = len(sent), 0, min(sent)
    while left:
        while next_arrival < len(arrivals) and sent[arrivals[next_arrival]] <= t:
            pending.append(arrivals[next_arrival])
            next_arrival += 1
        while finals and finals[0] <= t:
            heapq.heappop(finals)
            pending.append(-1)
        if not pending:  # idle until the next claim or final write arrives
            t = min(
                sent[arrivals[next_arrival]] if next_arrival < len(arrivals) else math.inf,
                finals[0] if finals else math.inf,
            )
            continue
        at = rng.randrange(len(pending))
        pending[at], pending[-1] = pending[-1], pending[at]
        taken = pending.pop()
        if taken >= 0:
            claimed[taken] = t + latency.write
            heapq.heappush(finals, max(due[taken], claimed[taken]) + latency.deliver)
            left -= 1
        t += 1 / rate
    return claimed


def per_message_burst(
    n: int, quotas: Quotas = Quotas(), latency: Latencies = Latencies()
) -> list[float]:
    """Lateness of each of `n` messages due in one second, each a slot of one (its own
    execution, started earlier): at its wake its Fire (a state transition from the shared
    bucket) invokes the slot function, which starts cold, claims the message by its key
    and delivers it at its time. An invoke past the account's concurrency is throttled
    and retried by the Fire (THROTTLED_INVOKE: 1 s growing to 10 s, 30 times) while
    earlier invocations end; one throttled every time fails its execution, and waits for
    the sweep."""
    wake = -float(scheduler_slots.LEAD_SECONDS)
    granted = _token_times([wake] * n, quotas.transition_bucket, quotas.transition_refill)
    claim_rate = quotas.claims_per_second()
    # (when, message, attempt) in time order: each invoke, and each retry of a throttled one
    tries = [(at, i, 0) for i, at in enumerate(granted)]
    heapq.heapify(tries)
    busy: list[float] = []  # when each running invocation ends
    lateness = [0.0] * n
    while tries:
        tried, i, attempt = heapq.heappop(tries)
        due = i / n
        while busy and busy[0] <= tried:
            heapq.heappop(busy)
        if len(busy) >= quotas.lambda_concurrency:
            if attempt < len(LAMBDA_RETRY_DELAYS):
                heapq.heappush(tries, (tried + LAMBDA_RETRY_DELAYS[attempt], i, attempt + 1))
            else:
                lateness[i] = SWEEP_PERIOD_SECONDS
            continue
        started = tried + latency.cold_start + latency.init_cpu / SLOT_VCPU
        claimed = max(started, wake + i / claim_rate) + latency.write
        fired = max(due, claimed) + latency.deliver
        heapq.heappush(busy, fired + latency.write)
        lateness[i] = fired - due
    return sorted(lateness)


# The Fire's throttle retrier (components/scheduler.py THROTTLED_INVOKE): each retry's
# computed backoff (full jitter draws it anywhere below: the model waits the longest).
LAMBDA_RETRY_DELAYS = tuple(
    min(
        float(THROTTLED_INVOKE["MaxDelaySeconds"]),
        THROTTLED_INVOKE["IntervalSeconds"] * THROTTLED_INVOKE["BackoffRate"] ** attempt,
    )
    for attempt in range(THROTTLED_INVOKE["MaxAttempts"])
)
SWEEP_PERIOD_SECONDS = 3600.0  # the default sweep period (SchedulerArgs)


def quantile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


# Functions warmed ahead for a dense second (scheduler_slots.WARM_LEAD_SECONDS: the slot
# function and each worker it fans out to) start without their cold start and imports,
# if Lambda reuses the environments the warm-up left (it may: not guaranteed).
WARM = dataclasses.replace(Latencies(), cold_start=0.0, init_cpu=0.0)
# A table that has served the burst's rate before, or was created pre-warmed to it
# (SchedulerArgs.table_warm_writes: "Understanding DynamoDB warm throughput"); and a new
# on-demand table, not pre-warmed (4,000 writes a second).
TABLES = {
    "new or not, warm for 12,000 writes a second": Quotas(table_writes=12_000),
    "new, on-demand, not pre-warmed": Quotas(),
}


WARMED, COLD = "warmed ahead", "cold (not warmed)"


def warm_up_dollars(n: int) -> float:
    """$ a dense second's warm-up costs (scheduler_slots.warm_up), `n` messages: its two
    transitions; the slot function's invocation, started cold (its INIT billed), reading
    the slot, invoking each worker it will fan out to (a connection and a call each, of its
    CPU) and waiting for the last (that one's cold start and hold); each ping, started
    cold and held PING_HOLD_SECONDS (1,769 MB)."""
    workers = min(scheduler_slots.MAX_WORKERS, math.ceil(n / scheduler_slots.WORKER_SHARE))
    latency, hold = Latencies(), scheduler_slots.PING_HOLD_SECONDS
    invoking = workers * (latency.connect_cpu + latency.cpu_per_call) / SLOT_VCPU
    waited = latency.cold_start + latency.init_cpu / WORKER_VCPU + hold
    slot_seconds = INIT_SECONDS + 0.2 + invoking + waited
    slot = LAMBDA_REQUEST + slot_seconds * SLOT.memory_gb * GB_SECOND
    ping = LAMBDA_REQUEST + (INIT_SECONDS + hold) * 1.769 * GB_SECOND
    return (2 * TRANSITION + slot + workers * ping) / 1e6


def burst_table(n: int = 10_000) -> dict[tuple[str, str, str], dict[str, float]]:
    """p50, p99 and max lateness, seconds, of a burst of `n` due in one second, by
    (clock, functions warm or cold, table)."""
    rows = {}
    for table, quotas in TABLES.items():
        for functions, latency in ((WARMED, WARM), (COLD, Latencies())):
            rows["slot clock", functions, table] = slot_burst(n, quotas, latency)
    warm_table = next(iter(TABLES))
    rows["one execution per message", COLD, warm_table] = per_message_burst(n, TABLES[warm_table])
    return {
        key: {"p50": quantile(v, 0.5), "p99": quantile(v, 0.99), "max": v[-1]}
        for key, v in rows.items()
    }


def burst_rows(n: int = 10_000) -> list[str]:
    """docs/cost.md, "The scheduler in a burst"."""
    return [
        f"| {clock} | {functions} | {table} | {row['p50']:.2f} | **{row['p99']:.2f}** | "
        f"{row['max']:.2f} |"
        for (clock, functions, table), row in burst_table(n).items()
    ]


def memory_rows() -> list[str]:
    """docs/cost.md, the slot function's memory."""
    return [
        f"| {memory} | {row['first']:.2f} | {row['p99']:.2f} | {row['dollars_at_10_per_s']:.2f} |"
        for memory, row in memory_table().items()
    ]


# -- the slot function's memory ---------------------------------------------------------------
MEMORY_SIZES = (256, 512, 1024, 1769)


def memory_table(n: int = scheduler_slots.CHUNK) -> dict[int, dict[str, float]]:
    """A cold slot of `n` messages (the most one function fires alone) by the slots
    function's memory: first-delivery, p99 and max lateness, seconds (the model fed the
    measured CPU per call and per cold start); and the slot function's share of the $ per
    million messages at 10 a second."""
    latency = Latencies()
    rows = {}
    for memory in MEMORY_SIZES:
        late = slot_burst(n, latency=latency, slot_vcpu=vcpu(memory))
        invocation = LAMBDA_REQUEST + SLOT.seconds_per_invocation * memory / 1024 * GB_SECOND
        rows[memory] = {
            "first": late[0],
            "p99": quantile(late, 0.99),
            "max": late[-1],
            "dollars_at_10_per_s": invocation / 10,
        }
    return rows


# -- docs/cost.md's tables, as the model computes them (a unit test holds the doc to them) ----
DENSITY_NAMES = {
    "1/min": "1 a minute (1 per slot)",
    "1/s": "1 a second (1 per slot)",
    "10/s": "10 a second",
    "100/s": "100 a second",
}


def _said(parts: dict[str, float]) -> str:
    return " + ".join(f"{name} {value:.2f}" for name, value in parts.items() if value >= 0.005)


def density_rows() -> list[str]:
    """docs/cost.md, "The scheduler by density": firing, by what pays."""
    rows = []
    for key, rate in DENSITIES.items():
        slot, alone = firing_parts(SLOT, rate), firing_parts(PER_MESSAGE, rate)
        total, single = sum(slot.values()), sum(alone.values())
        rows.append(
            f"| {DENSITY_NAMES[key]} | **{total:.2f}** = {_said(slot)} | "
            f"{single:.2f} = {_said(alone)} | {total / single:.3f} |"
        )
    return rows


def all_in_rows() -> list[str]:
    """docs/cost.md, "The scheduler all in"."""
    rows = []
    for rate in ALL_IN_RATES.values():
        p = all_in(rate)
        rows.append(
            f"| {rate:g} | {p['firing']:.2f} | {p['registration']:.2f} | {p['logs']:.2f} | "
            f"{p['storage']:.2f} | {p['monitoring']:.2f} | {p['sweep']:.2f} | "
            f"**{p['total']:.2f}** | {all_in(rate, 4)['total']:.2f} | "
            f"{all_in(rate, 1, 1.0)['total']:.2f} |"
        )
    return rows


if __name__ == "__main__":  # the rows to paste, after a re-measure
    print("\n".join([*density_rows(), "", *all_in_rows()]))
