"""The explorer's models of AWS, each held to the behaviour AWS documents (the documents are
cited in the models' modules): Lambda's invocations (tests/explore/lambdas.py), Step
Functions (machine.py), a lagging index and a stream (dynamo.py), the SDK's sends and
retries under the explorer's network (faults.py), and the durable SDK's stand-in
(scenarios/resumable.py) against the SDK's own local runner."""

from __future__ import annotations

import itertools
import json
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, ReadTimeoutError
from moto import mock_aws

from exactly_once.handlers import scheduler_index
from tests.explore.dynamo import Table
from tests.explore.faults import Clock, Fault, Injector
from tests.explore.interleave import BesidePool, Interleaver
from tests.explore.lambdas import DIED, TIMED_OUT, Failure, Lambdas
from tests.explore.machine import Machine, wake

pytestmark = pytest.mark.explore
FN = "arn:aws:lambda:us-east-1:123456789012:function:{}"


@pytest.fixture(autouse=True)
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    with mock_aws():
        yield


class World:
    """A schedule's machinery, for one test: its network, clock, processes and functions."""

    def __init__(self, faults: str = "", **config: Any) -> None:
        self.clock = Clock()
        self.processes = Interleaver()
        self.injector = Injector(Fault.parse(faults), self.processes, self.clock)
        self.lambdas = Lambdas(self.injector, self.clock)
        self.clients: dict[str, Any] = {}
        self.config = Config(**config) if config else None

    def client(self, service: str) -> Any:
        if service not in self.clients:
            kwargs = {"config": self.config} if self.config else {}
            self.clients[service] = boto3.client(service, region_name="us-east-1", **kwargs)
            self.injector.attach(self.clients[service])
        return self.clients[service]

    def run(self, fn: Callable[[], Any]) -> Any:
        return self.processes.run(fn)


def queue(world: World) -> str:
    return str(world.client("sqs").create_queue(QueueName="q")["QueueUrl"])


def depth(world: World, url: str) -> int:
    attributes = world.client("sqs").get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


# -- the SDK under the explorer's network ----------------------------------------------------
@pytest.mark.parametrize(
    ("retries", "sends"),
    [
        ({"max_attempts": 1, "mode": "standard"}, 2),
        ({"total_max_attempts": 1, "mode": "standard"}, 1),
    ],
)
def test_botocores_max_attempts_counts_retries_and_total_max_attempts_sends(
    retries: dict[str, Any], sends: int
) -> None:
    # GIVEN a refused first send (a 503: nothing happened)
    world = World("error@0", retries=retries)
    sqs = world.client("sqs")
    world.injector.paused = True
    url = queue(world)
    world.injector.paused = False
    # WHEN the call is made
    if sends == 1:
        with pytest.raises(ClientError):
            world.run(lambda: sqs.send_message(QueueUrl=url, MessageBody="x"))
    else:
        world.run(lambda: sqs.send_message(QueueUrl=url, MessageBody="x"))
    # THEN botocore sent it as many times as its configuration says (max_attempts: 1 retry)
    assert world.injector.calls[0].sends == sends


def test_a_lost_answer_took_effect_and_the_sdks_resend_takes_effect_again() -> None:
    # GIVEN a send whose answer is lost after it took effect (a read timeout)
    world = World("lost@0,lostall@1", retries={"max_attempts": 2, "mode": "standard"})
    sqs = world.client("sqs")
    world.injector.paused = True
    url = queue(world)
    world.injector.paused = False
    # WHEN one call meets `lost` (the SDK resends it) and one `lostall` (every send lost)
    world.run(lambda: sqs.send_message(QueueUrl=url, MessageBody="one"))
    with pytest.raises(ReadTimeoutError):
        world.run(lambda: sqs.send_message(QueueUrl=url, MessageBody="two"))
    # THEN each send took effect: one twice (lost, resent), two three times (every send)
    world.injector.paused = True
    assert depth(world, url) == 2 + 3
    assert [c.sends for c in world.injector.calls] == [2, 3]


def test_throttles_spend_the_retry_quota_until_the_sdk_stops_retrying() -> None:
    import botocore.endpoint

    from tests.explore.scenarios.base import clocked

    # GIVEN a standard-mode client (3 sends a call; a retry quota of 500 tokens, 5 per
    # throttled retry), every send of 60 calls throttled
    world = World(",".join(f"throttle@{i}" for i in range(60)), retries={"mode": "standard"})
    sqs = world.client("sqs")
    world.injector.paused = True
    url = queue(world)
    world.injector.paused = False

    def calls() -> None:
        for _ in range(60):
            with pytest.raises(ClientError) as raised:
                sqs.send_message(QueueUrl=url, MessageBody="x")
            assert raised.value.response["Error"]["Code"] == "ThrottlingException"

    with clocked(world.clock, botocore.endpoint):  # its back-off, by the schedule's clock
        world.run(calls)
    sends = [c.sends for c in world.injector.calls]
    # THEN each is retried (3 sends) while the quota lasts, then sent once: 100 retries
    assert sends[0] == 3 and sends[-1] == 1
    assert sum(sends) - len(sends) == 500 // 5


# -- Lambda ------------------------------------------------------------------------------------
def slow(world: World, url: str) -> Callable[[Any, Any], Any]:
    """A function that sends two messages: a call in flight when it times out, then one."""

    def handler(event: Any, context: Any) -> Any:
        sqs = world.client("sqs")
        sqs.send_message(QueueUrl=url, MessageBody="first")
        sqs.send_message(QueueUrl=url, MessageBody="second")
        return {"ok": True}

    return handler


def test_a_timed_out_invocation_answers_sandbox_timedout_and_lands_only_its_call_in_flight() -> (
    None
):
    # GIVEN a function that times out as it sends its first message
    world = World("timeout@0")
    world.injector.paused = True
    url = queue(world)
    world.injector.paused = False
    function = world.lambdas.register(FN.format("slow"), slow(world, url), timeout=30)
    seen: list[Any] = []

    def caller() -> None:
        seen.append(world.lambdas.run(function, {}, "r1"))
        world.injector.paused = True
        seen.append(depth(world, url))  # what the caller sees when it hears of the timeout
        world.injector.paused = False

    world.run(caller)
    # THEN the caller hears Sandbox.Timedout before the call in flight lands, at the
    # function's deadline (not before: a function times out at its timeout)
    assert seen[0] == Failure(TIMED_OUT, "Task timed out after 30.00 seconds") and seen[1] == 0
    assert world.clock.now >= 1_800_000_000 + 30
    # AND that call lands later; the invocation makes no call after it (it is dead)
    world.injector.paused = True
    assert depth(world, url) == 1
    assert [c.operation for c in world.injector.calls] == ["SendMessage"]


def test_a_sandbox_that_dies_answers_runtime_exit_error_and_step_functions_lambda_unknown() -> None:
    world = World("crash@0,crash@2")  # (call 1 is Step Functions' invoke of it)
    world.injector.paused = True
    url = queue(world)
    world.injector.paused = False
    function = world.lambdas.register(FN.format("slow"), slow(world, url))
    results: list[Any] = []

    def both() -> None:
        results.append(world.lambdas.run(function, {}, "r1"))  # a synchronous caller's view
        results.append(world.lambdas.from_states(function.arn, {}, "execution"))

    world.run(both)
    assert isinstance(results[0], Failure) and results[0].error_type == DIED
    assert results[1] == ("error", "Lambda.Unknown")
    # (the crash came after each first call took effect, and nothing after it ran)
    world.injector.paused = True
    assert depth(world, url) == 2


def test_an_orphaned_invocation_runs_on_to_its_own_end_after_its_caller_timed_out() -> None:
    # GIVEN a function that invokes another synchronously, and times out while it waits
    # (at the inner function's first call: call 2)
    world = World("orphan@2")
    world.injector.paused = True
    url = queue(world)
    world.injector.paused = False
    inner = world.lambdas.register(FN.format("inner"), slow(world, url), timeout=60)
    lam = world.client("lambda")

    def outer(event: Any, context: Any) -> Any:
        world.client("sqs").send_message(QueueUrl=url, MessageBody="outer")
        return lam.invoke(FunctionName=inner.arn, Payload=b"{}")["StatusCode"]

    function = world.lambdas.register(FN.format("outer"), outer, timeout=30)
    answer: list[Any] = []
    world.run(lambda: answer.append(world.lambdas.run(function, {}, "r1")))
    # THEN the caller of the outer function heard its timeout; the inner one went on and
    # sent both its messages (Lambda stops the function that timed out, not its callees)
    assert isinstance(answer[0], Failure) and answer[0].error_type == TIMED_OUT
    world.injector.paused = True
    assert depth(world, url) == 3


def test_an_invocation_that_ended_cannot_time_out_and_wake_its_old_waiter() -> None:
    # GIVEN a root that called an invocation (it answered) and then sleeps, while a
    # process the invocation left in the background tries to time it out (an orphan fault
    # whose caller had ended: the 100,000-schedule run hung so, at 30ca9fc)
    clock = Clock()
    processes = Interleaver(clock)
    seen: list[Any] = []

    def invocation() -> str:
        me = processes.me()
        processes.background("leftover", lambda: seen.append(processes.time_out(me)))
        return "answered"

    def root() -> float:
        seen.append(processes.call("child", invocation))
        before = clock.now
        processes.sleep(30)
        return clock.now - before

    # WHEN it runs; THEN the ended invocation does not time out, and the root sleeps its
    # full 30 s instead of being woken (and dispatched twice) at the leftover's turn
    assert processes.run(root) == 30
    assert seen == [("ok", "answered"), False]


def test_an_asynchronous_event_is_tried_three_times_with_its_request_id_and_then_kept() -> None:
    world = World()
    seen: list[tuple[str, float]] = []

    def failing(event: Any, context: Any) -> Any:
        seen.append((context.aws_request_id, world.clock.now))
        raise RuntimeError("no")

    function = world.lambdas.register(FN.format("failing"), failing)
    outcome = world.run(lambda: world.lambdas.deliver_async(function, {}, "r1"))
    assert outcome[0] == "dlq" and outcome[1].error_type == "RuntimeError"
    assert [r for r, _ in seen] == ["r1"] * 3
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(seen)]
    assert gaps == pytest.approx([60, 120])  # one minute, then two


def test_an_answer_lost_while_the_function_runs_leaves_it_running_unwaited() -> None:
    # GIVEN a synchronous invoke whose caller's read times out (every send's), with a
    # client that sends once
    world = World("lostall@0", retries={"total_max_attempts": 1, "mode": "standard"})
    world.injector.paused = True
    url = queue(world)
    world.injector.paused = False
    inner = world.lambdas.register(FN.format("inner"), slow(world, url), timeout=60)
    lam = world.client("lambda")
    raised: list[Exception] = []

    def caller() -> None:
        try:
            lam.invoke(FunctionName=inner.arn, Payload=b"{}")
        except ReadTimeoutError as exc:
            raised.append(exc)
        world.injector.paused = True
        raised.append(depth(world, url))  # type: ignore[arg-type]
        world.injector.paused = False

    world.run(caller)
    # THEN the caller saw the timeout while the function had not run yet; it ran after,
    # once (the SDK did not send it again)
    assert isinstance(raised[0], ReadTimeoutError) and raised[1] == 0
    world.injector.paused = True
    assert depth(world, url) == 2 and world.lambdas.started[inner.arn] == 1


# -- Step Functions ----------------------------------------------------------------------------
def machine_of(world: World, states: dict[str, Any], fn: Callable[[Any, Any], Any]) -> Machine:
    world.lambdas.register(FN.format("task"), fn)
    definition = {"StartAt": "T", "States": states}
    return Machine(definition, world.lambdas, world.clock, world.injector, None, random.Random(1))


def task(retry: list[Any], catch: list[Any] | None = None) -> dict[str, Any]:
    return {
        "T": {
            "Type": "Task",
            "Resource": "arn:aws:states:::lambda:invoke",
            "Parameters": {
                "FunctionName": FN.format("task"),
                "Payload": {"count.$": "$$.State.RetryCount"},
            },
            "Retry": retry,
            **({"Catch": catch} if catch else {}),
            "End": True,
        },
        "Caught": {"Type": "Succeed"},
    }


def test_states_runtime_is_neither_retried_nor_caught_by_states_all() -> None:
    world = World()
    states = task(
        [{"ErrorEquals": ["States.ALL"], "MaxAttempts": 3}],
        [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}],
    )
    states["T"]["Parameters"]["Payload"] = {"x.$": "$.missing"}  # a path that is not there
    machine = machine_of(world, states, lambda e, c: e)
    run = world.run(lambda: machine.run("arn:aws:states:x:1:execution:m:e", {}))
    assert (run.status, run.error) == ("FAILED", "States.Runtime")
    assert world.injector.calls == []  # never invoked, never retried


def test_retry_count_and_the_full_jitter_delays_follow_the_retrier() -> None:
    world = World()
    counts: list[int] = []

    def flaky(event: Any, context: Any) -> Any:
        counts.append(event["count"])
        if len(counts) < 4:
            raise RuntimeError("again")
        return {}

    rule = {
        "ErrorEquals": ["States.TaskFailed"],
        "IntervalSeconds": 2,
        "BackoffRate": 3,
        "MaxAttempts": 3,
        "MaxDelaySeconds": 10,
        "JitterStrategy": "FULL",
    }
    machine = machine_of(world, task([rule]), flaky)
    start = world.clock.now
    run = world.run(lambda: machine.run("arn:aws:states:x:1:execution:m:e", {}))
    assert run.status == "SUCCEEDED" and counts == [0, 1, 2, 3]
    # waits of at most 2, 6, then 10 (capped) seconds, each a random share (FULL jitter)
    ceiling = 2 + 6 + 10 + 4 * 0.01  # (and each invoke's own time)
    assert 0 < world.clock.now - start < ceiling
    assert [machine.delay(rule, n) <= cap for n, cap in ((1, 2), (2, 6), (3, 10))] == [True] * 3


def test_task_failed_matches_any_task_error_but_a_timeout() -> None:
    from tests.explore.machine import matches

    assert matches(["States.TaskFailed"], "Lambda.Unknown")
    assert not matches(["States.TaskFailed"], "States.Timeout")
    assert not matches(["States.ALL"], "States.DataLimitExceeded")


def test_a_wait_for_a_timestamp_counts_whole_seconds() -> None:
    state = {"Type": "Wait", "TimestampPath": "$.at"}
    assert wake(state, {"at": "2027-01-15T08:00:00.900Z"}, 0) == 1_800_000_000
    assert wake({"Type": "Wait", "Seconds": 5}, {}, 100.5) == 105.5


# -- DynamoDB: the lagging index, the stream ------------------------------------------------
def test_a_stale_index_read_misses_a_new_item_and_lists_a_moved_one_under_its_old_key() -> None:
    world = World()
    ddb = world.client("dynamodb")
    world.injector.paused = True
    ddb.create_table(TableName="t", **scheduler_index.table_schema())
    world.injector.paused = False
    table = Table("t", "pk", lambda: ddb, world.clock)
    table.watch(world.injector)

    def item(pk: str, status: str) -> dict[str, Any]:
        lane = f"{status}#00"
        return {"pk": {"S": pk}, "lane": {"S": lane}, "publish_at": {"N": "10.000"}}

    def query(status: str) -> Any:
        return ddb.query(
            TableName="t",
            IndexName=scheduler_index.STATUS_INDEX,
            KeyConditionExpression="lane = :lane AND publish_at <= :until",
            ExpressionAttributeValues={":lane": {"S": f"{status}#00"}, ":until": {"N": "11"}},
        )

    def steps() -> list[list[str]]:
        ddb.put_item(TableName="t", Item=item("moved", "STANDBY"))
        ddb.put_item(TableName="t", Item=item("moved", "FIRING"))  # it moved lanes
        ddb.put_item(TableName="t", Item=item("new", "STANDBY"))  # it just arrived
        return [
            sorted(i["pk"]["S"] for i in query(status)["Items"])
            for status in ("STANDBY", "STANDBY", "FIRING")
        ]

    world.injector.faults = {3: "stale"}  # the first read answers from the lagging index
    found = world.run(steps)
    # THEN the stale read lists the moved item under its old lane and misses the new one;
    # the consistent reads see each where it is
    assert found == [["moved"], ["new"], ["moved"]]
    # AND the stream holds every write, with its images, in order (a write that changes
    # nothing writes no record)
    assert [(r.event, r.keys["pk"]["S"]) for r in table.stream] == [
        ("INSERT", "moved"),
        ("MODIFY", "moved"),
        ("INSERT", "new"),
    ]
    world.injector.faults = {}
    world.run(lambda: ddb.put_item(TableName="t", Item=item("new", "STANDBY")))
    assert len(table.stream) == 3


# -- the durable SDK's stand-in, against the SDK ---------------------------------------------
def test_the_durable_stand_in_replays_and_retries_steps_as_the_sdks_runner_does() -> None:
    from aws_durable_execution_sdk_python.config import Duration, StepConfig
    from aws_durable_execution_sdk_python.execution import durable_execution
    from aws_durable_execution_sdk_python.retries import (
        JitterStrategy,
        RetryStrategyConfig,
        create_retry_strategy,
    )
    from aws_durable_execution_sdk_python_testing import DurableFunctionTestRunner

    from tests.explore.scenarios.resumable import FakeDurableContext

    retry = StepConfig(
        retry_strategy=create_retry_strategy(
            RetryStrategyConfig(
                max_attempts=3,
                initial_delay=Duration.from_seconds(1),
                backoff_rate=2,
                jitter_strategy=JitterStrategy.NONE,
            )
        )
    )

    def workflow(calls: dict[str, int]) -> Callable[[Any, Any], Any]:
        def first(step: Any) -> Any:
            calls["first"] += 1
            return {"first": calls["first"]}

        def second(step: Any) -> Any:
            calls["second"] += 1
            if calls["second"] < 3:
                raise RuntimeError("not yet")
            return {"second": calls["second"]}

        def run(event: Any, context: Any) -> Any:
            done = context.step(first, name="first", config=retry)
            return {**done, **context.step(second, name="second", config=retry)}

        return run

    # WHEN the same workflow runs under the SDK's local runner and under the stand-in
    sdk_calls = {"first": 0, "second": 0}
    with DurableFunctionTestRunner(handler=durable_execution(workflow(sdk_calls))) as runner:
        result = runner.run(input="{}", execution_timeout=60)
    fake_calls = {"first": 0, "second": 0}
    world = World()
    store: dict[int, Any] = {}
    context = FakeDurableContext("arn", store, world.clock, world.injector)
    fake = world.run(lambda: workflow(fake_calls)({}, context))
    # THEN each ran its finished step once (the SDK replays the handler for each retry of
    # the second, and never runs the first again) and retried the failing one to success
    assert json.loads(result.result) == fake == {"first": 1, "second": 3}
    assert sdk_calls == fake_calls == {"first": 1, "second": 3}
    # AND a replay of the stand-in (a crashed invocation, invoked again) runs nothing again
    replayed = FakeDurableContext("arn", store, world.clock, world.injector)
    assert world.run(lambda: workflow(fake_calls)({}, replayed)) == fake
    assert fake_calls == {"first": 1, "second": 3}


def test_a_duplicate_of_an_asynchronous_invocation_keeps_its_request_id() -> None:
    # GIVEN an event whose invocation Lambda delivers twice (its queue is eventually
    # consistent): `dup` at the handler's first call
    world = World("dup@0")
    world.injector.paused = True
    url = queue(world)
    world.injector.paused = False
    seen: list[str] = []

    def handler(event: Any, context: Any) -> Any:
        seen.append(context.aws_request_id)
        world.client("sqs").send_message(QueueUrl=url, MessageBody=context.aws_request_id)
        return {}

    function = world.lambdas.register(FN.format("handler"), handler)
    world.injector.dup = lambda: world.lambdas.deliver_async(function, {}, "r1")
    world.run(lambda: world.lambdas.deliver_async(function, {}, "r1"))
    # THEN both runs carry the one request id
    assert seen == ["r1", "r1"]


def test_the_stream_mapping_delivers_in_order_bisects_a_failing_batch_and_gives_it_up() -> None:
    from tests.explore.dynamo import EventSourceMapping, Record

    def record(n: int, status: str) -> Record:
        image = {"pk": {"S": f"k{n}"}, "status": {"S": status}}
        return Record("INSERT", {"pk": {"S": f"k{n}"}}, None, image)

    records = [record(1, "STANDBY"), record(2, "DONE"), record(3, "STANDBY"), record(4, "BAD")]
    runs: list[list[str]] = []

    def run(batch: list[dict[str, Any]], name: str) -> bool:
        keys = [e["dynamodb"]["NewImage"]["pk"]["S"] for e in batch]
        runs.append(keys)
        return "k4" not in keys  # a record the function cannot take

    mapping = EventSourceMapping(
        lambda e: e["dynamodb"]["NewImage"]["status"]["S"] != "DONE", run, lambda s: None
    )
    dropped = mapping.deliver(records, "s")
    # THEN filtered, in one batch in stream order; on its failure split in halves, the
    # failing half retried 5 times and given up (the on-failure destination); the others
    # delivered once
    assert runs[0] == ["k1", "k3", "k4"]
    assert runs[1:3] == [["k1"], ["k3", "k4"]]
    assert runs[3:5] == [["k3"], ["k4"]] and runs[5:] == [["k4"]] * 5
    assert [[e["dynamodb"]["NewImage"]["pk"]["S"] for e in b] for b in dropped] == [["k4"]]


# -- a handler's own threads ------------------------------------------------------------------
@pytest.mark.parametrize("slow", [100.0, 1.0])
def test_a_thread_that_dies_ends_its_invocation_at_once_and_its_other_threads_with_it(
    slow: float,
) -> None:
    """A thread of a pool run beside the handler (BesidePool) dies after its call: the
    invocation answers Runtime.ExitError then, not once a slow thread of it ends (Lambda
    stops an environment's threads together); one that ended before is waited for no more."""
    world = World("crash@1")
    world.processes.clock, world.clock.sleeper = world.clock, world.processes.sleep
    began: list[float] = []

    def handler(event: Any, context: Any) -> None:
        def quick() -> None:
            world.clock.sleep(5)
            world.client("sqs").send_message(QueueUrl=event["url"], MessageBody="x")

        with BesidePool(world.processes, "t") as pool:
            waited = pool.submit(world.clock.sleep, slow)
            dying = pool.submit(quick)
            waited.result()
            dying.result()

    function = world.lambdas.register(FN.format("f"), handler, timeout=900)

    def source() -> Any:
        url = queue(world)
        began.append(world.clock.now)
        answer = world.lambdas.run(function, {"url": url}, "r1")
        began.append(world.clock.now)  # (its caller sees it then)
        return answer

    answers: list[Any] = []
    runner = threading.Thread(target=lambda: answers.append(world.run(source)), daemon=True)
    runner.start()
    runner.join(timeout=60)
    assert not runner.is_alive(), "the schedule hung"
    [failure] = answers
    assert isinstance(failure, Failure) and failure.error_type == DIED
    assert began[1] - began[0] < 10  # at the death, not past the slow thread's 100 s
