"""What the scheduler's functions log, in bytes, per invocation and per message: run by
benchmarks/measured.py in an interpreter of its own (moto in-process, Lambda's
environment and context as Lambda gives them). Prints one JSON line:
{function: {"per_invocation": bytes, "per_message": bytes}}, each from two runs of a
different number of messages (the difference is per message, the rest per invocation).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import time
import uuid
from collections.abc import Callable
from typing import Any

os.environ.update(
    AWS_DEFAULT_REGION="us-east-1",
    AWS_ACCESS_KEY_ID="x",
    AWS_SECRET_ACCESS_KEY="x",
    METRICS_COMPONENT="reminders",
    METRICS_NAMESPACE="ExactlyOnce",
    _X_AMZN_TRACE_ID="Root=1-6751a2b3-0123456789abcdef01234567;Parent=53995c3f42cd8ad8;Sampled=0",
)
os.environ.pop("METRICS_DISABLED", None)
os.environ.pop("LOG_LEVEL", None)

from moto import mock_aws

TARGET = "arn:aws:lambda:us-east-1:123456789012:function:send-reminder"


class Context:
    """A Lambda context, as the runtime passes one."""

    def __init__(self, function: str, memory: int) -> None:
        self.function_name = function
        self.memory_limit_in_mb = memory
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:123456789012:function:{function}"
        self.aws_request_id = str(uuid.uuid4())

    def get_remaining_time_in_millis(self) -> int:
        return 600_000


def written(run: Callable[[], Any]) -> int:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run()
    return len(out.getvalue().encode())


def main() -> None:
    from exactly_once.handlers import (
        runtime,
        scheduler,
        scheduler_api,
        scheduler_index,
        scheduler_slots,
    )
    from exactly_once.handlers.settings import encode

    runtime.client("dynamodb").create_table(TableName="messages", **scheduler_index.table_schema())
    runtime.client("dynamodb").put_item(
        TableName="messages", Item={"pk": {"S": "INVOKER#email"}, "target_arn": {"S": TARGET}}
    )
    role = runtime.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")
    machine = runtime.client("stepfunctions").create_state_machine(
        name="reminders-slots",
        definition=json.dumps({"StartAt": "W", "States": {"W": {"Type": "Succeed"}}}),
        roleArn=role["Role"]["Arn"],
    )["stateMachineArn"]
    config = scheduler.SchedulerSettings(
        table="messages", state_machine_arn=machine, window_seconds=3900, late_tolerance_seconds=60
    )
    values = dataclasses.asdict(config)
    os.environ.update(
        scheduler.SchedulerSettings.environment(**{k: encode(v) for k, v in values.items()})
    )
    os.environ["WORKERS_FUNCTION"] = ""  # (a slot of 50 fires alone)
    scheduler_slots.send = lambda *args, **kwargs: None  # the target's own lines are yours

    found: dict[str, dict[str, float]] = {}

    def per(function: str, sizes: tuple[int, int], bytes_of: Callable[[int], int]) -> None:
        small, large = (bytes_of(n) for n in sizes)
        per_message = (large - small) / (sizes[1] - sizes[0])
        found[function] = {
            "per_invocation": small - per_message * sizes[0],
            "per_message": per_message,
        }

    slots: list[tuple[int, list[str]]] = []

    def api(n: int) -> int:  # POST /messages/batch, due in the next seconds
        second = math.floor(time.time()) + 20 + len(slots) * 2
        entries = [
            {"id": f"e{i}", "idempotencyKey": str(uuid.uuid4()), "publishTime": second + 0.5}
            | {"channel": "email", "parameters": {"to": "someone@example.com"}}
            for i in range(n)
        ]
        event = {
            "httpMethod": "POST",
            "resource": "/messages/batch",
            "body": json.dumps({"entries": entries}),
            "requestContext": {"requestTimeEpoch": int(time.time() * 1000)},
        }
        answers: list[Any] = []

        def call() -> None:
            answers.append(scheduler_api.handler(event, Context("reminders-api", 256)))

        size = written(call)
        ids = [s["message"]["id"] for s in json.loads(answers[0]["body"])["successful"]]
        assert len(ids) == n, answers[0]
        slots.append((second, ids))
        return size

    def starter(n: int) -> int:  # a batch of the stream's STANDBY images
        _, ids = slots[-1]  # (the larger batch)
        records = [{"dynamodb": {"NewImage": scheduler.read_item(config, i)}} for i in ids[:n]]
        context = Context("reminders-stream", 256)
        return written(lambda: scheduler.stream_handler({"Records": records}, context))

    def slot(n: int) -> int:  # a slot's invocation, firing its second's messages
        second, ids = slots.pop(0)
        event = {"input": scheduler_slots.slot_input(second), "execution": f"x:{second}"}
        event["retry"] = 0
        for extra in ids[n:]:  # (fired by nobody: not in this slot's count)
            scheduler.cancel(config, extra)
        time.sleep(max(0.0, second + 1 - time.time()))
        context = Context("reminders-slots", 512)
        return written(lambda: scheduler_slots.handler(event, context))

    per("api (batches)", (10, 100), api)
    per("starter", (5, 25), starter)
    per("slot", (5, 50), slot)
    print(json.dumps(found))


if __name__ == "__main__":
    with mock_aws():
        main()
