"""Deploy a stack with the Pulumi CLI (Automation API) or, without it, to LocalStack."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from deploy.stack_config import ROOT

STATE_DIR = ROOT / ".pulumi-local"


def outputs_path(stack: str) -> Path:
    return STATE_DIR / f"{stack}.outputs.json"


def pulumi_cli_available() -> bool:
    """The CLI and its AWS resource plugin, both needed for a real `pulumi up`."""
    if shutil.which("pulumi") is None:
        return False
    listed = subprocess.run(["pulumi", "plugin", "ls"], capture_output=True, text=True, check=False)
    return listed.returncode == 0 and any(
        line.split()[:2] == ["aws", "resource"] for line in listed.stdout.splitlines()
    )


__all__ = ["STATE_DIR", "outputs_path", "pulumi_cli_available"]
