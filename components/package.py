"""The five components as one Pulumi component package, usable from every Pulumi language.

`provider/` hosts them (`pulumi package add <this repository>`, see
docs/pulumi-package.md); the package's schema is inferred from the components' type
annotations by `pulumi.provider.experimental`'s analyzer, so nothing generated is kept.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

import pulumi

from exactly_once.components.api_starter import ApiGatewayStarter
from exactly_once.components.etl import IdempotentEtl
from exactly_once.components.name_dedup import NameDedupStarter
from exactly_once.components.resumable import ResumableWorkflow
from exactly_once.components.scheduler import Scheduler

NAME = "exactly-once"  # the type tokens' package: exactly-once:index:<Component>
# One place for the version: pyproject.toml, read from the installed distribution.
VERSION = importlib.metadata.version("pulumi-exactly-once")
COMPONENTS: list[type[pulumi.ComponentResource]] = [
    NameDedupStarter,
    ApiGatewayStarter,
    Scheduler,
    ResumableWorkflow,
    IdempotentEtl,
]


def schema() -> dict[str, Any]:
    """The package schema, as the host serves it to `pulumi package add`."""
    from pulumi.provider.experimental.analyzer import Analyzer
    from pulumi.provider.experimental.schema import generate_schema

    result = Analyzer(NAME).analyze(COMPONENTS)
    generated = generate_schema(
        NAME,
        VERSION,
        None,
        result["component_definitions"],
        result["type_definitions"],
        sorted(result["dependencies"], key=lambda d: f"{d.name}{d.version}"),  # as the host does
    )
    document: dict[str, Any] = generated.to_json()
    return document
