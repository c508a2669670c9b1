"""Read Pulumi.yaml and Pulumi.<stack>.yaml the way the Pulumi CLI would."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class StackConfig:
    project: str
    stack: str
    values: dict[str, Any]  # fully qualified keys, e.g. "aws:region"

    @property
    def region(self) -> str:
        return str(self.values.get("aws:region") or "us-east-1")

    @property
    def endpoint(self) -> str:
        return str(self.values.get(f"{self.project}:endpoint") or "")

    def as_pulumi_config(self) -> dict[str, str]:
        """What the language host hands the program: strings, objects as JSON."""
        return {
            key: value if isinstance(value, str) else json.dumps(value)
            for key, value in self.values.items()
        }


def load(stack: str, root: Path = ROOT) -> StackConfig:
    project = yaml.safe_load((root / "Pulumi.yaml").read_text())["name"]
    path = root / f"Pulumi.{stack}.yaml"
    if not path.exists():
        stacks = sorted(p.name.split(".")[1] for p in root.glob("Pulumi.*.yaml"))
        raise SystemExit(
            f"no stack {stack!r}: {path.name} is missing (stacks: {', '.join(stacks)})"
        )
    raw = (yaml.safe_load(path.read_text()) or {}).get("config") or {}
    values = {key if ":" in key else f"{project}:{key}": value for key, value in raw.items()}
    return StackConfig(project, stack, values)
