"""Benchmarks, each measured side by side with its alternative in one run.

    bash scripts/bench          # LocalStack up, the `local` stack deployed, then this file

Writes benchmarks/results.json and README.md. Most run in-process against moto (AWS
calls are counted by botocore's event hooks, so the counts are exact); the starter's
throughput and the scheduler's lateness run through LocalStack (`on_localstack.py`).
Figures are ratios, ours / alternative; times are this machine's.
"""

from __future__ import annotations

import collections
import io
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples" / "etl")]  # and the example transforms
os.environ.update(
    AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench", AWS_DEFAULT_REGION="us-east-1"
)
os.environ.pop("AWS_ENDPOINT_URL", None)

from moto import mock_aws  # noqa: E402

from exactly_once.components import resumable_asl  # noqa: E402
from exactly_once.handlers import runtime  # noqa: E402
from tooling.events import eventbridge  # noqa: E402

CALLS: collections.Counter[str] = collections.Counter()


def counting(service: str) -> Any:
    c = runtime.client(service)
    c.meta.events.register("before-call.*.*", lambda model, **_: CALLS.update([model.name]))
    return c


def table(name: str, key: str = "id", **extra: Any) -> None:
    runtime.client("dynamodb").create_table(
        TableName=name,
        KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": key, "AttributeType": "S"},
            *extra.pop("attributes", []),
        ],
        BillingMode="PAY_PER_REQUEST",
        **extra,
    )


def cold_import(module: str) -> float:
    """Median wall time of a fresh interpreter importing `module` (5 runs), in ms."""
    times = []
    for _ in range(5):
        code = (
            f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
        )
        times.append(float(out.stdout) * 1000)
    return sorted(times)[2]


def bench_starter(events: int = 300) -> dict[str, Any]:
    """Name-dedup starter vs a Powertools DynamoDB-lock dedup in front of the same start."""
    with mock_aws(config={"stepfunctions": {"execute_state_machine": False}}):
        runtime.client.cache_clear()
        role = runtime.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")[
            "Role"
        ]["Arn"]
        machine = runtime.client("stepfunctions").create_state_machine(
            name="m",
            roleArn=role,
            definition=json.dumps(
                {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 99, "End": True}}}
            ),
        )["stateMachineArn"]
        runtime.client("sqs").create_queue(QueueName="dlq")
        table("locks")
        counting("stepfunctions"), counting("dynamodb")
        from exactly_once.handlers import name_dedup
        from exactly_once.handlers.executions import Backend, ReusePolicy

        config = name_dedup.StarterSettings(
            Backend.STEP_FUNCTIONS, machine, "object-key", ReusePolicy.REJECT_DUPLICATE, False
        )
        os.environ["DLQ_URL"] = runtime.client("sqs").get_queue_url(QueueName="dlq")["QueueUrl"]
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )

        layer = DynamoDBPersistenceLayer(table_name="locks")
        layer.client = runtime.client("dynamodb")

        @idempotent_function(
            data_keyword_argument="event",
            persistence_store=layer,
            config=IdempotencyConfig(event_key_jmespath="detail.object.key"),
        )
        def locked_start(event: dict[str, Any]) -> dict[str, Any]:
            response = runtime.client("stepfunctions").start_execution(
                stateMachineArn=machine, input=json.dumps(event)
            )
            return {"executionArn": response["executionArn"]}

        results = {}
        for label, run in (
            ("name_dedup", lambda e: name_dedup.start(e, None, config)),
            ("powertools_lock", lambda e: locked_start(event=e)),
        ):
            CALLS.clear()
            # every event twice
            stream = [eventbridge("b", f"in/{i % (events // 2)}.csv", "v1") for i in range(events)]
            sys_stdout, sys.stdout = sys.stdout, io.StringIO()
            started = time.perf_counter()
            try:
                for event in stream:
                    run(event)
            finally:
                sys.stdout = sys_stdout
            elapsed = time.perf_counter() - started
            results[label] = {
                "aws_calls_per_event": sum(CALLS.values()) / events,
                "events_per_second": events / elapsed,
                "calls": dict(CALLS),
            }
    results["cold_import_ms"] = {
        "name_dedup": cold_import("exactly_once.handlers.name_dedup"),
        "powertools_lock": cold_import("aws_lambda_powertools.utilities.idempotency"),
    }
    return results


def bench_resumable() -> dict[str, Any]:
    rows = []
    for steps in (1, 3, 4, 10):
        rows.append(
            {
                "steps": steps,
                "first_run": [
                    resumable_asl.transitions(steps),
                    resumable_asl.reference_transitions(steps),
                ],
                "rerun_after_failure_at_last_step": [
                    resumable_asl.transitions(steps, skipped=steps - 1),
                    resumable_asl.reference_transitions(steps, skipped=steps - 1, first_run=False),
                ],
            }
        )
    return {"per_step_executed": [2, 3], "per_run_overhead": [3, 4], "table": rows}


def bench_sweep(far_future: int = 10_000, due: int = 200) -> dict[str, Any]:
    from exactly_once.handlers import scheduler, scheduler_index, scheduler_sweep

    with mock_aws():
        runtime.client.cache_clear()
        runtime.client("dynamodb").create_table(
            TableName="messages", **scheduler_index.table_schema()
        )
        config = scheduler.SchedulerSettings(
            "messages", "arn:unused", window_seconds=3600, late_tolerance_seconds=60
        )
        ddb, now = runtime.client("dynamodb"), time.time()
        for i in range(far_future + due):
            at = now + (60 if i < due else 86400 * 30 + i)
            message_id = f"m{i}"
            ddb.put_item(
                TableName="messages",
                Item={
                    "pk": {"S": f"MESSAGE#{message_id}"},
                    "status": {"S": "RESERVED"},
                    "lane": {"S": scheduler_index.lane("RESERVED", message_id)},
                    "publish_at": {"N": str(at)},
                },
            )
        sys_stdout, sys.stdout = sys.stdout, io.StringIO()
        try:
            result = scheduler_sweep.sweep(config, now)
        finally:
            sys.stdout = sys_stdout
    return {
        "far_future": far_future,
        "due": due,
        "items_read": result["read"],
        "read_per_due": result["read"] / due,
        "reference_reads_scan_limit_100": "100 (misses the rest)",
    }


def csv_rows(rows: int) -> bytes:
    return b"id,name,amount\n" + b"".join(b"%d,name-%d,%d.25\n" % (i, i, i) for i in range(rows))


def etl_runs(body: bytes, objects: int, rows: int, rounds: int) -> dict[str, Any]:
    """Each strategy's time for `objects` first deliveries of `body`, against the bare
    transform: the same streaming read, transform and write (handlers.s3_read,
    handlers.s3_publish), no idempotency. Each run in a fresh moto; the variants take
    turns for `rounds` rounds (each round in a rotated order) and each keeps its best (the
    least disturbed) time."""
    from exactly_once.handlers import etl

    best: dict[str, float] = {}
    # "bare-again" is the bare transform once more: its ratio to the bare one is the
    # measurement's own noise, the yardstick for the strategies' ratios
    variants = ["none", "bare-again", *etl.STRATEGIES]
    etl_run("none", body, 1)  # warm up (imports, moto's models) before anything is timed
    for round_ in range(rounds):
        # each round starts with another variant, so none is always first or last
        for strategy in variants[round_:] + variants[:round_]:
            seconds = etl_run(strategy, body, objects)
            best[strategy] = min(seconds, best.get(strategy, seconds))
    results: dict[str, Any] = {
        strategy: {"records_per_second": objects * rows / seconds}
        for strategy, seconds in best.items()
    }
    for strategy in ("bare-again", *etl.STRATEGIES):
        results[strategy]["overhead_ratio"] = best[strategy] / best["none"]
    return results


def etl_run(strategy: str, body: bytes, objects: int) -> float:
    from etl_transforms.csv_jsonl import json_lines

    from exactly_once.handlers import etl
    from exactly_once.handlers.s3_publish import publish
    from exactly_once.handlers.s3_read import open_version
    from tooling.events import notification

    with mock_aws():
        runtime.client.cache_clear()
        s3 = runtime.client("s3")
        s3.create_bucket(Bucket="in-b")
        s3.create_bucket(Bucket="out-b")
        s3.put_bucket_versioning(Bucket="in-b", VersioningConfiguration={"Status": "Enabled"})
        table("control")
        queue = runtime.client("sqs").create_queue(QueueName="dlq")["QueueUrl"]
        etl._POWERTOOLS.clear()
        config = etl.EtlSettings(
            strategy="deterministic" if strategy in ("none", "bare-again") else strategy,  # type: ignore[arg-type]
            output_bucket="out-b",
            output_prefix="out/",
            output_suffix=".jsonl",
            control_table="control",
            dlq_url=queue,
        )
        events = []
        for i in range(objects):
            put = s3.put_object(Bucket="in-b", Key=f"{i}.csv", Body=body)
            events.append(notification("in-b", f"{i}.csv", put["VersionId"], put["ETag"]))

        def transform(source: Any, obj: Any) -> Any:
            return json_lines(source)

        sys_stdout, sys.stdout = sys.stdout, io.StringIO()
        # CPU time of this process: moto runs in it, so this is all the work, and neither
        # LocalStack idling nor another process's burst on the 2 cores counts
        started = time.process_time()
        try:
            for event in events:
                if strategy in ("none", "bare-again"):
                    obj = event["Records"][0]["s3"]["object"]
                    request = {"Bucket": "in-b", "Key": obj["key"], "VersionId": obj["versionId"]}
                    with open_version(s3, request) as source:
                        publish(
                            s3,
                            "out-b",
                            f"out/{obj['key']}.jsonl",
                            json_lines(source),
                            content_type="application/octet-stream",
                        )
                else:
                    etl.transform_once(event, transform, config)
        finally:
            sys.stdout = sys_stdout
        return time.process_time() - started


def etl_redelivery(body: bytes, rounds: int = 3) -> dict[str, Any]:
    """Per strategy: CPU time of a redelivery after completion against the first delivery
    of the same object (`body`), each in a fresh moto; best of `rounds`; and the S3 calls
    the redelivery made."""
    from etl_transforms.csv_jsonl import json_lines

    from exactly_once.handlers import etl
    from tooling.events import notification

    results: dict[str, Any] = {"input_mb": len(body) / 1e6}
    for strategy in etl.STRATEGIES:
        best: dict[str, float] = {}
        calls: list[str] = []

        def called(model: Any, **kwargs: Any) -> None:
            calls.append(model.name)  # noqa: B023 (the redelivery's calls, this strategy's)

        for _ in range(rounds):
            with mock_aws():
                runtime.client.cache_clear()
                s3 = runtime.client("s3")
                for bucket in ("in-b", "out-b"):
                    s3.create_bucket(Bucket=bucket)
                s3.put_bucket_versioning(
                    Bucket="in-b", VersioningConfiguration={"Status": "Enabled"}
                )
                table("control")
                etl._POWERTOOLS.clear()
                config = etl.EtlSettings(
                    strategy=strategy,
                    output_bucket="out-b",
                    output_suffix=".jsonl",
                    control_table="control",
                )
                put = s3.put_object(Bucket="in-b", Key="big.csv", Body=body)
                event = notification("in-b", "big.csv", put["VersionId"], put["ETag"])
                sys_stdout, sys.stdout = sys.stdout, io.StringIO()
                try:
                    for delivery in ("first", "again"):
                        if delivery == "again":
                            calls.clear()
                            s3.meta.events.register("before-call.s3", called)
                        started = time.process_time()
                        etl.transform_once(event, lambda source, obj: json_lines(source), config)
                        seconds = time.process_time() - started
                        best[delivery] = min(seconds, best.get(delivery, seconds))
                finally:
                    sys.stdout = sys_stdout
        results[strategy] = {
            "first_s": best["first"],
            "again_s": best["again"],
            "ratio": best["again"] / best["first"],
            "s3_calls_again": calls,
        }
    return results


def bench_etl() -> dict[str, Any]:
    large_rows = 1_800_000  # ~50 MB of CSV
    large = csv_rows(large_rows)
    return {
        "rows_200": etl_runs(csv_rows(200), objects=60, rows=200, rounds=5),
        "large": {
            "input_mb": len(large) / 1e6,
            **etl_runs(large, objects=1, rows=large_rows, rounds=3),
        },
        "redelivery": etl_redelivery(csv_rows(1_350_000)),  # ~40 MB of CSV
    }


def bench_etl_memory(megabytes: int = 200) -> dict[str, Any]:
    """Peak memory of the ETL transforming one `megabytes` input from LocalStack's S3, in a
    fresh process per way (benchmarks/etl_memory.py): streaming (ours) against reading the
    whole object and building the whole output in memory."""
    from tooling.clients import ENDPOINT, client

    s3 = client("s3")
    for bucket in ("bench-etl-in", "bench-etl-out"):
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket="bench-etl-in", VersioningConfiguration={"Status": "Enabled"})
    rows = megabytes * 1_000_000 // 28
    body = csv_rows(rows)
    put = s3.put_object(Bucket="bench-etl-in", Key="big.csv", Body=body)
    size = len(body)
    del body
    results: dict[str, Any] = {"input_mb": size / 1e6}
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": ENDPOINT,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
    }
    for way in ("streaming", "in-memory"):
        out = subprocess.run(
            [
                sys.executable,
                "benchmarks/etl_memory.py",
                way,
                "bench-etl-in",
                "big.csv",
                put["VersionId"],
                "bench-etl-out",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            check=True,
        )
        results[way] = json.loads(out.stdout.strip().splitlines()[-1])
    results["ratio"] = results["streaming"]["peak_mb"] / results["in-memory"]["peak_mb"]
    return results


def bench_audit_memory(sizes: tuple[int, ...] = (100_000, 1_000_000)) -> dict[str, Any]:
    """Peak memory of an ETL audit of each size of input versions, in a fresh process per
    way (benchmarks/audit_memory.py): the library's SQLite file against sets in memory."""
    results: dict[str, Any] = {}
    for size in sizes:
        for way in ("sqlite", "in-memory"):
            out = subprocess.run(
                [sys.executable, "benchmarks/audit_memory.py", way, str(size)],
                capture_output=True,
                text=True,
                cwd=ROOT,
                check=True,
            )
            results[f"{way} {size}"] = json.loads(out.stdout.strip().splitlines()[-1])
    return results


def audit_rows(a: dict[str, Any]) -> list[str]:
    rows = []
    for key in sorted((k for k in a if k.startswith("sqlite")), key=lambda k: int(k.split()[1])):
        size = int(key.split()[1])
        ours, theirs = a[key], a[f"in-memory {size}"]
        calls = ours["calls"]
        rows.append(
            f"| audit of an ETL, {size:,} input versions (1% lost): peak memory (RSS growth), MB "
            f"| {ours['peak_mb']:.1f} (SQLite file; {calls['s3:list_object_versions']} + "
            f"{calls['s3:list_objects_v2']} list pages, {calls['dynamodb:BatchGetItem']} "
            f"BatchGetItem, {ours['seconds']:.1f} s) | {theirs['peak_mb']:.1f} (every key in "
            f"memory, {theirs['seconds']:.1f} s) | {ours['peak_mb'] / theirs['peak_mb']:.3f} |"
        )
    return rows


def scheduler_rows(sch: dict[str, Any]) -> list[str]:
    """The bursts on LocalStack (the slot clock at full size; slot clock vs one execution
    per message side by side, one run), the model's burst on AWS's quotas, and the cost per
    million by density."""
    from benchmarks import scheduler_model as model

    def outcome(run: dict[str, Any]) -> str:
        return (
            f"{run['fired_once']} / {run['fired_twice_or_more']} / {run['lost']} / {run['early']}"
        )

    full, pair = sch["slot_clock"], sch["side_by_side"]
    n, slot, one = pair["messages"], pair["slot_clock"], pair["per_message"]
    alt = "(one execution per message)"
    late = full["lateness_s"]
    rows = [
        f"| scheduler on LocalStack: {sch['messages']} due in one second, registered in batches "
        f"of 100: fired once / twice / lost / early | {outcome(full)} (slot clock) | - | - |",
        f"| scheduler on LocalStack: {sch['messages']} due in one second: lateness p50 / p99 / "
        f"max, s; state transitions | {late['p50']:.2f} / {late['p99']:.2f} / {late['max']:.2f}; "
        f"{full['transitions']} (slot clock) | - | - |",
        f"| scheduler on LocalStack: {n} due in one second: fired once / twice / lost / early | "
        f"{outcome(slot)} (slot clock) | {outcome(one)} {alt} | - |",
        *[
            f"| scheduler on LocalStack: {n} due in one second: lateness {q}, s | "
            f"{slot['lateness_s'][q]:.2f} | {one['lateness_s'][q]:.2f} {alt} | "
            f"{slot['lateness_s'][q] / max(one['lateness_s'][q], 1e-9):.3f} |"
            for q in ("p50", "p99", "max")
        ],
        f"| scheduler on LocalStack: {n} due in one second: state transitions, counted "
        f"(model: {model.SLOT.transitions_per_execution} / "
        f"{model.PER_MESSAGE.transitions_per_execution * n}) | {slot['transitions']} | "
        f"{one['transitions']} {alt} | {slot['transitions'] / max(one['transitions'], 1):.4f} |",
    ]
    return rows + model_rows()


def model_rows() -> list[str]:
    """The scheduler model's rows (no LocalStack): the burst on AWS's quotas, a cold slot
    by the slot function's memory, the cost per million by density and by registration."""
    from benchmarks import scheduler_model as model

    alt = "(one execution per message)"
    rows = []
    burst = model.burst_table()
    ours = ("slot clock", model.WARMED, next(iter(model.TABLES)))
    for key, row in burst.items():
        if key == ours:
            continue
        rows.append(
            f"| scheduler on AWS's quotas (model): 10,000 due in one second, p50 / p99 s | "
            f"{burst[ours]['p50']:.2f} / {burst[ours]['p99']:.2f} ({', '.join(ours)}) | "
            f"{row['p50']:.2f} / {row['p99']:.2f} ({', '.join(key)}) | "
            f"{burst[ours]['p99'] / row['p99']:.3f} |"
        )
    for density, cost in model.cost_table().items():
        rows.append(
            f"| scheduler: $ per million messages fired at {density} (model, from counted "
            f"calls) | {cost['slot clock']:.2f} (slot clock) | {cost['per message']:.2f} {alt} | "
            f"{cost['slot clock'] / cost['per message']:.3f} |"
        )
    memory = model.memory_table()
    chosen = memory[model.SLOT_MEMORY_MB]
    for size, row in memory.items():
        if size == model.SLOT_MEMORY_MB:
            continue
        rows.append(
            f"| scheduler on AWS's quotas (model fed measured CPU): a cold slot of "
            f"{model.scheduler_slots.CHUNK} messages, lateness first / p99 s; $ per million "
            f"at 10/s | {chosen['first']:.2f} / {chosen['p99']:.2f}; "
            f"{chosen['dollars_at_10_per_s']:.2f} ({model.SLOT_MEMORY_MB} MB, the default) | "
            f"{row['first']:.2f} / {row['p99']:.2f}; {row['dollars_at_10_per_s']:.2f} "
            f"({size} MB) | {chosen['dollars_at_10_per_s'] / row['dollars_at_10_per_s']:.3f} |"
        )
    batch, single = model.REGISTRATION["batches of 100"], model.REGISTRATION["one POST each"]
    rows.append(
        f"| scheduler: $ per million messages registered | {batch:.2f} (batches of 100) | "
        f"{single:.2f} (one POST each) | {batch / single:.3f} |"
    )
    return rows


def localstack_stack() -> dict[str, Any]:
    """The deployed `local` stack's outputs, or exit saying how to get them."""
    from deploy import outputs_path
    from tooling.clients import ENDPOINT

    path = outputs_path("local")
    if not path.exists():
        raise SystemExit(f"no deployed `local` stack ({path}): run `bash scripts/bench`")
    try:
        urllib.request.urlopen(f"{ENDPOINT}/_localstack/health", timeout=3).close()
    except OSError:
        raise SystemExit(f"LocalStack is not up at {ENDPOINT}: run `bash scripts/bench`") from None
    return json.loads(path.read_text())


def commit() -> str:
    """The commit measured: HEAD, marked when the work tree differs from it."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return f"{head}+changes" if git("status", "--porcelain", "--untracked-files=no") else head


def main() -> None:
    """All benchmarks; `run.py etl` re-runs only the ETL ones (each still a side-by-side
    comparison within one run) and keeps the others' last figures, saying which commit
    each part was measured at (`rerun`)."""
    from benchmarks import on_localstack

    path = ROOT / "benchmarks" / "results.json"
    if sys.argv[1:] == ["etl"]:  # needs LocalStack (the memory benchmark), no stack
        results = {**json.loads(path.read_text()), "etl": bench_etl()}
        results["etl_memory"] = bench_etl_memory()
    elif sys.argv[1:] == ["audit"]:  # in-process stand-ins only
        results = {**json.loads(path.read_text()), "audit_memory": bench_audit_memory()}
    elif sys.argv[1:] == ["etl-redelivery"]:  # in-process (moto) only
        results = json.loads(path.read_text())
        results["etl"]["redelivery"] = etl_redelivery(csv_rows(1_350_000))
    elif sys.argv[1:] == ["scheduler-register"]:  # a deployed `local` stack
        results = json.loads(path.read_text())
        register = on_localstack.bench_scheduler_register(localstack_stack())
        results["localstack"]["scheduler_register"] = register
    elif sys.argv[1:] == ["scheduler"]:  # a deployed `local` stack: the scheduler's rows
        results = json.loads(path.read_text())
        stack = localstack_stack()
        # idle first (after a burst its stream lags on LocalStack: its probe of
        # the stream starter waited 300 s in vain), warmed by one unmeasured fire
        results["localstack"]["scheduler_idle"] = on_localstack.bench_scheduler_idle(stack)
        results["localstack"]["scheduler_start"] = on_localstack.bench_scheduler_start(stack)
        results["localstack"]["scheduler"] = on_localstack.bench_scheduler(stack)
    elif sys.argv[1:] == ["scheduler-idle"]:  # a deployed `local` stack
        results = json.loads(path.read_text())
        idle = on_localstack.bench_scheduler_idle(localstack_stack())
        results["localstack"]["scheduler_idle"] = idle
    elif sys.argv[1:] == ["scheduler-start"]:  # a deployed `local` stack
        results = json.loads(path.read_text())
        start = on_localstack.bench_scheduler_start(localstack_stack())
        results["localstack"]["scheduler_start"] = start
    else:
        results = {
            "starter": bench_starter(),
            "resumable": bench_resumable(),
            "sweep": bench_sweep(),
            "etl": bench_etl(),
            "etl_memory": bench_etl_memory(),
            "audit_memory": bench_audit_memory(),
            "localstack": on_localstack.run(localstack_stack()),
            "machine": f"{os.cpu_count()} cores; moto in-process, and LocalStack host mode",
            "commit": commit(),
        }
    if sys.argv[1:]:
        results.setdefault("rerun", {})[sys.argv[1]] = commit()
    path.write_text(json.dumps(results, indent=2))
    reruns = ", ".join(f"`{part}` at {at}" for part, at in results.get("rerun", {}).items())
    s, r, w, e = results["starter"], results["resumable"], results["sweep"], results["etl"]
    m = results["etl_memory"]
    nd, pt = s["name_dedup"], s["powertools_lock"]
    ls_nd, ls_pt = (
        results["localstack"]["starter"]["name_dedup"],
        results["localstack"]["starter"]["powertools_lock"],
    )
    sch = results["localstack"]["scheduler"]
    idle = results["localstack"]["scheduler_idle"]
    start = results["localstack"]["scheduler_start"]
    ours_idle, wait_idle = idle["ours"]["lateness_s"], idle["wait_only"]["lateness_s"]
    lines = [
        "# Benchmarks",
        "",
        "Reproduce: `bash scripts/bench` (starts LocalStack, deploys the `local` stack, runs",
        "`benchmarks/run.py`, which writes `results.json` and this file).",
        f"Machine: {results['machine']}. Ratios are ours / the alternative, measured in the same run.",
        f"Measured at commit {results.get('commit', 'unknown')}"
        + (f"; re-run since: {reruns}." if reruns else "; every row from that run.")
        + " Rows marked (model) are computed by `benchmarks/scheduler_model.py` from the"
        " measured inputs (`bash scripts/bench cpu`), not measured here.",
        "",
        "| benchmark | ours | alternative | ratio |",
        "|---|---|---|---|",
        f"| starter: AWS calls per event (half redeliveries) | {nd['aws_calls_per_event']:.2f} | "
        f"{pt['aws_calls_per_event']:.2f} (Powertools lock) | {nd['aws_calls_per_event'] / pt['aws_calls_per_event']:.2f} |",
        f"| starter: events/s in-process | {nd['events_per_second']:.0f} | {pt['events_per_second']:.0f} | "
        f"{nd['events_per_second'] / pt['events_per_second']:.2f} |",
        f"| starter through LocalStack: deliveries/s, {ls_nd['deliveries']} deliveries of {ls_nd['distinct_events']} events | "
        f"{ls_nd['deliveries_per_second']:.1f} | {ls_pt['deliveries_per_second']:.1f} (Powertools lock, deployed) | "
        f"{ls_nd['deliveries_per_second'] / ls_pt['deliveries_per_second']:.2f} |",
        f"| starter through LocalStack: executions for {ls_nd['distinct_events']} distinct events | {ls_nd['executions']} | "
        f"{ls_pt['executions']} | {ls_nd['executions'] / ls_pt['executions']:.2f} |",
        f"| starter through LocalStack: concurrent twins turned away (in progress), redelivered | "
        f"{ls_nd['turned_away_and_redelivered']} | {ls_pt['turned_away_and_redelivered']} | - |",
        f"| starter through LocalStack: first invoke (cold sandbox), ms | {ls_nd['cold_invoke_ms']:.0f} | "
        f"{ls_pt['cold_invoke_ms']:.0f} | {ls_nd['cold_invoke_ms'] / ls_pt['cold_invoke_ms']:.2f} |",
        f"| starter: cold import, ms | {s['cold_import_ms']['name_dedup']:.0f} | "
        f"{s['cold_import_ms']['powertools_lock']:.0f} | "
        f"{s['cold_import_ms']['name_dedup'] / s['cold_import_ms']['powertools_lock']:.2f} |",
        f"| resumable: transitions per executed step | 2 | 3 (reference) | {2 / 3:.2f} |",
        *[
            f"| resumable: {row['steps']} steps, first run / re-run | {row['first_run'][0]} / "
            f"{row['rerun_after_failure_at_last_step'][0]} | {row['first_run'][1]} / "
            f"{row['rerun_after_failure_at_last_step'][1]} | {row['first_run'][0] / row['first_run'][1]:.2f} |"
            for row in r["table"]
        ],
        f"| sweep: items read for {w['due']} due among {w['far_future']} far-future | {w['items_read']} | "
        f"scan with Limit 100, no paging: 100 read, {w['due'] - 100} missed | {w['read_per_due']:.2f} read per due |",
        *[
            f"| ETL {'bare transform again (the noise floor)' if k == 'bare-again' else k}, {label}: "
            f"records/s | {v['records_per_second']:.0f} | "
            f"{runs['none']['records_per_second']:.0f} (bare transform: same streaming read and "
            f"write, no dedup) | {v['overhead_ratio']:.2f}x |"
            for label, runs in (
                ("60 files of 200 rows", e["rows_200"]),
                (f"one {e['large']['input_mb']:.0f} MB file", e["large"]),
            )
            for k, v in runs.items()
            if k
            in ("bare-again", "conditional-write", "deterministic", "control-record", "powertools")
        ],
        *[
            f"| ETL {k}: a redelivery after completion of one {rd['input_mb']:.0f} MB file, "
            f"CPU s (S3 calls: {', '.join(v['s3_calls_again']) or 'none'}) | "
            f"{v['again_s']:.4f} | {v['first_s']:.2f} (its first delivery) | {v['ratio']:.4f} |"
            for rd in [e["redelivery"]]
            for k, v in rd.items()
            if k != "input_mb"
        ],
        f"| ETL peak memory (RSS growth) for one {m['input_mb']:.0f} MB input, MB | "
        f"{m['streaming']['peak_mb']:.0f} (streaming, {m['streaming']['seconds']:.0f} s) | "
        f"{m['in-memory']['peak_mb']:.0f} (whole input and output in memory, "
        f"{m['in-memory']['seconds']:.0f} s) | {m['ratio']:.3f} |",
        *[
            f"| scheduler on LocalStack: registration to execution start ({start['messages']} "
            f"messages due soon), {q}, ms | {start['api'][q] * 1000:.0f} (started by the API) | "
            f"{start['stream'][q] * 1000:.0f} (by the DynamoDB stream) | "
            f"{start['api'][q] / start['stream'][q]:.2f} |"
            for q in ("p50", "p99")
        ],
        *[
            f"| scheduler on LocalStack, idle and warm ({idle['messages']} messages at whole and "
            f"fractional times, one unmeasured fire first): lateness {q}, ms | {ours_idle[q] * 1000:.0f} | {wait_idle[q] * 1000:.0f} "
            f"(whole-second Wait only) | {ours_idle[q] / wait_idle[q]:.2f} |"
            for q in ("min", "p50", "p99", "max")
        ],
        f"| scheduler on LocalStack, idle: fired once | {idle['ours']['fired_once']} | "
        f"{idle['wait_only']['fired_once']} | - |",
        *[
            f"| scheduler on LocalStack: registering {reg['messages']} messages from one client, "
            f"messages/s | {reg['batch_per_s']:.0f} (POST /messages/batch, 100 each) | "
            f"{reg['single_per_s']:.0f} (one POST each) | {reg['ratio']:.2f} (time) |"
            for reg in [results["localstack"].get("scheduler_register")]
            if reg
        ],
        *scheduler_rows(sch),
        *audit_rows(results.get("audit_memory", {})),
        "",
        "The scheduler's burst lateness on LocalStack is this machine's, not the design's: one",
        "2-core machine runs every Lambda sandbox, LocalStack's Step Functions (one Python",
        "process) and DynamoDB Local, and the demo target has 12 sandboxes (a minute's",
        "timeout: at 10 s, 23 of 1,000 were stopped under that load, each rightly ended",
        "UNKNOWN by its receiver, never applied twice). What AWS would",
        "show is the model's (`benchmarks/scheduler_model.py`: AWS's published quotas, list",
        "prices and per-call latencies as parameters; the counts it prices are counted by",
        "tests, and its transitions per burst are checked against the ones counted here).",
        "Idle, the lateness is the design's: a whole-second Wait must end past publishTime",
        "to never be early; the clock wakes 2 s ahead and sleeps to the millisecond",
        "(`docs/scheduler.md`).",
        "",
        "The ETL rows are CPU time of one process running moto in it, best of rounds in rotated",
        "order. On one 50 MB file every strategy is within the noise floor (the bare transform",
        "against itself): the dedup costs a header, a HEAD or two DynamoDB writes per file,",
        "nothing per row. On 200-row files those per-file calls cost about as much as the",
        "transform itself, hence deterministic's HEAD and the locking strategies' writes show.",
        "The memory row is the RSS growth of a fresh process transforming one object from",
        "LocalStack's S3 (benchmarks/etl_memory.py): streaming holds about two 8 MiB parts.",
        "",
        "The audit rows run `exactly_once.handlers.audit` on stand-ins for S3 and DynamoDB that",
        "page synthetic listings as the services do (benchmarks/audit_memory.py): its memory",
        "stays flat as the inputs grow tenfold; the calls are what a run against AWS makes.",
    ]
    (ROOT / "benchmarks" / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
