"""Clients for a LocalStack deployment and the waiting helpers the e2e tests and the demo share."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import boto3

ENDPOINT = os.environ.get("LOCALSTACK_URL", "http://127.0.0.1:4566")
T = TypeVar("T")


@functools.cache
def client(service: str, config: Any = None) -> Any:
    """A client of LocalStack. `config`: botocore's Config for it, by default one that
    times a stalled request out and retries it (LocalStack on 2 cores can stall one under
    load): right for reads and idempotent writes, never for a synchronous Invoke (`invoke`)."""
    from botocore.config import Config

    # Service names are dynamic here; boto3-stubs type clients per literal name.
    return boto3.client(  # type: ignore[call-overload]
        service,
        endpoint_url=ENDPOINT,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=config or Config(read_timeout=20, retries={"max_attempts": 5, "mode": "standard"}),
    )


@functools.cache
def invoker() -> Any:
    """The Lambda client for synchronous invokes: each sent once (a resent Invoke runs the
    function again beside the first) and waited for longer than any test's invocation runs
    (a slot clock invoked half a minute early is the longest, under a minute), yet not
    Lambda's 900 s, so a stalled LocalStack fails the test in minutes. With `client`'s 20 s read
    timeout and retries, a slot clock invoked early ran past 20 s, was invoked again beside
    itself, and the test read the second run's answer (it found its messages claimed by
    the first)."""
    from botocore.config import Config

    return client(
        "lambda",
        Config(read_timeout=300, connect_timeout=10, retries={"total_max_attempts": 1}),
    )


def eventually(probe: Callable[[], T], timeout: float = 90, interval: float = 0.3) -> T:
    """The first truthy result of `probe` within `timeout` seconds, else AssertionError. The
    timeout is a breakage bound, never a speed check: generous, for a loaded CI machine."""
    deadline = time.monotonic() + timeout
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s (last: {result!r})")
        time.sleep(interval)


def steady(probe: Callable[[], T], seconds: float = 4, interval: float = 0.5) -> T:
    """`probe`'s value once it has not changed for `seconds` (e.g. no late duplicate)."""
    value = probe()
    stable_since = time.monotonic()
    while time.monotonic() - stable_since < seconds:
        time.sleep(interval)
        current = probe()
        if current != value:
            value, stable_since = current, time.monotonic()
    return value


def executions(state_machine_arn: str, containing: str = "") -> list[dict[str, Any]]:
    paginator = client("stepfunctions").get_paginator("list_executions")
    found = []
    for page in paginator.paginate(stateMachineArn=state_machine_arn):
        found += [e for e in page["executions"] if containing in e["name"]]
    return found


def api_executions(state_machine_arn: str, *keys: str, attempts: int = 4) -> list[dict[str, Any]]:
    """The API Gateway starter's executions for `keys` (their first `attempts` attempts): its
    names encode keys that are not [0-9A-Za-z_-] (components/api_templates.py)."""
    from exactly_once.components.api_templates import execution_name

    names = {execution_name(key, attempt) for key in keys for attempt in range(attempts)}
    return [e for e in executions(state_machine_arn) if e["name"] in names]


def states_entered(execution_arn: str) -> list[str]:
    """The names of the states an execution entered, in order."""
    paginator = client("stepfunctions").get_paginator("get_execution_history")
    return [
        event["stateEnteredEventDetails"]["name"]
        for page in paginator.paginate(executionArn=execution_arn)
        for event in page["events"]
        if event["type"].endswith("StateEntered")
    ]


def execution_input(execution_arn: str) -> dict[str, Any]:
    return json.loads(
        client("stepfunctions").describe_execution(executionArn=execution_arn)["input"]
    )


def invoke(function_name: str, event: Any) -> dict[str, Any]:
    """A synchronous invoke; returns the parsed payload, raising on a function error."""
    response = invoker().invoke(FunctionName=function_name, Payload=json.dumps(event))
    payload = json.loads(response["Payload"].read() or b"null")
    if response.get("FunctionError"):
        raise AssertionError(f"{function_name} failed: {payload}")
    return payload


def dead_letters(queue_url: str, *tags: str, wait: float = 1) -> list[dict[str, Any]]:
    """The queue's messages naming any of `tags` (bodies parsed as JSON when they are), taken
    out of it. Tests run side by side and share the queues: every other message is left
    where it was, hidden only while this read pages past it."""
    sqs = client("sqs")
    mine: list[dict[str, Any]] = []
    others: list[str] = []
    try:
        while True:
            response = sqs.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=10,
                WaitTimeSeconds=int(wait),
                VisibilityTimeout=30,
            )
            batch = response.get("Messages", [])
            if not batch:
                return mine
            for message in batch:
                body = message["Body"]
                if not any(tag in body for tag in tags):
                    others.append(message["ReceiptHandle"])
                    continue
                try:
                    mine.append(json.loads(body))
                except json.JSONDecodeError:
                    mine.append({"raw": body})
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
    finally:
        for handle in others:
            sqs.change_message_visibility(
                QueueUrl=queue_url, ReceiptHandle=handle, VisibilityTimeout=0
            )


def dead_lettered(
    queue_url: str, *tags: str, count: int, timeout: float = 90
) -> list[dict[str, Any]]:
    """`dead_letters` naming `tags`, gathered as they arrive until there are `count`."""
    found: list[dict[str, Any]] = []

    def enough() -> bool:
        found.extend(dead_letters(queue_url, *tags))
        return len(found) >= count

    eventually(enough, timeout=timeout)
    return found


def log_lines(function_name: str) -> list[str]:
    """The function's log lines, from its LoggingConfig group (where AWS, and LocalStack
    with localstack/host_executor's lambda_logs hook, write them)."""
    logs = client("logs")
    config = client("lambda").get_function_configuration(FunctionName=function_name)
    group = config.get("LoggingConfig", {}).get("LogGroup") or f"/aws/lambda/{function_name}"
    lines: list[str] = []
    try:
        streams = logs.describe_log_streams(logGroupName=group)["logStreams"]
    except logs.exceptions.ResourceNotFoundException:
        return lines
    for stream in streams:
        events = logs.get_log_events(logGroupName=group, logStreamName=stream["logStreamName"])
        lines += [e["message"] for e in events["events"]]
    return lines


def metric_points(
    component: str, pattern: str, metric: str, statistic: str, minutes: int, period: int = 60
) -> list[float]:
    """A handler metric's `statistic` per `period` over the last `minutes` (namespace
    ExactlyOnce, dimensions Component and Pattern: handlers/metrics.py)."""
    import datetime as dt

    now = dt.datetime.now(dt.UTC)
    answer = client("cloudwatch").get_metric_statistics(
        Namespace="ExactlyOnce",
        MetricName=metric,
        Dimensions=[
            {"Name": "Component", "Value": component},
            {"Name": "Pattern", "Value": pattern},
        ],
        StartTime=now - dt.timedelta(minutes=minutes),
        EndTime=now + dt.timedelta(minutes=1),
        Period=period,
        Statistics=[statistic],
    )
    return [float(point[statistic]) for point in answer["Datapoints"]]


def new_tag() -> str:
    """A short unique id for one test's objects; short enough to survive in execution names."""
    return uuid.uuid4().hex[:12]


def http(
    method: str, url: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """(status, parsed JSON body or text) for a request to an API on LocalStack."""
    import urllib.error
    import urllib.request

    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        status, text = error.code, error.read().decode()
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


def invoke_raw(function_name: str, event: Any) -> tuple[bool, Any]:
    """(succeeded, parsed payload) of a synchronous invoke."""
    response = invoker().invoke(FunctionName=function_name, Payload=json.dumps(event))
    payload = json.loads(response["Payload"].read() or b"null")
    return not response.get("FunctionError"), payload


def keys(bucket: str, prefix: str) -> list[str]:
    paginator = client("s3").get_paginator("list_objects_v2")
    return [
        o["Key"]
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix)
        for o in page.get("Contents", [])
    ]


def _fire_fields(item: dict[str, Any]) -> dict[str, float]:
    fields = ("fires", "fired_at", "publish_time", "repeats", "late_on_arrival")
    return {k: float(item.get(k, {"N": "0"})["N"]) for k in fields}


def fire_record(table: str, message_id: str) -> dict[str, float] | None:
    """The demo scheduler target's record of one message (demo/functions/demo_target.py):
    fires, fired_at, publish_time, repeats (suppressed repeat invokes); None if unfired."""
    key = {"pk": {"S": f"fired#{message_id}"}}
    item = client("dynamodb").get_item(TableName=table, Key=key, ConsistentRead=True)
    return _fire_fields(item["Item"]) if "Item" in item else None


def fire_records(table: str, ids: Iterable[str]) -> dict[str, dict[str, float]]:
    """The fire records of these message ids that exist, by id, in one paginated scan."""
    wanted = {f"fired#{i}" for i in ids}
    pages = client("dynamodb").get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    return {
        item["pk"]["S"].removeprefix("fired#"): _fire_fields(item)
        for page in pages
        for item in page["Items"]
        if item["pk"]["S"] in wanted
    }


def quantiles(values: Iterable[float]) -> dict[str, float]:
    """min, p50, p99 and max (nearest rank: with fewer than 100 values p99 is the max)."""
    ordered = sorted(values)
    if not ordered:
        return {}
    rank = max(0, math.ceil(len(ordered) * 0.99) - 1)
    return {
        "min": ordered[0],
        "p50": ordered[len(ordered) // 2],
        "p99": ordered[rank],
        "max": ordered[-1],
    }


def lateness(records: Iterable[dict[str, float]]) -> dict[str, float]:
    """Seconds from publishTime to the target's own clock at the fire (`quantiles`)."""
    return quantiles(r["fired_at"] - r["publish_time"] for r in records)


@contextlib.contextmanager
def fault(
    operation: str, error: str, times: int, contains: list[str]
) -> Iterator[Callable[[], int]]:
    """Arm a fault (localstack/host_executor/host_executor/faults.py): the next `times`
    calls to `operation` whose body holds every string of `contains` answer `error`.
    Yields a probe of how many were injected so far; disarms it on exit (only it: other
    tests may run beside this one, their own faults armed)."""
    url = f"{ENDPOINT}/_localstack/exactly-once/faults"
    rule = {"operation": operation, "error": error, "times": times, "contains": contains}
    status, armed = http("POST", url, rule)
    assert status == 201, f"fault injection is not available at {url}: {status} {armed}"

    def injected() -> int:
        rules = http("GET", url)[1]["rules"]
        return times - sum(r["times"] for r in rules if r["id"] == armed["id"])

    try:
        yield injected
    finally:
        http("DELETE", f"{url}?id={armed['id']}")


def batch_entries(times: list[float], channel: str = "demo") -> list[dict[str, Any]]:
    """POST /messages/batch entries, one per publish time, each by its own fresh key."""
    tag = new_tag()
    return [
        {
            "id": f"e{i}",
            "idempotencyKey": f"{tag}-{i}",
            "publishTime": at,
            "channel": channel,
            "parameters": {"i": i},
        }
        for i, at in enumerate(times)
    ]


def scheduler_live(out: dict[str, Any], timeout: float = 300) -> None:
    """Wait until the scheduler's stream starter is live. A new event source mapping starts
    polling a while after it is created (~2 min seen on LocalStack; minutes on AWS too); it
    reads from the stream's start, so messages it should start meanwhile start late. The
    probe is due within the window, so the API starts its execution itself; it is
    cancelled at once (its claim finds it CANCELLED: it never fires), and the stream is live
    once the starter has logged the probe's record (a duplicate start)."""
    headers = {"x-api-key": out["apiKey"]}
    body = {"publishTime": time.time() + 60, "channel": next(iter(out["firesTables"]))}
    status, probe = http("POST", out["url"], body, headers)
    assert status == 201 and probe["status"] == "STANDBY", f"scheduler probe: {status} {probe}"
    assert http("DELETE", f"{out['url']}/{probe['id']}", None, headers)[0] == 200
    eventually(
        lambda: any(probe["id"] in line for line in log_lines(out["starterFunction"])),
        timeout=timeout,
        interval=2,
    )


IAM_REPORT_URL = f"{ENDPOINT}/_localstack/exactly-once/iam"


def iam_report() -> dict[str, Any]:
    """LocalStack's IAM enforcement report (localstack/host_executor/host_executor/iam.py);
    {"mode": "off"} when enforcement is not loaded."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(IAM_REPORT_URL, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return {"mode": "off"}
        raise


def durable_runs(runs_table: str, prefix: str) -> dict[str, int]:
    """Executions the demo durable function ran (demo/durable.py), per key under `prefix`."""
    pages = client("dynamodb").get_paginator("scan").paginate(TableName=runs_table)
    found = {}
    for page in pages:
        for item in page["Items"]:
            key = item["pk"]["S"].removeprefix("runs#")
            if item["pk"]["S"].startswith("runs#") and key.startswith(prefix):
                found[key] = int(item["runs"]["N"])
    return found


def step_calls(counter_table: str, key: str, steps: Iterable[str]) -> dict[str, int]:
    """How often each demo step ran for `key` (demo/functions/demo_steps.py counts them)."""
    counts = {}
    for step in steps:
        item = (
            client("dynamodb")
            .get_item(TableName=counter_table, Key={"pk": {"S": f"{key}#{step}"}})
            .get("Item")
        )
        counts[step] = int(item["calls"]["N"]) if item else 0
    return counts
