"""Run Pulumi code under the package's test mocks (exactly_once.testing: the ones users are
given) and return every resource it declared."""

from __future__ import annotations

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


def run(program: Callable[[], Any], config: dict[str, str] | None = None) -> RecordingMocks:
    """Declare resources with `program` under fresh mocks; wait for all of them."""
    return testing.run(program, config, project="exactly-once", stack="test")


def run_stack(stack: str = "local") -> RecordingMocks:
    """The real __main__.py with the real Pulumi.<stack>.yaml."""
    config = load(stack, ROOT).as_pulumi_config()
    return run(lambda: runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__"), config)
