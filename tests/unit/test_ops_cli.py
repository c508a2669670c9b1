"""`python -m exactly_once.ops` against moto: per-command help with examples, step names
checked, AWS errors as one line with an exit code, the standard region chain."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from exactly_once.components import resumable_asl
from exactly_once.handlers import runtime
from exactly_once.ops.__main__ import COMMANDS, main
from exactly_once.ops.checkpoints import Checkpoints
from tests.unit.conftest import make_state_machine

FN = "arn:aws:lambda:us-east-1:123456789012:function:f"


@pytest.fixture
def workflow(moto: None) -> Iterator[list[str]]:
    runtime.client("dynamodb").create_table(
        TableName="checkpoints",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    steps = [resumable_asl.Step(name, FN) for name in ("register", "charge")]
    definition = resumable_asl.definition(steps, "checkpoints", FN, "$.orderId")
    machine = make_state_machine(definition, name="orders")
    yield ["--table", "checkpoints", "--state-machine", machine]


def test_every_command_has_its_own_help_with_an_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command in COMMANDS:
        with pytest.raises(SystemExit) as done:
            main([command, "--help"])
        assert done.value.code == 0
        shown = capsys.readouterr().out
        assert f"example: python -m exactly_once.ops {command} " in shown
        assert "--region" in shown and "--profile" in shown


def test_mark_then_show(workflow: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "mark",
                "--key",
                "k",
                "--step",
                "charge",
                "--output",
                '{"paid": 1}',
                "--yes",
                *workflow,
            ]
        )
        == 0
    )
    shown = json.loads(capsys.readouterr().out)
    assert shown["steps"]["charge"] == {"done": True, "output": {"paid": 1}, "by": "operator"}


def test_an_unknown_step_is_refused_naming_the_workflows_steps(
    workflow: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mark", "--key", "k", "--step", "chrage", *workflow]) == 2
    error = capsys.readouterr().err
    assert "unknown step 'chrage'; the workflow's steps: register, charge" in error
    assert Checkpoints("checkpoints", workflow[-1]).show("k") is None  # nothing written


def test_an_aws_error_is_one_line_with_the_reason_and_exit_1(
    workflow: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN the workflow's table gone
    runtime.client("dynamodb").delete_table(TableName="checkpoints")
    assert main(["show", "--key", "k", *workflow]) == 1
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error
    assert "AWS refused it: ResourceNotFoundException" in error


def test_bad_json_is_a_usage_error(workflow: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["rerun", "--key", "k", "--input", "{nope", *workflow])
    assert done.value.code == 2
    assert "not JSON" in capsys.readouterr().err


def test_the_region_comes_from_the_state_machine_arn_unless_given(moto: None) -> None:
    arn = "arn:aws:states:eu-west-1:123456789012:stateMachine:orders"
    assert Checkpoints("t", arn).ddb.meta.region_name == "eu-west-1"
    assert Checkpoints("t", arn, region="us-west-2").sfn.meta.region_name == "us-west-2"


def test_the_workflow_can_come_from_a_stacks_outputs(
    workflow: list[str], tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    outputs = Path(str(tmp_path)) / "outputs.json"
    outputs.write_text(
        json.dumps({"resumable": {"table": workflow[1], "stateMachineArn": workflow[3]}})
    )
    assert main(["show", "--key", "k", "--outputs", str(outputs)]) == 0
    assert json.loads(capsys.readouterr().out) == {"key": "k", "steps": None}
    # a component's own outputs, or any stack's output named by --component
    outputs.write_text(json.dumps({"table": workflow[1], "stateMachineArn": workflow[3]}))
    assert main(["show", "--key", "k", "--outputs", str(outputs)]) == 0
    capsys.readouterr()
    mine = {"table": workflow[1], "stateMachineArn": workflow[3]}
    outputs.write_text(json.dumps({"orders": mine, "refunds": mine}))
    assert main(["show", "--key", "k", "--outputs", str(outputs)]) == 2
    assert "give --component (one of orders, refunds)" in capsys.readouterr().err
    assert main(["show", "--key", "k", "--outputs", str(outputs), "--component", "orders"]) == 0
    capsys.readouterr()
    outputs.write_text("{}")
    assert main(["show", "--key", "k", "--outputs", str(outputs)]) == 2
    assert "it needs stateMachineArn, table" in capsys.readouterr().err


def test_a_state_machine_that_is_no_arn_is_named_and_redrive_needs_no_machine(
    workflow: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "--key", "k", "--table", "orders", "--state-machine", "orders"]) == 2
    assert "'orders' is not a state machine ARN" in capsys.readouterr().err
    assert main(["show", "--key", "k", "--table", "t", "--state-machine", workflow[3]]) == 2
    assert "--table 't' is not a DynamoDB table name" in capsys.readouterr().err
    execution = workflow[3].replace(":stateMachine:", ":execution:") + ":k"
    # the machine is the execution's: only the table is needed (for the lease check), and
    # the command gets as far as asking for the execution
    assert main(["redrive", "--execution", execution, "--table", workflow[1]]) == 1
    assert "AWS refused it: ExecutionDoesNotExist" in capsys.readouterr().err
    assert main(["redrive", "--execution", "order-7", "--table", workflow[1]]) == 2
    assert "is not an execution ARN" in capsys.readouterr().err


def test_an_endpoint_keeps_the_callers_credentials_and_is_named_when_it_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from exactly_once.ops.session import clients

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "mine")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    client = clients("http://127.0.0.1:9", "us-east-1")("sqs")
    assert client._request_signer._credentials.access_key == "mine"
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    client = clients("http://127.0.0.1:9", "us-east-1")("sqs")
    assert client._request_signer._credentials.access_key == "test"  # none: LocalStack's


def test_the_ops_cli_needs_no_repository_tooling() -> None:
    import ast
    from pathlib import Path

    import exactly_once.ops.__main__ as cli

    imported = {
        node.module.split(".")[0]
        for node in ast.walk(ast.parse(Path(cli.__file__).read_text()))
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert not {"deploy", "tooling", "tests"} & imported


def test_the_demo_and_the_benchmarks_import_no_tests() -> None:
    """They share the repository's tooling (tooling/), never the test suite's modules."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for path in [*root.glob("demo/**/*.py"), *root.glob("benchmarks/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            assert not any(n == "tests" or n.startswith("tests.") for n in names), path


def test_a_redrive_is_refused_once_another_run_took_the_key_over_or_completed_it(
    workflow: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = workflow[-1]
    sfn = runtime.client("stepfunctions")
    order = json.dumps({"orderId": "order-7"})
    a = sfn.start_execution(stateMachineArn=machine, name="order-7", input=order)["executionArn"]
    b = sfn.start_execution(stateMachineArn=machine, name="order-7-r1", input=order)["executionArn"]
    ddb = runtime.client("dynamodb")

    def holder(**attributes: dict[str, str]) -> None:
        checkpoint = {"pk": {"S": "order-7"}, "first_execution": {"S": a}}
        ddb.put_item(TableName="checkpoints", Item={**checkpoint, **attributes})

    # GIVEN run A failed and run B took the key's lease over
    holder(lease={"S": b})
    # THEN redriving A is refused (it would run its failed step again), one line, exit 2
    assert main(["redrive", "--execution", a, "--yes", *workflow]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"taken over by {b}" in error and "rerun" in error
    # AND so it is once B completed the key
    holder(completed_at={"N": "1"}, completed_by={"S": b})
    assert main(["redrive", "--execution", a, "--yes", *workflow]) == 2
    assert "was completed since" in capsys.readouterr().err
    # AND while the key is still A's, A is redriven
    holder(lease={"S": a})
    redriven: list[str] = []
    workflow_ops = Checkpoints("checkpoints", machine)
    monkeypatch.setattr(
        workflow_ops.sfn,
        "redrive_execution",
        lambda executionArn: redriven.append(executionArn) or {"redriveDate": "now"},
    )
    assert workflow_ops.redrive(a) == {"redriveDate": "now"}
    assert redriven == [a]


def test_a_queue_url_or_function_that_is_not_one_is_refused_before_any_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # (no AWS behind it: a command that reached AWS would fail otherwise, exit 1)
    url = "https://sqs.us-east-1.amazonaws.com/123456789012/orders-dlq"
    endpoint = ["--endpoint-url", "http://127.0.0.1:9", "--region", "us-east-1"]
    for queue, function, wrong in (
        ("orders-dlq", "orders-starter", "--queue 'orders-dlq' is not an SQS queue URL"),
        (url, "arn:aws:sqs:us-east-1:1:x", "is not a Lambda function's name or ARN"),
        (url, "orders starter", "is not a Lambda function's name or ARN"),
        (url + "\n", "orders-starter", "is not an SQS queue URL"),
    ):
        args = ["redrive-dlq", "--queue", queue, "--function", function, *endpoint]
        assert main(args) == 2, queue
        assert wrong in capsys.readouterr().err
    # a FIFO queue, LocalStack's URLs, a qualified ARN: taken (then the endpoint refuses)
    for queue, function in (
        (url.replace("orders-dlq", "orders-dlq.fifo"), "orders-starter"),
        ("http://localhost:4566/000000000000/orders-dlq", "orders-starter:live"),
        (url, "arn:aws:lambda:us-east-1:123456789012:function:orders-starter:7"),
        ("http://localhost:4566/queue/us-east-1/000000000000/orders-dlq", "f:$LATEST.PUBLISHED"),
        (
            "http://localhost:9324/queue/orders-dlq",
            "arn:aws-cn:lambda:cn-north-1:123456789012:function:f",
        ),
    ):
        args = ["redrive-dlq", "--queue", queue, "--function", function, *endpoint]
        assert main(args) == 1, (queue, function)
        assert "is not" not in capsys.readouterr().err


def test_the_wheel_names_its_console_script() -> None:
    import tomllib
    from pathlib import Path

    from exactly_once.ops.__main__ import console

    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["exactly-once"] == "exactly_once.ops.__main__:console"
    assert callable(console)


def test_a_programs_exports_are_what_the_commands_read(tmp_path: object) -> None:
    """docs/operations.md: `pulumi.export(NAME, component.exports())` is what `--outputs
    FILE --component NAME` reads (here the stack's outputs as `pulumi stack output --json`
    prints them, resolved under the package's test mocks)."""
    from pathlib import Path

    import pulumi

    from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs
    from exactly_once.components.resumable import (
        ResumableWorkflow,
        ResumableWorkflowArgs,
        WorkflowStep,
    )
    from exactly_once.components.scheduler import Scheduler, SchedulerArgs
    from exactly_once.ops.__main__ import _outputs
    from exactly_once.testing import run

    fn = "arn:aws:lambda:us-east-1:123456789012:function:f"
    stack: dict[str, Any] = {}

    def program() -> None:
        exported = {
            "orders": ResumableWorkflow("orders", ResumableWorkflowArgs([WorkflowStep("a", fn)])),
            "uploads": NameDedupStarter(
                "uploads",
                NameDedupStarterArgs(
                    bucket_name="b",
                    state_machine_arn="arn:aws:states:us-east-1:123456789012:stateMachine:m",
                ),
            ),
            "reminders": Scheduler("reminders", SchedulerArgs({"email": fn})),
        }
        for name, component in exported.items():
            pulumi.Output.all(**component.exports()).apply(
                lambda values, name=name: stack.update({name: values})
            )

    run(program)
    outputs = Path(str(tmp_path)) / "outputs.json"
    outputs.write_text(json.dumps(stack))
    workflow = _outputs(str(outputs), "orders", {"table", "stateMachineArn"})
    assert workflow["stateMachineArn"].startswith("arn:aws:states:")
    dead_letters = _outputs(str(outputs), "uploads", {"dlqUrl", "functionName"})
    assert dead_letters["dlqUrl"].startswith("https://sqs.")
    assert _outputs(str(outputs), "reminders", {"table", "stateMachineArn", "dlqUrl"})
    # AND each says which component it is: a command refuses another kind's by name
    kinds = {name: values["kind"] for name, values in stack.items()}
    assert kinds == {
        "orders": "ResumableWorkflow",
        "uploads": "NameDedupStarter",
        "reminders": "Scheduler",
    }


def test_clear_forgets_a_checkpoint_and_never_deletes_another_components_item(
    workflow: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    ddb = runtime.client("dynamodb")
    assert main(["mark", "--key", "k", "--step", "charge", "--yes", *workflow]) == 0
    assert main(["clear", "--key", "k", "--yes", *workflow]) == 0
    assert Checkpoints("checkpoints", workflow[-1]).show("k") is None
    capsys.readouterr()
    assert main(["clear", "--key", "k", *workflow]) == 0  # (again: nothing to forget, or ask)
    assert json.loads(capsys.readouterr().out) == {"key": "k", "cleared": False}
    # GIVEN a scheduler's message in the table given (its outputs also name a table and a
    # state machine): never deleted, the reason said, exit 2
    message = {"pk": {"S": "MESSAGE#abc"}, "status": {"S": "STANDBY"}}
    channel = {"pk": {"S": "INVOKER#demo"}, "target_arn": {"S": FN}}  # (no status either)
    for item in (message, channel):
        ddb.put_item(TableName="checkpoints", Item=item)
        for command in (["clear"], ["mark", "--step", "charge"], ["unmark", "--step", "charge"]):
            capsys.readouterr()
            assert main([*command, "--key", item["pk"]["S"], "--yes", *workflow]) == 2
            assert "no checkpoint of this workflow's table" in capsys.readouterr().err
        assert ddb.get_item(TableName="checkpoints", Key={"pk": item["pk"]})["Item"] == item
    # AND a state machine that is no resumable workflow's (a scheduler's slot clock) is
    # refused before anything is read or written
    slot_clock = make_state_machine(
        {"StartAt": "Wait", "States": {"Wait": {"Type": "Wait", "Seconds": 1, "End": True}}},
        name="slots",
    )
    assert (
        main(
            [
                "clear",
                "--key",
                "MESSAGE#abc",
                "--table",
                "checkpoints",
                "--state-machine",
                slot_clock,
            ]
        )
        == 2
    )
    assert "not a ResumableWorkflow's state machine" in capsys.readouterr().err
    assert ddb.get_item(TableName="checkpoints", Key={"pk": message["pk"]}).get("Item")


def test_the_help_says_what_the_tool_is_whole_and_the_version_is_asked_for(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import exactly_once

    with pytest.raises(SystemExit):
        main(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "operate a resumable workflow (pattern 4); redrive any DLQ;" in shown
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and exactly_once.__version__ in capsys.readouterr().out


def test_a_redrive_is_judged_by_its_redrive_status_else_by_its_status_and_end() -> None:
    """RedriveExecution: "failed, aborted, or timed out executions", within 14 days of
    their end; an execution described without redriveStatus (an emulator) is judged so."""
    from datetime import UTC, datetime, timedelta

    from exactly_once.ops.__main__ import not_redrivable

    now = datetime(2026, 6, 1, tzinfo=UTC)
    ended = {"stopDate": now - timedelta(days=2)}
    for status in ("FAILED", "TIMED_OUT", "ABORTED"):
        assert not_redrivable({"status": status, **ended}, now) is None
    assert not_redrivable({"status": "FAILED", "redriveStatus": "REDRIVABLE"}, now) is None
    # a missing redriveStatus no longer lets through what Step Functions refuses
    running = not_redrivable({"status": "RUNNING"}, now)
    assert running is not None and running.startswith("it is RUNNING; it is still running")
    assert "rerun the key" not in running and "start nothing" in running
    old = not_redrivable({"status": "ABORTED", "stopDate": now - timedelta(days=15)}, now)
    assert old is not None and "over 14 days ago" in old and "rerun the key instead" in old
    succeeded = not_redrivable({"status": "SUCCEEDED"}, now)
    assert succeeded == "it is SUCCEEDED; it succeeded: nothing to redrive"
    # AND Step Functions' reason, with the advice that fits it
    period = {
        "status": "FAILED",
        "redriveStatus": "NOT_REDRIVABLE",
        "redriveStatusReason": "Execution redrivable period exceeded.",
    }
    assert not_redrivable(period, now) == (
        "Execution redrivable period exceeded; rerun the key instead (the next attempt "
        "skips the steps done)"
    )


@pytest.mark.parametrize(
    ("described", "said", "not_said"),
    [
        (
            {"status": "RUNNING"},
            "it is still running: wait for it to end, or stop it",
            "rerun the key",
        ),
        (
            {
                "status": "RUNNING",
                "redriveStatus": "NOT_REDRIVABLE",
                "redriveStatusReason": "Execution is RUNNING and cannot be redriven.",
            },
            "Execution is RUNNING and cannot be redriven; it is still running",
            "rerun the key",
        ),
        (
            {
                "status": "FAILED",
                "redriveStatus": "NOT_REDRIVABLE",
                "redriveStatusReason": "Execution redrivable period exceeded.",
            },
            "Execution redrivable period exceeded; rerun the key instead",
            "still running",
        ),
    ],
)
def test_a_redrive_step_functions_would_refuse_is_refused_with_the_advice_that_fits(
    workflow: list[str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    described: dict[str, str],
    said: str,
    not_said: str,
) -> None:
    from exactly_once.ops import checkpoints

    machine = workflow[-1]
    order = json.dumps({"orderId": "order-7"})
    sfn = runtime.client("stepfunctions")
    a = sfn.start_execution(stateMachineArn=machine, name="order-7", input=order)["executionArn"]
    runtime.client("dynamodb").put_item(
        TableName="checkpoints",
        Item={"pk": {"S": "order-7"}, "first_execution": {"S": a}, "lease": {"S": a}},
    )
    # GIVEN the execution, still its key's, described as Step Functions would (moto keeps
    # no redriveStatus, and ends an execution of this machine at once)
    real = checkpoints.clients

    def clients(*where: Any) -> Any:
        made = real(*where)

        def client(service: str, config: Any = None) -> Any:
            found = made(service, config)
            found.meta.events.register(
                "after-call.sfn.DescribeExecution",
                lambda parsed, **kwargs: parsed.update(described),
            )
            return found

        return client

    monkeypatch.setattr(checkpoints, "clients", clients)
    # THEN the redrive is refused before any write, with what to do instead
    assert main(["redrive", "--execution", a, "--yes", *workflow]) == 2
    error = capsys.readouterr().err
    assert f"{a} cannot be redriven: " in error and said in error, error
    assert not_said not in error
