"""NameDedupStarter under Pulumi mocks: wiring, least privilege, refusals."""

from __future__ import annotations

import json

import pytest

from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs
from tests.unit.pulumi_harness import run

WORKFLOW = {"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}


def deploy(**kwargs: object) -> object:
    if "state_machine_arn" not in kwargs and "durable_function_arn" not in kwargs:
        kwargs["definition"] = WORKFLOW
    args = NameDedupStarterArgs(bucket_name="uploads", **kwargs)  # type: ignore[arg-type]
    return run(lambda: NameDedupStarter("nd", args))


def test_wires_rule_target_function_and_dlq() -> None:
    mocks = deploy(key_strategy="key-sequencer", reuse_policy="ALLOW_DUPLICATE_FAILED_ONLY")
    rule = mocks.named("nd-rule")
    assert json.loads(rule.inputs["eventPattern"]) == {
        "source": ["aws.s3"],
        "detail-type": ["Object Created"],
        "detail": {"bucket": {"name": ["uploads"]}},
    }
    target = mocks.named("nd-target")
    assert target.inputs["arn"].endswith(":nd-starter")
    assert target.inputs["deadLetterConfig"]["arn"].endswith(":nd-dlq")
    function = mocks.named("nd-starter")
    env = function.inputs["environment"]["variables"]
    assert env["KEY_STRATEGY"] == "key-sequencer"
    assert env["REUSE_POLICY"] == "ALLOW_DUPLICATE_FAILED_ONLY"
    # the 0.3 handler string through 0.4 (handlers/starter.py: an upgrade's code and
    # configuration are updated apart), naming the same function
    assert function.inputs["handler"] == "exactly_once.handlers.starter.handler"
    from exactly_once.handlers import name_dedup, starter

    assert starter.handler is name_dedup.handler
    assert function.inputs["deadLetterConfig"]["targetArn"].endswith(":nd-dlq")
    permission = mocks.named("nd-invoke")
    assert permission.inputs["principal"] == "events.amazonaws.com"
    assert permission.inputs["sourceArn"].endswith(":rule/nd-rule")


def test_starter_may_start_only_its_own_state_machine() -> None:
    mocks = deploy(reuse_policy="ALLOW_DUPLICATE_FAILED_ONLY")
    policy = json.loads(mocks.named("nd-starter-policy").inputs["policy"])
    by_action = {tuple(s["Action"]): s["Resource"] for s in policy["Statement"]}
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:nd-workflow"
    assert by_action[("states:StartExecution",)] == [machine]
    # how a taken name's run ended, and a redrive of a failed one (never beside a new name)
    assert by_action[("states:DescribeExecution", "states:RedriveExecution")] == [
        "arn:aws:states:us-east-1:123456789012:execution:nd-workflow:*"
    ]
    assert by_action[("sqs:SendMessage",)] == ["arn:aws:sqs:us-east-1:123456789012:nd-dlq"]


def test_describe_execution_is_granted_only_to_the_policy_that_reads_it() -> None:
    mocks = deploy(reuse_policy="REJECT_DUPLICATE")
    policy = json.loads(mocks.named("nd-starter-policy").inputs["policy"])
    actions = [action for s in policy["Statement"] for action in s["Action"]]
    assert "states:DescribeExecution" not in actions
    assert "states:StartExecution" in actions


def test_an_existing_state_machine_is_used_as_given() -> None:
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:mine"
    mocks = deploy(state_machine_arn=arn)
    assert mocks.of_type("aws:sfn/stateMachine:StateMachine") == []
    env = mocks.named("nd-starter").inputs["environment"]["variables"]
    assert (env["BACKEND"], env["TARGET_ARN"]) == ("step-functions", arn)


def test_express_is_refused() -> None:
    with pytest.raises(ValueError, match="EXPRESS workflows do not deduplicate"):
        NameDedupStarterArgs(
            bucket_name="b", state_machine_type="EXPRESS", definition=WORKFLOW
        ).validate()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"bucket_name": "b", "key_strategy": "nope", "definition": WORKFLOW}, "unknown key"),
        ({"bucket_name": "b", "reuse_policy": "ALLOW_ALL", "definition": WORKFLOW}, "reuse_policy"),
        ({"definition": WORKFLOW}, "exactly one of bucket_name and event_pattern"),
        ({"bucket_name": "b", "state_machine_arn": "arn", "definition": {}}, "not both"),
    ],
)
def test_bad_args_are_refused_with_a_reason(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NameDedupStarterArgs(**kwargs).validate()


def test_a_starter_without_a_target_is_refused_naming_both_ways_to_give_one() -> None:
    with pytest.raises(ValueError, match="needs a target") as refused:
        NameDedupStarterArgs(bucket_name="b").validate()
    assert "state_machine_arn" in str(refused.value) and "definition" in str(refused.value)


DURABLE = "arn:aws:lambda:us-east-1:123456789012:function:orders:live"


@pytest.mark.parametrize("policy", ["REJECT_DUPLICATE", "ALLOW_DUPLICATE_FAILED_ONLY"])
def test_the_durable_backend_may_invoke_only_its_function_version(policy: str) -> None:
    # GIVEN the durable-function backend and a user's durable function, by alias
    mocks = deploy(backend="durable-function", durable_function_arn=DURABLE, reuse_policy=policy)
    # THEN no state machine is made or granted; the starter invokes that alias only
    assert mocks.of_type("aws:sfn/stateMachine:StateMachine") == []
    env = mocks.named("nd-starter").inputs["environment"]["variables"]
    assert (env["BACKEND"], env["TARGET_ARN"]) == ("durable-function", DURABLE)
    policy_doc = json.loads(mocks.named("nd-starter-policy").inputs["policy"])
    by_action = {tuple(s["Action"]): s["Resource"] for s in policy_doc["Statement"]}
    assert by_action[("lambda:InvokeFunction",)] == [DURABLE]
    assert by_action[("lambda:GetFunctionConfiguration",)] == [DURABLE]
    assert not [a for s in policy_doc["Statement"] for a in s["Action"] if a.startswith("states:")]
    listed = by_action.get(("lambda:ListDurableExecutionsByFunction",))
    if policy == "REJECT_DUPLICATE":
        assert listed is None  # only the retry policy asks how an execution ended
    else:
        assert listed == [DURABLE.rsplit(":", 1)[0], DURABLE]
    # AND it packages a botocore with the durable-execution APIs (a runtime's may be older)
    assert packaged_botocore(mocks.named("nd-starter").inputs["code"].path) >= (1, 42, 1)


def packaged_botocore(zip_path: str) -> tuple[int, ...]:
    import re
    import zipfile

    with zipfile.ZipFile(zip_path) as archive:
        init = archive.read("botocore/__init__.py").decode()
    found = re.search(r"__version__ = '([0-9.]+)'", init)
    assert found, "no botocore version in the zip"
    return tuple(int(part) for part in found.group(1).split("."))


def test_the_step_functions_backend_packages_no_sdk() -> None:
    import zipfile

    code = deploy().named("nd-starter").inputs["code"].path
    assert not [n for n in zipfile.ZipFile(code).namelist() if n.startswith("botocore/")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "durable-function"}, "needs durable_function_arn"),
        (
            {"backend": "durable-function", "durable_function_arn": DURABLE.rsplit(":", 1)[0]},
            "version or alias",
        ),
        (
            {"backend": "durable-function", "durable_function_arn": DURABLE, "definition": {}},
            "give no state_machine_arn or definition",
        ),
        ({"durable_function_arn": DURABLE, "definition": WORKFLOW}, "backend='durable-function'"),
        ({"backend": "lambda", "definition": WORKFLOW}, "backend"),
    ],
)
def test_a_durable_target_given_wrongly_is_refused_with_the_reason(
    kwargs: dict, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        NameDedupStarterArgs(bucket_name="b", **kwargs).validate()
