"""The benchmarks that run through LocalStack (a deployed `local` stack), side by side.

- starter: the deployed name-dedup starter vs a Powertools-lock starter (lock_starter.py)
  deployed beside it from the same asset, fed the same S3 events, every event delivered
  twice, by synchronous invokes from a few threads (so twins often arrive together):
  deliveries/s, deliveries the lock turned away to be redelivered, and the cold invoke.
- scheduler_idle: 20 messages at whole and fractional times, 1.25 s apart, on an idle
  stack. scheduler: 1,000 messages due in the same second, registered in batches of 100,
  through the slot clock and then through one execution per message (the scheduler before
  the slot clock), in one run. Lateness (the target's clock at the fire - publishTime)
  min / p50 / p99 / max; state transitions counted from the executions' histories.
- scheduler_register: one client registering 1,000 messages, one POST each against
  POST /messages/batch of 100 (halves alternating), messages per second.
- scheduler_start: a near-term message's registration to its execution's start, started by
  the API itself (ours) vs by the DynamoDB stream alone (a STANDBY item written directly,
  as only the stream started them before), one at a time, interleaved.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import math
import time
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError

from exactly_once.components.etl import POWERTOOLS
from exactly_once.components.functions import RUNTIME
from exactly_once.components.lambda_asset import build_zip
from exactly_once.handlers.settings import encode
from tooling.clients import (
    batch_entries,
    client,
    eventually,
    executions,
    fire_records,
    http,
    invoke_raw,
    lateness,
    new_tag,
    quantiles,
    scheduler_live,
    states_entered,
)
from tooling.events import eventbridge

HERE = Path(__file__).resolve().parent
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "lambda.amazonaws.com"},
            "Action": "sts:AssumeRole",
        }
    ],
}


def deploy_lock_starter(state_machine_arn: str, tag: str) -> tuple[str, list[Any]]:
    """The lock starter, its lock table and role; returns its name and an undo list."""
    ddb, lam, iam = client("dynamodb"), client("lambda"), client("iam")
    table, name = f"bench-locks-{tag}", f"bench-lock-starter-{tag}"
    ddb.create_table(
        TableName=table,
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]
    # Least privilege, as LocalStack enforces IAM: its lock table, its machine, its logs.
    account_region = "us-east-1:000000000000"
    grants = [
        (
            ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem"],
            f"arn:aws:dynamodb:{account_region}:table/{table}",
        ),
        (["states:StartExecution"], state_machine_arn),
        (
            ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
            f"arn:aws:logs:{account_region}:log-group:/aws/lambda/{name}:*",
        ),
    ]
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": actions, "Resource": resource}
            for actions, resource in grants
        ],
    }
    iam.put_role_policy(RoleName=name, PolicyName="lock-starter", PolicyDocument=json.dumps(policy))
    code = io.BytesIO(build_zip(POWERTOOLS).read_bytes())
    with zipfile.ZipFile(code, "a") as archive:
        archive.write(HERE / "lock_starter.py", "lock_starter.py")
    lam.create_function(
        FunctionName=name,
        Runtime=RUNTIME,
        Handler="lock_starter.handler",
        Role=role["Arn"],
        Code={"ZipFile": code.getvalue()},
        Timeout=30,
        MemorySize=256,
        Environment={"Variables": {"LOCK_TABLE": table, "STATE_MACHINE_ARN": state_machine_arn}},
    )
    lam.get_waiter("function_active_v2").wait(FunctionName=name)
    undo = [
        lambda: lam.delete_function(FunctionName=name),
        lambda: iam.delete_role_policy(RoleName=name, PolicyName="lock-starter"),
        lambda: iam.delete_role(RoleName=name),
        lambda: ddb.delete_table(TableName=table),
    ]
    return name, undo


RETRY_LATER = "IdempotencyAlreadyInProgressError"  # Powertools: a concurrent duplicate


def timed_invoke(function: str, event: Any) -> tuple[float, dict[str, Any], int]:
    """(seconds, payload, retries): a delivery the lock starter turns away while its twin
    holds the lock is delivered again, as Lambda's retry would, until it is answered."""
    started, retries = time.perf_counter(), 0
    while True:
        ok, payload = invoke_raw(function, event)
        if ok:
            return time.perf_counter() - started, payload, retries
        if payload.get("errorType") != RETRY_LATER:
            raise RuntimeError(f"{function} failed: {payload}")
        retries += 1
        time.sleep(0.2)


def bench_starters(stack: dict[str, Any], events: int = 100, workers: int = 4) -> dict[str, Any]:
    out = stack["nameDedup"]
    tag = new_tag()
    lock, undo = deploy_lock_starter(out["stateMachineArn"], tag)
    try:
        functions = {"name_dedup": out["functionName"], "powertools_lock": lock}
        results: dict[str, Any] = {}
        for label, function in functions.items():
            # a cold sandbox: the function's first invoke since (re)deployment
            warm = eventbridge(out["bucket"], f"bench/{tag}/{label}/warm", "w")
            cold_invoke_ms = timed_invoke(function, warm)[0] * 1000
            distinct = [
                eventbridge(out["bucket"], f"bench/{tag}/{label}/{i}", f"v{i}")
                for i in range(events)
            ]
            deliveries = [e for pair in zip(distinct, distinct, strict=True) for e in pair]
            started = time.perf_counter()
            with ThreadPoolExecutor(workers) as pool:
                timed = list(pool.map(lambda e, f=function: timed_invoke(f, e), deliveries))
            elapsed = time.perf_counter() - started
            answers = [payload for _, payload, _ in timed]
            if label == "name_dedup":
                produced = {a["execution_arn"] for a in answers if a["status"] == "STARTED"}
            else:
                produced = {a["executionArn"] for a in answers}
            results[label] = {
                "cold_invoke_ms": cold_invoke_ms,
                "deliveries": len(deliveries),
                "deliveries_per_second": len(deliveries) / elapsed,
                "executions": len(produced),
                "turned_away_and_redelivered": sum(retries for _, _, retries in timed),
                "distinct_events": events,
            }
        return results
    finally:
        for step in undo:
            step()


@contextlib.contextmanager
def per_message_clock(out: dict[str, Any]) -> Iterator[None]:
    """Every message on its own execution, a slot of one, as the scheduler was before the
    slot clock (its functions' JOIN_SLOTS false, as `SchedulerSettings` reads it; restored
    on exit). Lambda runs the changed configuration in new sandboxes."""
    lam = client("lambda")
    machine = out["stateMachineArn"]
    names = []
    for page in lam.get_paginator("list_functions").paginate():
        for function in page["Functions"]:
            variables = function.get("Environment", {}).get("Variables", {})
            if variables.get("STATE_MACHINE_ARN") == machine and "JOIN_SLOTS" in variables:
                names.append(function["FunctionName"])

    def join(slots: bool) -> None:
        for name in names:
            variables = lam.get_function_configuration(FunctionName=name)["Environment"]
            lam.update_function_configuration(
                FunctionName=name,
                Environment={"Variables": {**variables["Variables"], "JOIN_SLOTS": encode(slots)}},
            )
        for name in names:
            lam.get_waiter("function_updated_v2").wait(FunctionName=name)

    join(False)
    try:
        yield
    finally:
        join(True)


def burst(out: dict[str, Any], messages: int, clients: int = 1) -> dict[str, Any]:
    """`messages` due in the same second, registered in batches of 100 by `clients`
    clients with a lead meant to cover the registrations (inside the window: STANDBY at
    once); when each fired. A batch whose answer did not come in time is sent again, as a
    client would: its entries' keys make that safe."""
    headers = {"x-api-key": out["apiKey"]}
    publish = float(int(time.time()) + 115)  # the `local` stack's window is 2 minutes
    entries = batch_entries([publish] * messages)
    batches = [entries[i : i + 100] for i in range(0, messages, 100)]

    def post(batch: list[dict[str, Any]]) -> tuple[int, Any]:
        answer: tuple[int, Any] = (0, "no answer in time")
        for _ in range(5):
            try:
                answer = http("POST", f"{out['url']}/batch", {"entries": batch}, headers)
            except OSError:  # (a timeout: the batch is sent again)
                continue
            if answer[0] < 500:
                return answer
        raise AssertionError(f"a batch failed five times: {answer}")

    began = time.time()
    with ThreadPoolExecutor(clients) as pool:
        answers = list(pool.map(post, batches))
    registered = time.time()
    assert all(status == 200 and not a["failed"] for status, a in answers), answers[:1]
    ids = [entry["message"]["id"] for _, a in answers for entry in a["successful"]]
    table = out["firesTables"]["demo"]

    def all_fired() -> dict[str, Any]:
        try:
            fired = fire_records(table, ids)
        except (ReadTimeoutError, ConnectTimeoutError):  # (a scan the burst's load stalled
            return {}  # past its retries: read again)
        return fired if len(fired) == messages else {}

    try:
        found = eventually(all_fired, timeout=1200, interval=10)
    except AssertionError:  # not all fired in 20 minutes: the rows say how many were lost
        found = fire_records(table, ids)
    time.sleep(5)  # a repeat would show by now
    records = list(fire_records(table, ids).values())
    late = lateness(records)
    return {
        "registration_s": registered - began,
        "lead_left_s": publish - registered,
        "fired_once": sum(r["fires"] == 1 for r in records),
        "fired_twice_or_more": sum(r["fires"] > 1 for r in records),
        "lost": messages - len(found),
        "early": sum(1 for r in records if r["fired_at"] < r["publish_time"]),
        "lateness_s": late,
        "transitions": transitions(out, ids, publish),
    }


def transitions(out: dict[str, Any], ids: list[str], publish: float) -> int:
    """State transitions the burst cost, counted from the executions' histories: its slot's
    (if any) and every message's own (if any)."""
    sfn = client("stepfunctions")
    counted = 0
    slot = executions(out["stateMachineArn"], f"slot-{int(publish)}")
    arns = [e["executionArn"] for e in slot]
    wanted = set(ids)
    for page in sfn.get_paginator("list_executions").paginate(
        stateMachineArn=out["stateMachineArn"]
    ):
        arns += [e["executionArn"] for e in page["executions"] if e["name"] in wanted]
    for arn in arns:
        counted += len(states_entered(arn))
    return counted


def bench_scheduler(
    stack: dict[str, Any], messages: int = 1000, side_by_side: int = 300
) -> dict[str, Any]:
    """`messages` due in one second through the slot clock; then `side_by_side` through the
    slot clock and through one execution per message (the scheduler before it), one after
    the other in one run on one machine. (1,000 waiting executions at once exhaust the
    threads of LocalStack's Step Functions on this machine: it exits "can't start new
    thread"; 300 is the size the per-message figure was measured at before.)"""
    out = stack["scheduler"]
    scheduler_live(out)
    result: dict[str, Any] = {"messages": messages, "slot_clock": burst(out, messages)}
    pair: dict[str, Any] = {"messages": side_by_side, "slot_clock": burst(out, side_by_side)}
    with per_message_clock(out):
        pair["per_message"] = burst(out, side_by_side)
    return {**result, "side_by_side": pair}


def wait_only_machine(target_arn: str, tag: str) -> tuple[str, list[Any]]:
    """The alternative: a whole-second Wait past publishTime (a Wait drops a timestamp's
    fraction), then the target invoked directly: no claim, no sub-second sleep (0.4's
    waiting machine's fallback). Its own
    role may invoke the target only (LocalStack enforces IAM here)."""
    sfn, iam = client("stepfunctions"), client("iam")
    definition = {
        "StartAt": "Wait",
        "States": {
            "Wait": {"Type": "Wait", "TimestampPath": "$.lateAt", "Next": "Fire"},
            "Fire": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": target_arn, "Payload.$": "$.delivery"},
                "End": True,
            },
        },
    }
    name = f"bench-wait-only-{tag}"
    trust = {
        **TRUST,
        "Statement": [{**TRUST["Statement"][0], "Principal": {"Service": "states.amazonaws.com"}}],
    }
    role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]
    policy = {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": ["lambda:InvokeFunction"], "Resource": target_arn}
        ],
    }
    iam.put_role_policy(RoleName=name, PolicyName="invoke", PolicyDocument=json.dumps(policy))
    arn = sfn.create_state_machine(
        name=name, definition=json.dumps(definition), roleArn=role["Arn"]
    )["stateMachineArn"]
    return arn, [
        lambda: sfn.delete_state_machine(stateMachineArn=arn),
        lambda: iam.delete_role_policy(RoleName=name, PolicyName="invoke"),
        lambda: iam.delete_role(RoleName=name),
    ]


def bench_scheduler_idle(stack: dict[str, Any], messages: int = 20) -> dict[str, Any]:
    """Messages one at a time on an idle stack, at whole and fractional times, through our
    slot clock (registered by the API) and, interleaved, through the whole-second Wait
    alone (started directly): the lateness of each design. One message is fired first and
    not counted: the slot function's and the target's sandboxes are warm, as a stack that
    fires now and then has them (run at once on a stack just deployed, without it: p50
    25 ms, one of 20 0.32 s late; cold starts' lateness is the model's, docs/cost.md)."""
    out = stack["scheduler"]
    scheduler_live(out)
    tag = new_tag()
    ddb, sfn = client("dynamodb"), client("stepfunctions")
    target = ddb.get_item(TableName=out["table"], Key={"pk": {"S": "INVOKER#demo"}})["Item"]
    table = out["firesTables"]["demo"]
    headers = {"x-api-key": out["apiKey"]}
    body = {"publishTime": time.time() + 4, "channel": "demo", "parameters": {"warm": True}}
    status, warm = http("POST", out["url"], body, headers)
    assert status == 201, warm
    eventually(lambda: fire_records(table, [warm["id"]]), timeout=120, interval=1)
    alternative, undo = wait_only_machine(target["target_arn"]["S"], tag)
    try:
        first = float(int(time.time()) + 8)
        ids: dict[str, list[str]] = {"ours": [], "wait_only": []}
        for i in range(messages):
            publish = first + i * 1.25  # fractions .0, .25, .5, .75
            body = {"publishTime": publish, "channel": "demo", "parameters": {"i": i}}
            status, answer = http("POST", out["url"], body, headers)
            assert status == 201, answer
            ids["ours"].append(answer["id"])
            other, at = f"{tag}-{i}", publish + 0.625  # .625, .875, .125, .375
            # a whole second past `at`, and one more: LocalStack's Wait ends up to a
            # second early (never early on AWS, whose Wait truncates the fraction)
            late_at = dt.datetime.fromtimestamp(math.ceil(at) + 1, dt.UTC)
            document = {
                "lateAt": late_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "delivery": {
                    "id": other,
                    "channel": "demo",
                    "parameters": {"i": i},
                    "publishTime": at,
                },
            }
            sfn.start_execution(stateMachineArn=alternative, name=other, input=json.dumps(document))
            ids["wait_only"].append(other)
        result: dict[str, Any] = {"messages": messages}
        for design, wanted in ids.items():
            found = eventually(
                lambda w=wanted: len(f := fire_records(table, w)) == messages and f,
                timeout=120,
                interval=1,
            )
            records = list(found.values())
            result[design] = {
                "fired_once": sum(r["fires"] == 1 for r in records),
                "lateness_s": lateness(records),
            }
        return result
    finally:
        for step in undo:
            step()


AHEAD = 100  # inside the `local` stack's 2-minute window (so STANDBY), cancelled long before


def bench_scheduler_start(stack: dict[str, Any], messages: int = 20) -> dict[str, Any]:
    """Seconds from a registration (before the POST; before the item's write) to its
    execution's start date: the API's own start vs the stream's. Of a message's own
    execution (the clock of one registered too near its time to join its slot's)."""
    with per_message_clock(stack["scheduler"]):
        return _scheduler_start(stack, messages)


def _scheduler_start(stack: dict[str, Any], messages: int) -> dict[str, Any]:
    from exactly_once.handlers.executions import execution_arn

    out = stack["scheduler"]
    headers = {"x-api-key": out["apiKey"]}
    machine, tag = out["stateMachineArn"], new_tag()
    ddb, sfn = client("dynamodb"), client("stepfunctions")
    target = ddb.get_item(TableName=out["table"], Key={"pk": {"S": "INVOKER#demo"}})["Item"]

    def started(message_id: str, timeout: float = 60) -> float:
        [execution] = eventually(lambda: executions(machine, message_id), timeout=timeout)
        return float(execution["startDate"].timestamp())

    def through_the_stream(message_id: str) -> float:
        """A STANDBY item written directly: only the stream starts it. Returns the time
        before the write."""
        item = {
            "pk": {"S": f"MESSAGE#{message_id}"},
            "id": {"S": message_id},
            "status": {"S": "STANDBY"},
            "publish_at": {"N": f"{time.time() + AHEAD:.3f}"},  # stopped below
            "channel": {"S": "demo"},
            "target_arn": target["target_arn"],
            "parameters": {"S": "{}"},
        }
        sent = time.time()
        ddb.put_item(TableName=out["table"], Item=item)
        return sent

    # The stream is live once it starts one (a new mapping polls after minutes). Nothing is
    # cancelled until the end: LocalStack's poller has been seen to hold back the record
    # after a cancelled message's (README, where LocalStack differs).
    theirs = [f"{tag}-live"]
    through_the_stream(theirs[0])
    started(theirs[0], timeout=300)
    seconds: dict[str, list[float]] = {"api": [], "stream": []}
    ours = []
    for i in range(messages):
        body = {"publishTime": time.time() + AHEAD, "channel": "demo"}  # cancelled below
        sent = time.time()
        status, answer = http("POST", out["url"], body, headers)
        assert status == 201, answer
        seconds["api"].append(started(answer["id"]) - sent)
        ours.append(answer["id"])
        theirs.append(f"{tag}-{i}")
        sent = through_the_stream(theirs[-1])
        seconds["stream"].append(started(theirs[-1]) - sent)
    for message_id in ours:
        assert http("DELETE", f"{out['url']}/{message_id}", None, headers)[0] == 200
    for other in theirs:  # the Claim of a missing item fails: never fired
        ddb.delete_item(TableName=out["table"], Key={"pk": {"S": f"MESSAGE#{other}"}})
        sfn.stop_execution(executionArn=execution_arn(machine, other))
    return {
        "messages": messages,
        **{path: quantiles(values) for path, values in seconds.items()},
    }


def bench_scheduler_register(stack: dict[str, Any], messages: int = 1000) -> dict[str, Any]:
    """One client registering `messages` (due in a day: nothing fires), one POST
    /messages each against POST /messages/batch of 100, alternating halves so both meet the
    same machine; seconds and messages per second. Each message by its own key."""
    out = stack["scheduler"]
    headers = {"x-api-key": out["apiKey"]}
    tag, due = new_tag(), time.time() + 86_400
    half = messages // 2

    def body(i: int) -> dict[str, Any]:
        return {"publishTime": due + i, "channel": "demo", "parameters": {"i": i}}

    def one_by_one(start: int, count: int) -> float:
        began = time.perf_counter()
        for i in range(start, start + count):
            status, _ = http(
                "POST", out["url"], body(i), {**headers, "Idempotency-Key": f"{tag}-{i}"}
            )
            assert status == 201, status
        return time.perf_counter() - began

    def batched(start: int, count: int) -> float:
        began = time.perf_counter()
        for first in range(start, start + count, 100):
            entries = [
                {"id": f"e{i}", "idempotencyKey": f"{tag}-{i}", **body(i)}
                for i in range(first, min(first + 100, start + count))
            ]
            status, answer = http("POST", f"{out['url']}/batch", {"entries": entries}, headers)
            assert status == 200 and not answer["failed"], answer
        return time.perf_counter() - began

    quarter = half // 2
    single = one_by_one(0, quarter) + one_by_one(2 * quarter, quarter)
    batch = batched(quarter, quarter) + batched(3 * quarter, quarter)
    return {
        "messages": 2 * half,
        "single_s": single,
        "batch_s": batch,
        "single_per_s": half / single,
        "batch_per_s": half / batch,
        "ratio": batch / single,
    }


def run(stack: dict[str, Any]) -> dict[str, Any]:
    return {
        "scheduler_register": bench_scheduler_register(stack),
        "scheduler_start": bench_scheduler_start(stack),
        "starter": bench_starters(stack),
        "scheduler_idle": bench_scheduler_idle(stack),
        "scheduler": bench_scheduler(stack),
    }
