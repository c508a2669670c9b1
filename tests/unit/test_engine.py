"""The LocalStack engine: loud on what it cannot create, complete for what we declare."""

from __future__ import annotations

import pulumi
import pytest

from deploy.localstack_engine import HANDLERS, Engine, UnsupportedResource
from deploy.stack_config import load
from tests.unit.pulumi_harness import ROOT, run_stack


def test_an_unmapped_resource_type_fails_loudly_naming_it() -> None:
    engine = Engine("test", "http://127.0.0.1:1", "us-east-1")
    args = pulumi.runtime.MockResourceArgs(
        typ="aws:ec2/instance:Instance", name="vm", inputs={}, custom=True
    )
    with pytest.raises(UnsupportedResource, match=r"'aws:ec2/instance:Instance'.*'vm'"):
        engine.new_resource(args)


def test_a_got_resource_is_read_never_created() -> None:
    # (`StateMachine.get`: the Scheduler reads a channel's machine for its type; the mock
    # monitor's read carries no `custom`)
    engine = Engine("test", "http://127.0.0.1:1", "us-east-1")
    arn = "arn:aws:states:us-east-1:000000000000:stateMachine:fast"
    read: list[str] = []

    class StepFunctions:
        def describe_state_machine(self, stateMachineArn: str) -> dict[str, str]:
            read.append(stateMachineArn)
            return {"name": "fast", "type": "EXPRESS"}

    engine.client = lambda service: StepFunctions()  # type: ignore[method-assign]
    args = pulumi.runtime.MockResourceArgs(
        typ="aws:sfn/stateMachine:StateMachine",
        name="c-channel-x-machine",
        inputs={},
        resource_id=arn,
    )
    assert engine.new_resource(args) == (
        arn,
        {"id": arn, "arn": arn, "name": "fast", "type": "EXPRESS"},
    )
    assert read == [arn] and engine.created == []
    # AND a read of a type it cannot read fails loudly, never creating one
    other = pulumi.runtime.MockResourceArgs(
        typ="aws:ec2/instance:Instance", name="vm", inputs={}, resource_id="i-1"
    )
    with pytest.raises(UnsupportedResource, match="cannot read"):
        engine.new_resource(other)


def test_an_unknown_invoke_fails_loudly() -> None:
    engine = Engine("test", "http://127.0.0.1:1", "us-east-1")
    call = pulumi.runtime.MockCallArgs(token="aws:ec2/getAmi:getAmi", args={}, provider="")
    with pytest.raises(UnsupportedResource, match="getAmi"):
        engine.call(call)


def test_it_refuses_a_stack_that_targets_real_aws() -> None:
    with pytest.raises(SystemExit, match="LocalStack only"):
        Engine("name-dedup", "", "us-east-1")


def test_every_resource_type_of_the_local_stack_has_a_handler() -> None:
    declared = {r.typ for r in run_stack("local").resources if r.custom}
    declared -= {t for t in declared if t.startswith("pulumi:providers:")}
    assert declared, "the local stack declares no resources"
    assert declared <= set(HANDLERS), sorted(declared - set(HANDLERS))


def test_stack_config_is_read_like_the_cli() -> None:
    config = load("local", ROOT)
    assert config.endpoint == "http://127.0.0.1:4566"
    assert config.as_pulumi_config()["exactly-once:nameDedup"].startswith("{")


def test_a_missing_stack_names_the_existing_ones() -> None:
    with pytest.raises(SystemExit, match="local"):
        load("nope", ROOT)
