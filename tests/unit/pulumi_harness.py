"""Run Pulumi code under the package's test mocks (exactly_once.testing: the ones users are
given) and return every resource it declared."""

from __future__ import annotations

import functools
import runpy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deploy.stack_config import load
from exactly_once import testing
from exactly_once.testing import ACCOUNT, REGION, STREAM_LABEL, arn_of
from exactly_once.testing import Mocks as RecordingMocks

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["ACCOUNT", "REGION", "ROOT", "STREAM_LABEL", "RecordingMocks", "arn_of", "run"]
__all__ += ["COMPONENTS", "FUNCTION_ARN", "WORKFLOW", "component"]

FUNCTION_ARN = "arn:aws:lambda:us-east-1:123456789012:function:f"
WORKFLOW = '{"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}'
COMPONENTS = ("name-dedup", "api-starter", "scheduler", "resumable", "etl")


def component(kind: str, **options: Any) -> Any:
    """One of the five components, named "c", with the least args of its own plus
    `options` common to all (roles=..., platform=...)."""
    from exactly_once.components.api_starter import ApiGatewayStarter, ApiGatewayStarterArgs
    from exactly_once.components.etl import IdempotentEtl, IdempotentEtlArgs
    from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs
    from exactly_once.components.resumable import (
        ResumableWorkflow,
        ResumableWorkflowArgs,
        WorkflowStep,
    )
    from exactly_once.components.scheduler import Scheduler, SchedulerArgs

    if kind == "name-dedup":
        return NameDedupStarter(
            "c", NameDedupStarterArgs(bucket_name="b", definition=WORKFLOW, **options)
        )
    if kind == "api-starter":
        return ApiGatewayStarter(
            "c", ApiGatewayStarterArgs(definition=WORKFLOW, bucket_name="b", **options)
        )
    if kind == "scheduler":
        return Scheduler("c", SchedulerArgs({"demo": FUNCTION_ARN}, **options))
    if kind == "resumable":
        steps = [WorkflowStep("a", FUNCTION_ARN)]
        return ResumableWorkflow("c", ResumableWorkflowArgs(steps, **options))
    if kind == "etl":
        transform = "etl_transforms.csv_jsonl:transform"
        return IdempotentEtl(
            "c", IdempotentEtlArgs(transform, transform_source="examples/etl", **options)
        )
    raise ValueError(f"no component {kind!r} (one of {', '.join(COMPONENTS)})")


def run(program: Callable[[], Any], config: dict[str, str] | None = None) -> RecordingMocks:
    """Declare resources with `program` under fresh mocks; wait for all of them."""
    return testing.run(program, config, project="exactly-once", stack="test")


@functools.cache
def run_stack(stack: str = "local") -> RecordingMocks:
    """The real __main__.py with the real Pulumi.<stack>.yaml: declared once per stack in a
    process (the program's output depends on nothing else, and the tests only read it;
    the `local` stack's run is 10-30 s, and four modules read it)."""
    config = load(stack, ROOT).as_pulumi_config()
    return run(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"), config)
