"""docs/operations.md's table of the ops commands' IAM actions is what they call: every
command runs against moto (a function of ours and Step Functions' RedriveExecution
answered in place, as moto has neither), each AWS call of its clients is recorded as the
IAM action it needs, and the union over its runs (a write, its --dry-run, redrive-dlq's
--list) is the table's row; a dry run calls reads only."""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import re
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exactly_once.handlers import runtime, scheduler_index
from exactly_once.handlers.scheduler_index import Status, lane, message_key
from exactly_once.ops import __main__ as cli
from exactly_once.ops import checkpoints, session
from tests.unit.pulumi_harness import ROOT
from tests.unit.test_ops_cli import workflow as workflow  # the checkpoint table and machine

HEADER = "| command | writes? | IAM actions | on which resource |"
ACTION = re.compile(r"`([a-z0-9-]+:[A-Za-z]+)`")
# An API operation whose IAM action has another name (the Service Authorization Reference
# for AWS Lambda lists the Invoke API under the action InvokeFunction,
# and the Amazon S3 reference lists ListObjectVersions under s3:ListBucketVersions,
# ListObjectsV2 under s3:ListBucket)
RENAMED = {
    "lambda:Invoke": "lambda:InvokeFunction",
    "s3:ListObjectVersions": "s3:ListBucketVersions",
    "s3:ListObjectsV2": "s3:ListBucket",
}
STARTER = "orders-starter"
REJECTED = {"status": "REJECTED", "reason": "still no target"}


def documented() -> tuple[dict[str, set[str]], set[str]]:
    """The table's actions by command (a row with no command continues the one above),
    and the commands it says write."""
    lines = (ROOT / "docs" / "operations.md").read_text().splitlines()
    start = lines.index(HEADER) + 2  # (past the header's separator)
    table: dict[str, set[str]] = {}
    writing: set[str] = set()
    commands: list[str] = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0]:
            commands = re.findall(r"`([a-z-]+)`", cells[0])
            writing |= set(commands) if cells[1].startswith("yes") else set()
        for command in commands:
            table.setdefault(command, set()).update(ACTION.findall(cells[2]))
    return table, writing


def action(model: Any) -> str:
    """The IAM action of an API operation: the service's signing name (IAM's prefix for
    these services: states, dynamodb for its streams too, sqs, lambda) and the name."""
    name = f"{model.service_model.signing_name}:{model.name}"
    return RENAMED.get(name, name)


@dataclasses.dataclass
class Recorder:
    """Every call the commands' clients make, as IAM actions; some answered in place."""

    answers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]
    queue: str  # the DLQ
    calls: list[str] = dataclasses.field(default_factory=list)

    def clients(self, *where: Any) -> Callable[..., Any]:
        real = session.clients(*where)

        def client(service: str, config: Any = None) -> Any:
            made = real(service, config)
            # before-call comes before moto (which answers at before-send): every call is
            # seen, a paginator's pages too; an answer here is the call's response
            made.meta.events.register_first("before-call.*.*", self._called)
            return made

        return client

    def _called(self, model: Any, params: dict[str, Any], **kwargs: Any) -> Any:
        name = action(model)
        self.calls.append(name)
        if name in self.answers:
            return types.SimpleNamespace(status_code=200, headers={}), self.answers[name](params)
        return None

    def run(self, argv: list[str]) -> set[str]:
        self.calls.clear()
        # (the audit exits FOUND on a finding: each run here plants one)
        assert cli.main(argv) == (cli.FOUND if argv[0] == "audit" else 0), argv
        return set(self.calls)


def ended(execution_arn: str) -> None:
    """moto runs the workflow's machine in a thread: wait for it to end (its Lambda step
    fails, no such function)."""
    sfn = runtime.client("stepfunctions")
    for _ in range(100):
        if sfn.describe_execution(executionArn=execution_arn)["status"] != "RUNNING":
            return
        time.sleep(0.05)
    raise AssertionError(f"{execution_arn} still runs")


def dead_letters_queue() -> tuple[str, str]:
    """A DLQ with a handler's dead letter and a stream batch a scheduler's starter could
    not take (its records read back from a table's stream)."""
    ddb, streams = runtime.client("dynamodb"), runtime.client("dynamodbstreams")
    table = ddb.create_table(
        TableName="streamed",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )["TableDescription"]
    ddb.put_item(TableName="streamed", Item={"pk": {"S": "m0"}})
    stream = table["LatestStreamArn"]
    [shard] = streams.describe_stream(StreamArn=stream)["StreamDescription"]["Shards"]
    iterator = streams.get_shard_iterator(
        StreamArn=stream, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    [record] = streams.get_records(ShardIterator=iterator)["Records"]
    sequence = record["dynamodb"]["SequenceNumber"]
    sqs = runtime.client("sqs")
    url = sqs.create_queue(QueueName="orders-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    batch = {
        "shardId": shard["ShardId"],
        "startSequenceNumber": sequence,
        "endSequenceNumber": sequence,
        "streamArn": stream,
        "batchSize": 1,
    }
    for body in (
        {"reason": "no target", "event": {"detail": {"key": "a"}}},
        {"requestContext": {"condition": "RetryAttemptsExhausted"}, "DDBStreamBatchInfo": batch},
    ):
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps(body))
    return url, arn


def invoked(params: dict[str, Any]) -> dict[str, Any]:
    """The function: a stream batch is taken, the handler's event rejected again."""
    event = json.loads(params["body"])
    answer = {"outcomes": ["STARTED"]} if "Records" in event else REJECTED
    return {"StatusCode": 200, "Payload": io.BytesIO(json.dumps(answer).encode())}


@pytest.fixture
def recorder(workflow: list[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorder]:
    url, arn = dead_letters_queue()
    answers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "lambda:GetFunctionConfiguration": lambda params: {
            "FunctionName": STARTER,
            "Handler": "exactly_once.handlers.starter.handler",
            "DeadLetterConfig": {"TargetArn": arn},
        },
        "lambda:InvokeFunction": invoked,
        "states:RedriveExecution": lambda params: {"redriveDate": datetime.datetime.now()},
    }
    recording = Recorder(answers, url)
    monkeypatch.setattr(cli, "clients", recording.clients)
    monkeypatch.setattr(checkpoints, "clients", recording.clients)
    yield recording


def audited(tmp_path: Any, machine: str) -> list[list[str]]:
    """An ETL, a scheduler (its messages table made by the test) and the workflow, each
    with an input lost or pending: the audit's runs, one per kind."""
    s3, ddb = runtime.client("s3"), runtime.client("dynamodb")
    for bucket in ("etl-inputs", "etl-outputs"):
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket="etl-inputs", VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket="etl-inputs", Key="a.csv", Body=b"1")  # no output: lost
    for table, key in (("etl-control", "id"), ("received", "pk")):
        ddb.create_table(
            TableName=table,
            KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
    stuck = {"pk": {"S": "stuck"}, "out_charge": {"S": "{}"}, "lease": {"S": "arn:e"}}
    ddb.put_item(TableName="checkpoints", Item={**stuck, "saved_at": {"S": "2026-01-01T00:00:00Z"}})
    etl = {"kind": "IdempotentEtl", "inputBucket": "etl-inputs", "outputBucket": "etl-outputs"}
    etl |= {"inputPrefix": "", "inputSuffix": "", "outputPrefix": "out/", "outputSuffix": ""}
    etl |= {"recordTtlSeconds": 86400}
    outputs = {
        "etl": {**etl, "controlTable": "etl-control"},
        "reminders": {
            "kind": "Scheduler",
            "table": "messages",
            "receipts": {"c": "received"},
            "receiptDays": 3650,  # (its messages' time is 2023's)
            "redeliver": [],
        },
        "orders": {"kind": "ResumableWorkflow", "table": "checkpoints", "timeoutSeconds": 60},
        "starter": {  # (its machine has no execution for the ETL's upload: lost)
            "kind": "NameDedupStarter",
            "bucket": "etl-inputs",
            "stateMachineArn": machine,
            "keyStrategy": "bucket-key-version",
            "hideKey": False,
            "backend": "step-functions",
        },
    }
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    file = str(tmp_path / "outputs.json")
    return [
        ["audit", "--outputs", file, "--component", name, "--grace-minutes", "0"]
        for name in outputs
    ]


def test_the_docs_table_holds_each_commands_aws_calls(
    recorder: Recorder, workflow: list[str], tmp_path: Any
) -> None:
    # GIVEN a checkpoint, a failed execution that still holds its key, a scheduler's
    # messages (one delivered and unrecorded, one of an older deployment without a lane)
    ddb, sfn = runtime.client("dynamodb"), runtime.client("stepfunctions")
    checkpoint = {"pk": {"S": "k"}, "first_execution": {"S": "e"}}
    ddb.put_item(TableName="checkpoints", Item=checkpoint)
    failed = sfn.start_execution(
        stateMachineArn=workflow[3], name="order-9", input=json.dumps({"orderId": "order-9"})
    )["executionArn"]
    ended(failed)
    ddb.put_item(
        TableName="checkpoints",
        Item={"pk": {"S": "order-9"}, "first_execution": {"S": failed}, "lease": {"S": failed}},
    )
    ddb.create_table(TableName="messages", **scheduler_index.table_schema())
    for message_id, status, more in (
        ("unrecorded", Status.FIRING, {"unrecorded": {"BOOL": True}}),
        ("standby", Status.STANDBY, {}),
    ):
        laned = {"lane": {"S": lane(status, message_id)}} if status == Status.FIRING else {}
        ddb.put_item(
            TableName="messages",
            Item={
                **message_key(message_id),
                "id": {"S": message_id},
                "channel": {"S": "c"},
                "status": {"S": status},
                "publish_at": {"N": "1700000000.000"},
                **laned,
                **more,
            },
        )
    dlq = ["--queue", recorder.queue, "--function", STARTER]
    settle = ["--id", "unrecorded", "--status", "DONE"]
    runs: dict[str, list[list[str]]] = {
        "show": [["show", "--key", "k", *workflow]],
        "mark": [["mark", "--key", "k", "--step", "charge", *workflow]],
        "unmark": [["unmark", "--key", "k", "--step", "charge", *workflow]],
        "clear": [["clear", "--key", "k", *workflow]],
        "rerun": [["rerun", "--key", "new", "--input", '{"orderId": "new"}', *workflow]],
        "redrive": [["redrive", "--execution", failed, "--table", "checkpoints"]],
        "redrive-dlq": [["redrive-dlq", *dlq, "--list"], ["redrive-dlq", *dlq]],
        "scheduler-set-status": [["scheduler-set-status", "--table", "messages", *settle]],
        "scheduler-lanes": [["scheduler-lanes", "--table", "messages"]],
        "audit": audited(tmp_path, workflow[3]),
    }
    table, writing = documented()
    assert set(table) == set(runs) == set(cli.COMMANDS)
    assert writing == cli.WRITES
    for command, argvs in runs.items():
        called: set[str] = set()
        # WHEN it runs (a writing command: its dry run first, then the write)
        for argv in argvs:
            if command in cli.WRITES and "--list" not in argv:
                dry = recorder.run([*argv, "--dry-run"])
                # THEN a dry run reads only
                assert all(re.match(r"\w+:(Describe|Get|Scan)", a) for a in dry), (command, dry)
                called |= dry
                argv = [*argv, "--yes"]
            done = recorder.run(argv)
            if "--list" in argv:  # receives and puts back, sends nothing, deletes nothing
                sends = {"lambda:InvokeFunction", "sqs:DeleteMessage", "sqs:SendMessage"}
                assert not sends & done, done
            called |= done
        # THEN what it called is its row of the table, no more, no less
        assert called == table[command], (command, sorted(called ^ table[command]))
