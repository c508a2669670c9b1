"""The ops commands cannot touch the wrong thing (#54), against moto: a component of another
kind (its outputs' `kind`), another component's table, a table that is not the workflow's,
an item that is not a checkpoint, a message that is not the runbook's, a function whose DLQ
the queue is not: each refused with one clear line, exit 2, every resource as it was.
`--dry-run` of every writing command leaves every table, queue (receive counts included)
and execution list byte-identical; a write asks first on a terminal, and without one needs
--yes; `scheduler-set-status` ends a delivered, unrecorded message by hand, its lane
following its status."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from exactly_once.components import resumable_asl
from exactly_once.handlers import runtime, scheduler_index, scheduler_store
from exactly_once.handlers.scheduler_index import Status, lane, message_key
from exactly_once.ops import __main__ as cli
from exactly_once.ops.__main__ import main
from tests.unit.conftest import WAIT_DEFINITION, make_state_machine
from tests.unit.test_ops_cli import FN
from tests.unit.test_ops_cli import workflow as workflow  # the checkpoint table and machine
from tests.unit.test_ops_iam import ended

STARTER = "orders-starter"
WRITING = {
    "mark": ["--key", "k", "--step", "charge"],
    "unmark": ["--key", "k", "--step", "charge"],
    "clear": ["--key", "k"],
    "rerun": ["--key", "k", "--input", '{"orderId": "k"}'],
}


class Recording:
    """A client that records every call's name (and delegates it)."""

    def __init__(self, client: Any, calls: list[str]) -> None:
        self._client, self._calls = client, calls

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._client, name)
        if not callable(found) or name.startswith("_"):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls.append(name)
            return found(*args, **kwargs)

        return call


class Lambda:
    """Lambda as GetFunctionConfiguration answers (moto keeps no DeadLetterConfig): one
    function, `handler`, whose DLQ is `dlq`; every call recorded, an invoke refused."""

    def __init__(self, handler: str, dlq: str | None, calls: list[str]) -> None:
        self.handler, self.dlq, self.calls = handler, dlq, calls

    def get_function_configuration(self, FunctionName: str) -> dict[str, Any]:
        self.calls.append("get_function_configuration")
        config: dict[str, Any] = {"FunctionName": FunctionName, "Handler": self.handler}
        if self.dlq:
            config["DeadLetterConfig"] = {"TargetArn": self.dlq}
        return config

    def invoke(self, **request: Any) -> Any:
        self.calls.append("invoke")
        raise AssertionError("nothing is sent back here")


@pytest.fixture
def aws(workflow: list[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Beside the workflow: a scheduler's messages table with one message of each case,
    a DLQ with a dead letter, a starter whose DLQ it is; the commands' clients recorded."""
    ddb = runtime.client("dynamodb")
    ddb.create_table(TableName="messages", **scheduler_index.table_schema())
    for message_id, status, more in (
        ("unrecorded", Status.FIRING, {"unrecorded": {"BOOL": True}}),
        ("firing", Status.FIRING, {}),
        ("standby", Status.STANDBY, {}),
    ):
        ddb.put_item(
            TableName="messages",
            Item={
                **message_key(message_id),
                "id": {"S": message_id},
                "status": {"S": status},
                "lane": {"S": lane(status, message_id)},
                "publish_at": {"N": "1700000000.000"},
                "claimed_by": {"S": "arn:aws:states:us-east-1:1:execution:slots:slot-1#0#r"},
                **more,
            },
        )
    ddb.put_item(
        TableName="checkpoints",
        Item={
            "pk": {"S": "k"},
            "first_execution": {"S": "e"},
            "out_charge": {"S": json.dumps({"done": True, "output": 1})},
        },
    )
    sqs = runtime.client("sqs")
    url = sqs.create_queue(QueueName="orders-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    sqs.send_message(
        QueueUrl=url, MessageBody=json.dumps({"reason": "why", "event": {"detail": {}}})
    )
    calls: list[str] = []
    lam = Lambda("exactly_once.handlers.starter.handler", arn, calls)

    def clients(*where: Any) -> Callable[..., Any]:
        def client(service: str, config: Any = None) -> Any:
            return lam if service == "lambda" else Recording(runtime.client(service), calls)

        return client

    monkeypatch.setattr(cli, "clients", clients)
    yield {"queue": url, "queueArn": arn, "lambda": lam, "calls": calls, "workflow": workflow}


def outputs_file(tmp_path: Path, workflow: list[str], url: str) -> str:
    slots = make_state_machine(WAIT_DEFINITION, name="slots")
    path = tmp_path / "outputs.json"
    path.write_text(
        json.dumps(
            {
                "orders": {
                    "kind": "ResumableWorkflow",
                    "table": workflow[1],
                    "stateMachineArn": workflow[3],
                },
                "reminders": {
                    "kind": "Scheduler",
                    "table": "messages",
                    "stateMachineArn": slots,
                    "dlqUrl": url,
                    "starterFunction": STARTER,
                },
                "api": {"kind": "ApiGatewayStarter", "dlqUrl": url, "stateMachineArn": slots},
            }
        )
    )
    return str(path)


def everything(url: str) -> dict[str, Any]:
    """Every table's items, the queue's attributes, every machine's executions."""
    ddb, sfn = runtime.client("dynamodb"), runtime.client("stepfunctions")
    tables = {
        name: sorted(json.dumps(item, sort_keys=True) for item in ddb.scan(TableName=name)["Items"])
        for name in ddb.list_tables()["TableNames"]
    }
    queue = runtime.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])
    executions = {
        machine["stateMachineArn"]: sorted(
            e["executionArn"]
            for e in sfn.list_executions(stateMachineArn=machine["stateMachineArn"])["executions"]
        )
        for machine in sfn.list_state_machines()["stateMachines"]
    }
    return {"tables": tables, "queue": queue["Attributes"], "executions": executions}


def receive_counts(url: str) -> list[str]:
    found = runtime.client("sqs").receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"]
    )
    return [m["Attributes"]["ApproximateReceiveCount"] for m in found.get("Messages", [])]


def refused(capsys: pytest.CaptureFixture[str], argv: list[str], *said: str) -> str:
    capsys.readouterr()
    assert main(argv) == 2, argv
    # (one line of ours: moto's own executions may log beside it)
    [error] = [line for line in capsys.readouterr().err.splitlines() if line.startswith(cli.PROG)]
    assert "Traceback" not in error, error
    for text in said:
        assert text in error, (text, error)
    return error


def test_a_component_of_another_kind_is_refused_by_name_and_nothing_changes(
    aws: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = outputs_file(tmp_path, aws["workflow"], aws["queue"])
    before = everything(aws["queue"])
    stack = ["--outputs", outputs, "--yes"]
    execution = aws["workflow"][3].replace(":stateMachine:", ":execution:") + ":k"
    # clear and redrive given a Scheduler's outputs (which name a table and a machine too)
    refused(
        capsys,
        ["clear", "--key", "MESSAGE#standby", *stack, "--component", "reminders"],
        "component 'reminders' is a Scheduler; clear works on a ResumableWorkflow",
    )
    refused(
        capsys,
        ["redrive", "--execution", execution, *stack, "--component", "reminders"],
        "component 'reminders' is a Scheduler; redrive works on a ResumableWorkflow",
    )
    # the scheduler's commands given a workflow's
    refused(
        capsys,
        ["scheduler-set-status", "--id", "k", "--status", "DONE", *stack, "--component", "orders"],
        "component 'orders' is a ResumableWorkflow; scheduler-set-status works on a Scheduler",
    )
    # redrive-dlq given a workflow's, or an API starter's (whose DLQ has no function)
    refused(
        capsys,
        ["redrive-dlq", *stack, "--component", "orders"],
        "component 'orders' is a ResumableWorkflow; redrive-dlq works on an IdempotentEtl, "
        "a NameDedupStarter or a Scheduler",
    )
    refused(
        capsys,
        ["redrive-dlq", *stack, "--component", "api"],
        "is an ApiGatewayStarter",
        "aws events put-events",
    )
    assert everything(aws["queue"]) == before
    assert aws["calls"] == []  # nothing asked of AWS
    # AND without --component, the one output of the command's kind is taken
    assert main(["show", "--key", "k", "--outputs", outputs]) == 0
    assert json.loads(capsys.readouterr().out)["steps"]["charge"]["done"] is True


def test_another_components_table_or_item_is_refused_and_nothing_changes(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    table, machine = aws["workflow"][1], aws["workflow"][3]
    before = everything(aws["queue"])
    # GIVEN the workflow's machine with the scheduler's table (a typo, another stack's)
    for command, args in WRITING.items():
        refused(
            capsys,
            [command, *args, "--yes", "--table", "messages", "--state-machine", machine],
            "table 'messages' is not this workflow's checkpoint table",
            f"keeps its checkpoints in {table}",
        )
    # AND a scheduler's message in the workflow's own table: no checkpoint, never written
    message = {"pk": {"S": "MESSAGE#abc"}, "status": {"S": "STANDBY"}}
    runtime.client("dynamodb").put_item(TableName=table, Item=message)
    before = everything(aws["queue"])
    for command in ("clear", "mark", "unmark"):
        step = ["--step", "charge"] if command != "clear" else []
        refused(
            capsys,
            [command, "--key", "MESSAGE#abc", *step, "--yes", *aws["workflow"]],
            "'MESSAGE#abc' is no checkpoint of this workflow's table",
        )
    # AND a redrive of an execution whose key's item is that message
    sfn = runtime.client("stepfunctions")
    execution = sfn.start_execution(
        stateMachineArn=machine, name="abc", input=json.dumps({"orderId": "MESSAGE#abc"})
    )["executionArn"]
    before["executions"] = everything(aws["queue"])["executions"]
    refused(
        capsys,
        ["redrive", "--execution", execution, "--yes", "--table", table],
        "no checkpoint of this workflow's table",
    )
    # AND set-status given the workflow's table, or a message the runbook does not set
    for message_id, in_table, why in (
        ("abc", table, "table 'checkpoints' is not a Scheduler's messages table (it has no"),
        ("standby", "messages", "is STANDBY: only a FIRING message marked unrecorded"),
        ("firing", "messages", "FIRING and not marked unrecorded"),
        ("gone", "messages", "no message 'gone' in table messages"),
    ):
        set_status = ["scheduler-set-status", "--id", message_id, "--status", "DONE"]
        refused(capsys, [*set_status, "--yes", "--table", in_table], why)
    assert everything(aws["queue"]) == before


def test_redrive_dlq_refuses_a_function_not_ours_or_a_queue_not_its_dlq_receiving_nothing(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    lam, url = aws["lambda"], aws["queue"]
    before = everything(url)
    command = ["redrive-dlq", "--queue", url, "--function", STARTER, "--yes"]
    lam.handler = "exactly_once.handlers.scheduler_slots.handler"  # (a scheduler's slot)
    refused(capsys, command, "runs exactly_once.handlers.scheduler_slots.handler, not a starter")
    lam.handler, lam.dlq = "exactly_once.handlers.starter.handler", "arn:aws:sqs:us-east-1:1:x"
    refused(
        capsys,
        command,
        f"queue {aws['queueArn']} is not the DLQ of {STARTER}",
        "its DLQ: arn:aws:sqs:us-east-1:1:x",
    )
    assert not {"receive_message", "invoke", "delete_message", "send_message"} & set(aws["calls"])
    assert everything(url) == before
    assert receive_counts(url) == ["1"]  # (this receive is its first)


def test_a_dry_run_of_every_writing_command_changes_nothing_and_receives_nothing(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    workflow, url = aws["workflow"], aws["queue"]
    ddb = runtime.client("dynamodb")
    ddb.update_item(  # (a message of an older deployment, for scheduler-lanes)
        TableName="messages", Key=message_key("standby"), UpdateExpression="REMOVE lane"
    )
    execution = runtime.client("stepfunctions").start_execution(
        stateMachineArn=workflow[3], name="k", input=json.dumps({"orderId": "k"})
    )["executionArn"]
    ended(execution)  # (FAILED: a running one is refused, a rerun's advice no help)
    ddb.update_item(
        TableName=workflow[1],
        Key={"pk": {"S": "k"}},
        UpdateExpression="SET lease = :e",
        ExpressionAttributeValues={":e": {"S": execution}},
    )
    before = everything(url)
    runs = {
        **{command: [command, *args, *workflow] for command, args in WRITING.items()},
        "redrive": ["redrive", "--execution", execution, "--table", workflow[1]],
        "redrive-dlq": ["redrive-dlq", "--queue", url, "--function", STARTER],
        "scheduler-lanes": ["scheduler-lanes", "--table", "messages"],
        "scheduler-set-status": [
            *("scheduler-set-status", "--id", "unrecorded", "--status", "FAILED"),
            *("--error", "the target refused it", "--table", "messages"),
        ],
    }
    assert set(runs) == set(cli.WRITES)
    said = {}
    for command, argv in runs.items():
        capsys.readouterr()
        assert main([*argv, "--dry-run"]) == 0, (command, capsys.readouterr().err)
        said[command] = json.loads(capsys.readouterr().out)
        assert said[command]["dryRun"] is True and said[command]["wouldChange"], command
    # THEN nothing changed anywhere, and no message was received
    assert everything(url) == before
    assert receive_counts(url) == ["1"]
    writes = {"receive_message", "change_message_visibility", "delete_message", "send_message"}
    assert not writes & set(aws["calls"])
    assert not {"put_item", "update_item", "delete_item", "start_execution"} & set(aws["calls"])
    assert "redrive_execution" not in aws["calls"] and "invoke" not in aws["calls"]
    # AND each said what it would change
    assert (
        "delete key 'k''s checkpoint from table checkpoints (1 of 2 steps done)"
        in (said["clear"]["wouldChange"])
    )
    assert said["rerun"]["name"] == "k-r1" or said["rerun"]["name"] == "k"
    assert said["redrive-dlq"]["approximateCounts"]["ApproximateNumberOfMessages"] == 1
    assert said["redrive-dlq"]["wouldChange"] == (
        f"send the visible messages of {url} (about 1) back through {STARTER}, each deleted "
        "once its event is through (not received now: about 0 in flight, 0 delayed)"
    )
    assert "SQS shows a message only by receiving it" in said["redrive-dlq"]["messages"]
    assert said["scheduler-lanes"]["to_lane"] == 1
    assert (
        "FIRING -> FAILED, error 'the target refused it'"
        in (said["scheduler-set-status"]["wouldChange"])
    )
    assert said["redrive"]["key"] == "k"


def test_a_write_asks_on_a_terminal_and_needs_yes_without_one(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    workflow = aws["workflow"]
    clear = ["clear", "--key", "k", *workflow]
    before = everything(aws["queue"])
    # GIVEN no terminal (a script, CI): refused, naming the change and --yes
    refused(
        capsys,
        clear,
        "this would delete key 'k''s checkpoint from table checkpoints",
        "Not on a terminal",
        "add --yes",
    )
    assert everything(aws["queue"]) == before

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    # AND on a terminal: asked on stderr, naming the change; anything but y changes nothing
    for answer, code in (("\n", 2), ("no\n", 2), ("y\n", 0)):
        asked = Terminal()
        monkeypatch.setattr("sys.stdin", Terminal(answer))
        monkeypatch.setattr("sys.stderr", asked)
        assert main(clear) == code, answer
        assert "will delete key 'k''s checkpoint" in asked.getvalue()
        assert "Go ahead? [y/N]" in asked.getvalue()
        if code:
            assert "not confirmed: nothing changed" in asked.getvalue()
            assert everything(aws["queue"]) == before
    assert json.loads(capsys.readouterr().out) == {"key": "k", "cleared": True}


def test_set_status_ends_a_delivered_unrecorded_message_its_lane_following(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    ddb = runtime.client("dynamodb")
    # (kept a week past its end or its time, whichever is later: its time is an hour ahead)
    publish = time.time() + 3600
    ddb.update_item(
        TableName="messages",
        Key=message_key("unrecorded"),
        UpdateExpression=f"SET {scheduler_store.KEEP_FOR} = :keep, publish_at = :at",
        ExpressionAttributeValues={":keep": {"N": "604800"}, ":at": {"N": f"{publish:.3f}"}},
    )
    argv = ["scheduler-set-status", "--table", "messages", "--yes", "--status", "DONE"]
    assert main([*argv, "--id", "MESSAGE#unrecorded", "--fired-at", "2026-01-02T03:04:05Z"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "id": "unrecorded",
        "status": "DONE",
        "recordedBy": "operator",
    }
    item = ddb.get_item(TableName="messages", Key=message_key("unrecorded"))["Item"]
    assert item["status"]["S"] == "DONE" and "lane" not in item  # (ended: out of the index)
    assert item["fired_at"]["S"] == "2026-01-02T03:04:05.000Z"
    assert item["recorded_by"]["S"] == "operator"
    # (expiring as any end does: scheduler_store.expiry)
    assert int(item[scheduler_store.TTL_ATTRIBUTE]["N"]) == int(publish + 604800) + 1
    # AND once ended, it is never set again
    refused(capsys, [*argv, "--id", "unrecorded"], "is DONE: only a FIRING message")


def test_the_help_says_which_commands_write_and_the_console_script_has_its_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import exactly_once

    with pytest.raises(SystemExit):
        main(["--help"], prog=cli.CONSOLE)
    shown = capsys.readouterr().out
    assert shown.startswith("usage: exactly-once ")
    assert "--version" in shown
    for command in cli.COMMANDS:
        assert command in shown
    listed = " ".join(shown.split())
    for command in cli.WRITES:
        assert f"{cli.COMMANDS[command][0]} (writes)" in listed, command
    assert "show Print a key's checkpoint: each step's entry, the lease, completion. " in listed
    assert "--dry-run reads what they would change and writes nothing" in listed
    monkeypatch.setattr("sys.argv", ["exactly-once", "--version"])
    with pytest.raises(SystemExit) as done:
        cli.console()
    assert done.value.code == 0
    assert capsys.readouterr().out == f"exactly-once {exactly_once.__version__}\n"
    for command in cli.WRITES:
        with pytest.raises(SystemExit):
            main([command, "--help"], prog=cli.CONSOLE)
        help_text = " ".join(capsys.readouterr().out.split())
        assert "--dry-run" in help_text and "--yes" in help_text and "Writes:" in help_text


def test_the_workflow_step_names_the_machine_table_it_is_checked_against() -> None:
    """(the check reads the Save states' TableName: a definition's, components/resumable_asl.py)"""
    steps = [resumable_asl.Step("charge", FN)]
    definition = resumable_asl.definition(steps, "orders-checkpoints", FN, "$.orderId")
    tables = {
        state["Parameters"]["TableName"]
        for state in definition["States"].values()
        if "TableName" in state.get("Parameters", {})
    }
    assert tables == {"orders-checkpoints"}


def test_redrive_dlq_list_shows_the_reasons_by_receiving_them_and_puts_them_back(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    url = aws["queue"]
    assert main(["redrive-dlq", "--queue", url, "--function", STARTER, "--list"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(m["reasons"], m["result"]) for m in listed["messages"]] == [(["why"], "listed")]
    assert listed["complete"] is True  # (it ended on an empty receive)
    assert "invoke" not in aws["calls"]
    # (received to be shown: its receive count rose, and it is visible again)
    assert receive_counts(url) == ["2"]
    assert main(["redrive-dlq", "--queue", url, "--function", STARTER, "--list", "--dry-run"]) == 2


def test_set_status_takes_what_fits_the_status_and_the_store_ends_a_message_only(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from exactly_once.handlers import scheduler_store

    argv = ["scheduler-set-status", "--table", "messages", "--id", "unrecorded", "--yes"]
    refused(
        capsys, [*argv, "--status", "FAILED", "--fired-at", "2026-01-02T03:04:05Z"], "is for DONE"
    )
    refused(capsys, [*argv, "--status", "DONE", "--error", "x"], "--error is for FAILED or UNKNOWN")
    with pytest.raises(SystemExit):  # (no offset: no instant)
        main([*argv, "--status", "DONE", "--fired-at", "2026-01-02T03:04:05"])
    with pytest.raises(ValueError, match="set by hand to DONE, FAILED, UNKNOWN only"):
        scheduler_store.settle(runtime.client("dynamodb"), "messages", "unrecorded", Status.STANDBY)
    item = runtime.client("dynamodb").get_item(TableName="messages", Key=message_key("unrecorded"))
    assert item["Item"]["status"]["S"] == "FIRING"
    # AND a dry run with nothing to change says so (a clear of a key with no checkpoint)
    capsys.readouterr()
    assert main(["clear", "--key", "none", "--dry-run", *aws["workflow"]]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "dryRun": True,
        "wouldChange": None,
        "key": "none",
        "cleared": False,
    }
