"""`pulumi up` / `pulumi destroy` through the Automation API, for machines with the Pulumi CLI.

State lives in a local file backend (.pulumi-local/backend); the passphrase for
secrets comes from PULUMI_CONFIG_PASSPHRASE (empty by default, as for a dev stack).
"""

from __future__ import annotations

import os
from typing import Any

from deploy import STATE_DIR
from deploy.stack_config import ROOT, StackConfig


def _stack(stack_name: str) -> Any:
    from pulumi import automation as auto

    backend = STATE_DIR / "backend"
    backend.mkdir(parents=True, exist_ok=True)
    options = auto.LocalWorkspaceOptions(
        work_dir=str(ROOT),
        env_vars={
            "PULUMI_BACKEND_URL": f"file://{backend}",
            "PULUMI_CONFIG_PASSPHRASE": os.environ.get("PULUMI_CONFIG_PASSPHRASE", ""),
        },
    )
    return auto.create_or_select_stack(stack_name=stack_name, work_dir=str(ROOT), opts=options)


def up(config: StackConfig) -> dict[str, Any]:
    result = _stack(config.stack).up(on_output=print)
    return {key: value.value for key, value in result.outputs.items()}


def destroy(stack: str, endpoint: str, region: str) -> int:
    result = _stack(stack).destroy(on_output=print)
    return int((result.summary.resource_changes or {}).get("delete", 0))
