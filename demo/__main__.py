"""`python -m demo`: real traffic with injected duplicates through every pattern of a deployed
`local` stack; prints what each pattern produced and exits 1 on any duplicate or loss.

Run it through `bash scripts/demo`, which starts LocalStack and deploys the stack first.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from deploy import outputs_path
from exactly_once.ops.checkpoints import Checkpoints
from tooling import events as s3
from tooling.clients import (
    ENDPOINT,
    api_executions,
    client,
    durable_runs,
    execution_input,
    executions,
    fire_records,
    http,
    iam_report,
    invoke,
    invoke_raw,
    keys,
    lateness,
    new_tag,
    scheduler_live,
    step_calls,
)


@dataclasses.dataclass
class Row:
    pattern: str
    sent: int = 0
    duplicates: int = 0
    produced: int = 0
    note: str = ""
    fault: str = ""  # a failure beyond duplicates and losses (a message fired early)

    @property
    def lost(self) -> int:
        return max(0, self.sent - self.produced)

    @property
    def extra(self) -> int:
        return max(0, self.produced - self.sent)


class Progress:
    """A spinner on stderr while we wait for asynchronous work."""

    def __init__(self, label: str) -> None:
        self.label, self._stop = label, threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if not sys.stderr.isatty():  # a log, not a terminal: one line per phase
            sys.stderr.write(f"... {self.label}\n")
            return self

        def spin() -> None:
            frames, start = "|/-\\", time.monotonic()
            while not self._stop.wait(0.2):
                elapsed = time.monotonic() - start
                sys.stderr.write(f"\r{frames[int(elapsed * 5) % 4]} {self.label} ({elapsed:.0f}s)")
                sys.stderr.flush()
            sys.stderr.write(f"\r✓ {self.label}\n")

        self._thread = threading.Thread(target=spin, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()


def settle(count: Callable[[], int], expected: int, timeout: float = 90, quiet: float = 4) -> int:
    """Wait until `count()` reaches `expected` (or time runs out), then for it to stay still."""
    deadline = time.monotonic() + timeout
    value = count()
    while value < expected and time.monotonic() < deadline:
        time.sleep(1)
        value = count()
    stable_until = time.monotonic() + quiet
    while time.monotonic() < stable_until:
        time.sleep(1)
        if (current := count()) != value:
            value, stable_until = current, time.monotonic() + quiet
    return value


def name_dedup(out: dict[str, Any], objects: int) -> Row:
    row = Row("1 name-dedup starter")
    tag = new_tag()
    machine = out["stateMachineArn"]
    for i in range(objects):
        client("s3").put_object(Bucket=out["bucket"], Key=f"demo/{tag}/{i}.csv", Body=b"x")
    row.sent = objects
    with Progress("name-dedup: first deliveries"):
        settle(lambda: len(executions(machine, tag)), objects, quiet=1)
    events = [execution_input(e["executionArn"])["event"] for e in executions(machine, tag)]
    with Progress("name-dedup: 3 redeliveries per event (Lambda retry, burst, PutEvents)"):
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda e: invoke(out["functionName"], e), events * 2))
        for event in events:
            client("events").put_events(Entries=[s3.rebroadcast(event)])
        row.duplicates = 3 * len(events)
        row.produced = settle(lambda: len(executions(machine, tag)), objects)
    return row


def name_dedup_durable(out: dict[str, Any], objects: int) -> Row:
    """Pattern 1 with the durable-function backend: each object's key runs the demo durable
    function; produced = executions run (its runs table), duplicates would add to it."""
    row = Row("1 ... durable function")
    tag, bucket = new_tag(), out["bucket"]
    prefix = f"{bucket}/demo/{tag}/"
    versions = {}
    for i in range(objects):
        key = f"demo/{tag}/{i}.csv"
        versions[key] = client("s3").put_object(Bucket=bucket, Key=key, Body=b"x")["VersionId"]
    row.sent = objects

    def ran() -> int:
        return sum(durable_runs(out["runsTable"], prefix).values())

    with Progress("name-dedup (durable function): first deliveries"):
        settle(ran, objects, quiet=1)
    events = [s3.eventbridge(bucket, key, version) for key, version in versions.items()]
    with Progress("name-dedup (durable function): 3 concurrent redeliveries per event"):
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda e: invoke(out["functionName"], e), events * 3))
        row.duplicates = 3 * len(events)
        row.produced = settle(ran, objects)
    return row


def api_starter(out: dict[str, Any], objects: int) -> Row:
    row = Row("2 API Gateway starter")
    tag = new_tag()
    machine = out["stateMachineArn"]
    keys = [f"api/{tag}/{i}.csv" for i in range(objects)]
    for key in keys:  # through S3 -> EventBridge -> API Gateway
        client("s3").put_object(Bucket=out["bucket"], Key=key, Body=b"x")
    row.sent = objects

    def started() -> list[dict[str, Any]]:
        return api_executions(machine, *keys)

    with Progress("api starter: S3 deliveries, then 2 direct duplicate POSTs each"):
        settle(lambda: len(started()), objects, quiet=1)
        for execution in started():
            body = execution_input(execution["executionArn"])["body"]
            for _ in range(2):
                status, _ = http("POST", out["url"], body, {"x-api-key": out["apiKey"]})
                row.duplicates += 1
                if status != 409:
                    row.note = f"a duplicate POST answered {status}"
        row.produced = settle(lambda: len(started()), objects)
    return row


# An input each example transform (examples/etl) accepts
ETL_INPUTS = {
    "etl_transforms.csv_jsonl:transform": (".csv", b"id,name,amount\n1,a,2\n"),
    "etl_transforms.jsonl_gzip:transform": (".jsonl", b'{"id": 1, "name": "a"}\n'),
}


def etl(name: str, out: dict[str, Any], objects: int) -> Row:
    row = Row(f"5 ETL {name.removeprefix('etl-')}")
    tag, prefix = new_tag(), out["inputPrefix"]
    suffix, body = ETL_INPUTS[out["transform"]]
    events = []
    for i in range(objects):
        key = f"{prefix}in/{tag}/{i}{suffix}"
        put = client("s3").put_object(Bucket=out["inputBucket"], Key=key, Body=body)
        events.append(s3.notification(out["inputBucket"], key, put["VersionId"], put["ETag"]))
    row.sent = objects
    with Progress(f"{name}: S3 deliveries plus 2 concurrent redeliveries each"):
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda e: invoke_raw(out["functionName"], e), events * 2))
        row.duplicates = len(results)
        written = f"out/{prefix}in/{tag}/"
        row.produced = settle(lambda: len(keys(out["outputBucket"], written)), objects)
    return row


def scheduler(out: dict[str, Any], messages: int) -> Row:
    row = Row("3 scheduler")
    with Progress("scheduler: waiting for the stream starter to be live"):
        scheduler_live(out)
    headers = {"x-api-key": out["apiKey"]}
    # Whole and fractional publish times, half a second apart: the Wait counts whole
    # seconds, the slot function the fraction.
    publish = math.ceil(time.time()) + 10
    ids = []
    for i in range(messages):
        body = {"publishTime": publish + i * 0.5, "channel": "demo", "parameters": {"i": i}}
        key = {"Idempotency-Key": f"demo-{new_tag()}"}
        for attempt in range(2):  # every registration retried once, as a client would
            status, answer = http("POST", out["url"], body, {**headers, **key})
            row.duplicates += attempt
            if status not in (200, 201):
                row.note = f"registration answered {status}: {answer}"
        ids.append(answer["id"])
    row.sent = messages
    fires_table = out["firesTables"]["demo"]
    with Progress("scheduler: waiting for every message to fire"):
        settle(lambda: len(fire_records(fires_table, ids)), messages, timeout=120)
    records = fire_records(fires_table, ids)
    row.produced = sum(int(r["fires"]) for r in records.values())
    if late := lateness(records.values()):
        row.note = "lateness (target's clock) " + ", ".join(
            f"{name} {seconds * 1000:.0f} ms" for name, seconds in late.items()
        )
        if late["min"] < 0:
            row.fault = "a message fired before its time"
    return row


def resumable(out: dict[str, Any], runs: int) -> Row:
    row = Row("4 resumable workflow")
    workflow = Checkpoints(out["table"], out["stateMachineArn"], ENDPOINT)
    sfn = client("stepfunctions")

    def finish(arn: str) -> str:
        while (status := sfn.describe_execution(executionArn=arn)["status"]) == "RUNNING":
            time.sleep(0.5)
        return status

    first_step, step_runs = out["steps"][0], 0
    with Progress("resumable: runs failing at step 3, then re-runs from the top"):
        for _ in range(runs):
            key = new_tag()
            document = {"orderId": key, "failAt": out["steps"][2]}
            failed = workflow.rerun(key, document)
            duplicate = workflow.rerun(key, document)  # a duplicate start while it runs
            row.duplicates += 1
            if duplicate.status != "DUPLICATE":
                row.note = f"a duplicate start of {key} was not recognised"
            finish(failed.execution_arn)
            done = workflow.rerun(key, {"orderId": key})
            if finish(done.execution_arn) != "SUCCEEDED":
                row.note = f"re-run of {key} did not succeed"
                continue
            step_runs += step_calls(out["counterTable"], key, [first_step])[first_step]
    row.sent, row.produced = runs, step_runs
    row.note = row.note or f"step '{first_step}' ran {step_runs} times for {runs} workflows"
    return row


def resumable_durable(out: dict[str, Any], runs: int) -> Row:
    """Pattern 4 as a durable function: the same failing-then-resumed runs, started by
    named asynchronous invokes; a second start under the same name is Lambda's."""
    row = Row("4 ... durable function")
    lam = client("lambda")

    def start(name: str, document: dict[str, Any]) -> str:
        answer = lam.invoke(
            FunctionName=out["durableFunctionArn"],
            InvocationType="Event",
            DurableExecutionName=name,
            Payload=json.dumps(document),
        )
        return str(answer["DurableExecutionArn"])

    def finish(arn: str) -> str:
        while (status := lam.get_durable_execution(DurableExecutionArn=arn)["Status"]) == (
            "RUNNING"
        ):
            time.sleep(0.5)
        return str(status)

    first_step, step_runs = out["steps"][0], 0
    with Progress("resumable (durable function): runs failing at step 3, then re-runs"):
        for _ in range(runs):
            key = new_tag()
            document = {"orderId": key, "failAt": out["steps"][2]}
            failed = start(f"{key}-1", document)
            row.duplicates += 1  # the same start again while it runs: the same execution
            if start(f"{key}-1", document) != failed:
                row.note = f"a duplicate start of {key} was not recognised"
            finish(failed)
            if finish(start(f"{key}-2", {"orderId": key})) != "SUCCEEDED":
                row.note = f"re-run of {key} did not succeed"
                continue
            step_runs += step_calls(out["counterTable"], key, [first_step])[first_step]
    row.sent, row.produced = runs, step_runs
    row.note = row.note or f"step '{first_step}' ran {step_runs} times for {runs} workflows"
    return row


def watched(out: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, outputs) of every component with alarms, the ETLs one by one."""
    for label, value in sorted(out.items()):
        if isinstance(value, dict) and "alarmNames" in value:
            yield label, value
        elif label == "etl":
            for name, etl_out in sorted(value.items()):
                yield f"etl {name}", etl_out


def watching(out: dict[str, Any]) -> None:
    """Where each component's dashboard is, and its alarms' states now (docs/operations.md).
    A DLQ alarm may be in ALARM after the demo: the bad-input rows park events there."""
    cloudwatch = client("cloudwatch")
    region = out.get("region") or "us-east-1"
    print("\nwatching: each component's alarms by state, and its dashboard")
    for label, component in watched(out):
        names = component["alarmNames"]
        alarms = cloudwatch.describe_alarms(AlarmNames=names)["MetricAlarms"] if names else []
        states = collections.Counter(a["StateValue"] for a in alarms)
        firing = [a["AlarmName"] for a in alarms if a["StateValue"] == "ALARM"]
        summary = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
        link = (
            f"https://console.aws.amazon.com/cloudwatch/home?region={region}"
            f"#dashboards/dashboard/{component['dashboardName']}"
        )
        print(f"  {label:<22} {summary:<12} {link}")
        for name in firing:
            print(f"  {'':<22} ALARM: {name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="local")
    parser.add_argument("--objects", type=int, default=10)
    args = parser.parse_args(argv)
    path = outputs_path(args.stack)
    if not path.exists():
        raise SystemExit(
            f"stack {args.stack!r} is not deployed: run `python -m deploy up --stack {args.stack}`"
        )
    out = json.loads(path.read_text())
    denied_before = iam_report().get("totals", {}).get("denied", 0)
    rows = [
        name_dedup(out["nameDedup"], args.objects),
        name_dedup_durable(out["nameDedupDurable"], args.objects),
        api_starter(out["apiStarter"], args.objects),
        scheduler(out["scheduler"], args.objects),
        resumable(out["resumable"], 3),
        resumable_durable(out["resumableDurable"], 3),
        *[etl(name, etl_out, args.objects) for name, etl_out in sorted(out["etl"].items())],
    ]
    columns = ("sent", 6), ("dupes in", 10), ("produced", 10), ("suppressed", 12), ("lost", 6)
    header = f"{'pattern':<26}" + "".join(f"{c:>{w}}" for c, w in columns) + f"{'extra':>7}  note"
    print("\n" + header + "\n" + "-" * len(header))
    for r in rows:
        suppressed = r.duplicates - r.extra
        print(
            f"{r.pattern:<26}{r.sent:>6}{r.duplicates:>10}{r.produced:>10}{suppressed:>12}"
            f"{r.lost:>6}{r.extra:>7}  {r.note}"
        )
    watching(out)
    bad = [r.pattern for r in rows if r.lost or r.extra]
    bad += [f"{r.pattern} ({r.fault})" for r in rows if r.fault]
    iam = iam_report()
    if iam["mode"] == "off":
        print("\nIAM: not enforced (EXACTLY_ONCE_IAM=off)")
    else:
        denied = iam["totals"]["denied"] - denied_before
        print(f"\nIAM ({iam['mode']}): {denied} calls denied during the demo")
        if denied:
            bad.append("IAM (calls denied)")
    print(
        "\n" + (f"FAILED: {', '.join(bad)}" if bad else "exactly once: no duplicate, nothing lost")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
