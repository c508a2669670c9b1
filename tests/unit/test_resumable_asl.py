"""The generated resumable workflow: structure for 1/3/10 steps, and runs under moto's
Step Functions interpreter with its DynamoDB integration (Lambda results queued)."""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws
from moto.moto_api._internal.models import moto_api_backend

from exactly_once.components import resumable_asl as asl
from exactly_once.handlers import resumable, runtime
from exactly_once.handlers.executions import execution_arn
from exactly_once.handlers.resumable import ResumableSettings
from exactly_once.ops.checkpoints import Checkpoints

ACCOUNT = "123456789012"
CHECKPOINT = "arn:aws:lambda:us-east-1:123456789012:function:checkpoint"


def steps(
    count: int, arn: str = "arn:aws:lambda:us-east-1:123456789012:function:f"
) -> list[asl.Step]:
    return [asl.Step(f"s{i}", arn) for i in range(1, count + 1)]


@pytest.mark.parametrize("count", [1, 3, 10])
def test_definition_is_well_formed(count: int) -> None:
    definition = asl.definition(steps(count), "table", CHECKPOINT, "$.orderId")
    states = definition["States"]
    assert definition["StartAt"] in states
    targets = []
    for state in states.values():
        targets += [state.get("Next"), state.get("Default")]
        targets += [c["Next"] for c in state.get("Choices", []) + state.get("Catch", [])]
    assert {t for t in targets if t} <= set(states)  # every transition lands on a state
    assert [s for s in states.values() if s.get("End")] == [states["Finish"]]
    # one checkpoint write per step on the normal path
    saves = [n for n, s in states.items() if n.startswith("Save")]
    assert len(saves) == count
    for state in states.values():  # JSONPath only: LocalStack runs neither JSONata nor Assign
        assert "Assign" not in state and "QueryLanguage" not in state


def test_transition_counts_against_the_reference() -> None:
    assert asl.transitions(4) == 11 and asl.reference_transitions(4) == 16
    assert asl.transitions(10, skipped=5) == 13
    assert asl.reference_transitions(10, skipped=5, first_run=False) == 23


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ([], "at least one"),
        (["a", "a"], "unique"),
        (["bad name"], "must match"),
        (["Finish"], "reserved"),
    ],
)
def test_bad_steps_are_refused(names: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        asl.definition([asl.Step(n, "arn") for n in names], "t", CHECKPOINT, "$.k")


def test_bad_key_path_is_refused() -> None:
    with pytest.raises(ValueError, match="key path"):
        asl.definition(steps(1), "t", CHECKPOINT, "$.results.x")


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    config = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
    with mock_aws(config=config):
        ddb = runtime.client("dynamodb")
        ddb.create_table(
            TableName="checkpoints",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        role = runtime.client("iam").create_role(RoleName="r", AssumeRolePolicyDocument="{}")
        code = io.BytesIO()
        with zipfile.ZipFile(code, "w") as archive:
            archive.writestr("a.py", "def h(e, c): return 1")
        function = runtime.client("lambda").create_function(
            FunctionName="step",
            Runtime="python3.12",
            Role=role["Role"]["Arn"],
            Handler="a.h",
            Code={"ZipFile": code.getvalue()},
        )["FunctionArn"]
        # moto's interpreter returns queued results for every Lambda, so the checkpoint
        # function's Load is run here, directly, and its answer queued (see `run`);
        # handlers/resumable.py has its own tests (test_resumable.py).
        definition = asl.definition(steps(3, function), "checkpoints", function, "$.orderId")
        machine = runtime.client("stepfunctions").create_state_machine(
            name="wf", definition=json.dumps(definition), roleArn=role["Role"]["Arn"]
        )["stateMachineArn"]
        yield {"machine": machine, "ops": Checkpoints("checkpoints", machine)}


CONFIG = ResumableSettings("checkpoints", ["s1", "s2", "s3"], 3600, 3600)


def run(
    machine: str, document: dict[str, Any], outputs: list[Any], name: str = "run-1"
) -> tuple[dict, list[str]]:
    # Load as the execution about to start (the lease is its ARN, `$$.Execution.Id`)
    arn = execution_arn(machine, name)
    loaded = resumable.load(CONFIG, str(document["orderId"]), arn)
    finished = {"completed": True, "already": False}
    for output in [loaded, *outputs, finished]:  # what each Lambda returns, in order
        moto_api_backend.set_lambda_simple_result(json.dumps(output), ACCOUNT, "us-east-1")
    sfn = runtime.client("stepfunctions")
    sfn.start_execution(stateMachineArn=machine, name=name, input=json.dumps(document))
    for _ in range(200):
        described = sfn.describe_execution(executionArn=arn)
        if described["status"] != "RUNNING":
            break
        time.sleep(0.02)
    entered = [
        e["stateEnteredEventDetails"]["name"]
        for e in sfn.get_execution_history(executionArn=arn)["events"]
        if e["type"].endswith("StateEntered")
    ]
    return described, entered


def test_a_fresh_run_writes_one_checkpoint_per_step(world: dict[str, Any]) -> None:
    described, entered = run(world["machine"], {"orderId": 7}, [{"n": 1}, {"n": 2}, {"n": 3}])
    assert described["status"] == "SUCCEEDED"
    assert entered == ["Load", "Resume", "s1", "Saves1", "s2", "Saves2", "s3", "Saves3", "Finish"]
    assert len(entered) == asl.transitions(3)
    results = json.loads(described["output"])["results"]
    run_id = described["executionArn"]
    assert results == {f"s{i}": {"done": True, "output": {"n": i}, "by": run_id} for i in (1, 2, 3)}
    saved = world["ops"].show("7")  # numbers are keyed by their text
    assert saved["steps"] == results


def test_done_steps_are_skipped_and_their_outputs_reloaded(world: dict[str, Any]) -> None:
    world["ops"].mark_done("k", "s1", output={"from": "checkpoint"})
    world["ops"].mark_done("k", "s2", output={"from": "hand"})
    described, entered = run(world["machine"], {"orderId": "k"}, [{"n": 3}])
    assert entered == ["Load", "Resume", "s3", "Saves3", "Finish"]
    results = json.loads(described["output"])["results"]
    assert results["s1"]["output"] == {"from": "checkpoint"}
    assert results["s3"]["output"] == {"n": 3}


def test_a_step_marked_by_hand_mid_sequence_is_skipped_via_resync(world: dict[str, Any]) -> None:
    world["ops"].mark_done("k", "s2")
    described, entered = run(world["machine"], {"orderId": "k"}, [{"n": 1}, {"n": 3}])
    assert described["status"] == "SUCCEEDED"
    assert entered == [
        "Load",
        "Resume",
        "s1",
        "Saves1",
        "Resyncs1",
        "Resume",
        "s3",
        "Saves3",
        "Finish",
    ]


def test_a_run_whose_lease_was_taken_over_writes_nothing_and_runs_no_further_step(
    world: dict[str, Any],
) -> None:
    # GIVEN run A whose lease another run B took over (A failed, B took the key and
    # finished s1; then A was redriven: RedriveExecution resumes it at its failed step)
    load = resumable.load

    def taken_over(*args: Any, **kwargs: Any) -> dict[str, Any]:
        loaded = load(*args, **kwargs)
        world["ops"].ddb.update_item(
            TableName="checkpoints",
            Key={"pk": {"S": "k"}},
            UpdateExpression="SET lease = :b",
            ExpressionAttributeValues={":b": {"S": "arn:aws:states:::execution:wf:run-B"}},
        )
        return loaded

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(resumable, "load", taken_over)
        described, entered = run(world["machine"], {"orderId": "k"}, [{"n": 1}, {"n": 2}])
    # THEN A fails LeaseLost at its first Save: no entry written, no step after it run
    # (before, its Saves were unconditional: A ran s2 and s3 again over B's checkpoint)
    assert described["status"] == "FAILED"
    assert described.get("error") == "LeaseLost"
    assert entered == ["Load", "Resume", "s1", "Saves1", "Resyncs1", "LeaseLost"]
    assert world["ops"].show("k")["steps"]["s1"] == {}
