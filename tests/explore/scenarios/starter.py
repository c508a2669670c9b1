"""Pattern 1, the name-dedup starter: one execution per key, whatever fails where; a
redelivery of a started key is a DUPLICATE (never a dead letter); two different keys are
never one execution, however alike (keys drawn per schedule: long shared prefixes, the
characters a name cannot hold, keys that look like an attempt's name)."""

from __future__ import annotations

import json
import os
import random
from typing import Any

from exactly_once.handlers import executions, name_dedup, names, runtime
from tests.explore.faults import Call, json_response
from tests.explore.scenarios.base import (
    ARN,
    WAIT,
    Delivery,
    Scenario,
    Verdict,
    World,
    unexcused_failures,
)
from tooling import events

BUCKET = "uploads"


def key_pair(rng: random.Random, tag: str) -> tuple[str, str]:
    """Two different object keys a careless name derivation would take for one."""
    long = "x" * rng.randint(60, 120)
    pairs = [
        (f"in/{tag}/{long}a.csv", f"in/{tag}/{long}b.csv"),  # past the name's length
        (f"in/{tag} a.csv", f"in/{tag}_a.csv"),  # a character a name cannot hold
        (f"in/{tag}/é.csv", f"in/{tag}/è.csv"),  # both become '_'
        (f"in/{tag}/a.csv", f"in/{tag}/a.csv-r1"),  # one looks like the other's next attempt
        (f"in/{tag}/a.csv", f"in/{tag}/A.csv"),  # case
        (f"in/{tag}/" + "é" * rng.randint(30, 50), f"in/{tag}/" + "è" * rng.randint(30, 50)),
    ]
    return pairs[rng.randrange(len(pairs))]


def check_starts(
    deliveries: list[Delivery],
    started: int,
    wanted: int,
    what: str,
    started_before_again: int = 0,
) -> list[str]:
    """`wanted` executions for the key once any delivery succeeded, never more; the
    redelivery after all that (`again`) answers DUPLICATE if they had all started."""
    violations = []
    delivered = any(d.ok for d in deliveries)
    if started > wanted:
        violations.append(f"{started} executions for {what} (want {wanted})")
    elif started < wanted and delivered:
        violations.append(f"lost: {started} executions for {what} though a delivery succeeded")
    for delivery in deliveries:
        answer = delivery.answer if delivery.ok else {}
        if answer.get("status") == "REJECTED":
            violations.append(f"a good event was dead-lettered ({delivery.who}): {answer}")
    again = [d for d in deliveries if d.who == "again" and d.ok]
    done = started_before_again >= wanted  # the work had started before the redelivery came
    if again and done and again[0].answer.get("status") != "DUPLICATE":
        violations.append(f"a redelivery of a started key answered {again[0].answer}")
    return violations


class StarterSteps(Scenario):
    """The Step Functions backend."""

    def __init__(self, policy: str = "REJECT_DUPLICATE") -> None:
        self.policy = executions.ReusePolicy(policy)
        self.name = f"1 starter (step-functions, {policy})"

    def clients(self) -> list[Any]:
        return [runtime.client(s) for s in ("stepfunctions", "sqs")]

    def setup(self) -> None:
        iam = runtime.client("iam")
        self.role = iam.create_role(RoleName="explore", AssumeRolePolicyDocument="{}")["Role"][
            "Arn"
        ]
        self.dlq = runtime.client("sqs").create_queue(QueueName="starter-dlq")["QueueUrl"]

    def run(self, world: World) -> Verdict:
        os.environ["DLQ_URL"] = self.dlq
        sfn = runtime.client("stepfunctions")
        tag = world.tag
        machine = world.quietly(
            lambda: sfn.create_state_machine(
                name=f"explored-{tag}", definition=json.dumps(WAIT), roleArn=self.role
            )["stateMachineArn"]
        )
        config = name_dedup.StarterSettings(
            backend=executions.Backend.STEP_FUNCTIONS,
            target_arn=machine,
            key_strategy="object-key",
            reuse_policy=self.policy,
            hide_key=False,
        )
        key, other = key_pair(world.rng, tag)
        if self.policy == executions.ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY:
            # an earlier run of this key failed: the policy re-runs it once, as `-r1`
            def failed_run() -> None:
                arn = sfn.start_execution(
                    stateMachineArn=machine,
                    name=names.execution_name(f"{BUCKET}/{key}"),
                    input=json.dumps({"key": f"{BUCKET}/{key}"}),
                )["executionArn"]
                sfn.stop_execution(executionArn=arn)

            world.quietly(failed_run)

        def started() -> dict[str, list[str]]:
            """The machine's executions, by the key their input names."""
            found: dict[str, list[str]] = {}
            listed = world.quietly(lambda: sfn.list_executions(stateMachineArn=machine))
            for execution in listed["executions"]:
                described = world.quietly(
                    lambda e=execution: sfn.describe_execution(executionArn=e["executionArn"])
                )
                found.setdefault(json.loads(described["input"])["key"], []).append(
                    execution["name"]
                )
            return found

        unfounded: list[str] = []

        def handler(event: Any, context: Any) -> Any:
            answer = name_dedup.start(event, context, config)
            if answer.get("status") == "DUPLICATE":
                names_now = [n for found in started().values() for n in found]
                if answer["name"] not in names_now:
                    unfounded.append(f"DUPLICATE of {answer['name']}, which never ran")
            return answer

        function = world.lambdas.register(ARN.format("lambda", "function:starter"), handler)
        first = events.eventbridge(BUCKET, key, "v1")
        before: list[int] = []
        deliveries = self.deliveries(
            world,
            function,
            first,
            name_dedup.unusable.cache_clear,
            before_again=lambda: before.append(len(started().get(f"{BUCKET}/{key}", []))),
        )
        second = self.deliver(
            world, "other", function, events.eventbridge(BUCKET, other, "v1"), "r-other"
        )
        wanted = 1 if self.policy == executions.ReusePolicy.REJECT_DUPLICATE else 2

        def verdict() -> list[str]:
            found = started()
            return (
                unfounded
                + check_starts(
                    deliveries, len(found.get(f"{BUCKET}/{key}", [])), wanted, key, before[0]
                )
                + check_starts([second], len(found.get(f"{BUCKET}/{other}", [])), 1, other)
                + unexcused_failures(world, [*deliveries, second])
            )

        return verdict


# -- pattern 1 on a durable function ---------------------------------------------------------
class Durable:
    """Lambda's durable-execution API as its developer guide describes it ("Idempotency"):
    a new DurableExecutionName starts an execution; the same name and payload while it
    runs answers that execution; anything else is DurableExecutionAlreadyStartedException
    (the name is kept for the function's retention). Executions end when the scenario says
    (`end`). A model on the explorer's network."""

    def __init__(self, function_arn: str) -> None:
        self.function_arn = function_arn
        self.executions: dict[str, dict[str, str]] = {}

    def answer(self, call: Call, request: Any) -> Any:
        if call.service != "lambda":
            return None
        params = call.params
        if call.operation == "GetFunctionConfiguration":
            body = {"FunctionName": "durable", "DurableConfig": {"RetentionPeriodInDays": 14}}
            return json_response(request.url, 200, body)
        if call.operation == "Invoke" and params.get("DurableExecutionName"):
            name = params["DurableExecutionName"]
            payload = params["Payload"]
            payload = payload if isinstance(payload, str) else payload.decode()
            found = self.executions.get(name)
            if found is None:
                arn = f"{self.function_arn}/durable-execution/{name}/1"
                self.executions[name] = {"payload": payload, "status": "RUNNING", "arn": arn}
                return json_response(request.url, 202, b"", {"X-Amz-Durable-Execution-Arn": arn})
            if found["status"] == "RUNNING" and found["payload"] == payload:
                return json_response(
                    request.url, 202, b"", {"X-Amz-Durable-Execution-Arn": found["arn"]}
                )
            body = {"__type": "DurableExecutionAlreadyStartedException", "message": name}
            return json_response(
                request.url,
                409,
                body,
                {"x-amzn-ErrorType": "DurableExecutionAlreadyStartedException"},
            )
        if call.operation == "ListDurableExecutionsByFunction":
            name = params.get("DurableExecutionName")
            listed = [
                {"DurableExecutionName": n, "DurableExecutionArn": e["arn"], "Status": e["status"]}
                for n, e in self.executions.items()
                if n == name
            ]
            return json_response(request.url, 200, {"DurableExecutions": listed})
        return None

    def end(self, status: str = "SUCCEEDED") -> None:
        for execution in self.executions.values():
            if execution["status"] == "RUNNING":
                execution["status"] = status


class StarterDurable(Scenario):
    name = "1 starter (durable-function)"

    def clients(self) -> list[Any]:
        return [runtime.client(s) for s in ("lambda", "sqs")]

    def setup(self) -> None:
        self.dlq = runtime.client("sqs").create_queue(QueueName="durable-dlq")["QueueUrl"]

    def run(self, world: World) -> Verdict:
        os.environ["DLQ_URL"] = self.dlq
        target = ARN.format("lambda", f"function:durable-{world.tag}:1")
        durable = Durable(target)
        world.injector.models.insert(0, durable.answer)
        config = name_dedup.StarterSettings(
            backend=executions.Backend.DURABLE_FUNCTION,
            target_arn=target,
            key_strategy="object-key",
            reuse_policy=executions.ReusePolicy.REJECT_DUPLICATE,
            hide_key=False,
        )
        key, other = key_pair(world.rng, world.tag)
        unfounded: list[str] = []

        def handler(event: Any, context: Any) -> Any:
            answer = name_dedup.start(event, context, config)
            if answer.get("status") == "DUPLICATE" and answer["name"] not in durable.executions:
                unfounded.append(f"DUPLICATE of {answer['name']}, which never ran")
            return answer

        function = world.lambdas.register(ARN.format("lambda", "function:starter"), handler)

        def ended_meanwhile() -> None:  # the execution runs to its end before a retry
            durable.end()
            name_dedup.unusable.cache_clear()

        def runs(key: str) -> int:
            payloads = [json.loads(e["payload"]) for e in durable.executions.values()]
            return sum(1 for p in payloads if p.get("key") == f"{BUCKET}/{key}")

        before: list[int] = []

        def before_again() -> None:
            ended_meanwhile()
            before.append(runs(key))

        first = events.eventbridge(BUCKET, key, "v1")
        deliveries = self.deliveries(
            world, function, first, ended_meanwhile, before_again=before_again
        )
        second = self.deliver(
            world, "other", function, events.eventbridge(BUCKET, other, "v1"), "r-other"
        )
        return lambda: (
            unfounded
            + check_starts(deliveries, runs(key), 1, key, before[0])
            + check_starts([second], runs(other), 1, other)
            + unexcused_failures(world, [*deliveries, second])
        )
