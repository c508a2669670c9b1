"""The five components as one Pulumi component package, usable from every Pulumi language.

`provider/` hosts them (`pulumi package add <this repository>`, see
docs/pulumi-package.md); the package's schema is inferred from the components' type
annotations by `pulumi.provider.experimental`'s analyzer (plus which outputs are secret),
so nothing generated is kept.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
from typing import TYPE_CHECKING, Any

import pulumi

from exactly_once.components.api_starter import ApiGatewayStarter
from exactly_once.components.etl import IdempotentEtl
from exactly_once.components.name_dedup import NameDedupStarter
from exactly_once.components.resumable import ResumableWorkflow
from exactly_once.components.scheduler import Scheduler

if TYPE_CHECKING:
    from pulumi.provider.experimental.component import ComponentProvider

NAME = "exactly-once"  # the type tokens' package: exactly-once:index:<Component>
# One place for the version: pyproject.toml, read from the installed distribution.
VERSION = importlib.metadata.version("pulumi-exactly-once")
# PEP 440's forms the project writes (X.Y.Z, aN/bN/rcN, .devN; tooling/release.py).
PEP440 = re.compile(r"(\d+\.\d+\.\d+)(?:(a|b|rc)(\d+))?(?:\.dev(\d+))?")
SEMVER_PRE = {"a": "alpha", "b": "beta", "rc": "rc"}
COMPONENTS: list[type[pulumi.ComponentResource]] = [
    NameDedupStarter,
    ApiGatewayStarter,
    Scheduler,
    ResumableWorkflow,
    IdempotentEtl,
]


# Outputs that carry a credential, by component: the schema marks them `secret`, so every
# language's SDK and the engine keep them encrypted in state and out of logs. The
# analyzer reads types only, with no marker for secrets; the values are Output.secret too.
SECRET_OUTPUTS: dict[str, tuple[str, ...]] = {
    "ApiGatewayStarter": ("apiKey",),
    "Scheduler": ("apiKey",),
}


def schema_version(version: str = VERSION) -> str:
    """The version as the schema states it: semver, as Pulumi's package metaschema requires
    of `version` (its pattern refuses PEP 440's `0.5.0.dev0`), in PEP 440's order: `.devN`
    is `-0.dev.N` (a numeric identifier ranks below `alpha`, so a dev version comes before
    the pre-releases and the release it leads to, as in PEP 440), `1.0.0rc1` is
    `1.0.0-rc.1`. A release reads the same in both. A dev version of a pre-release
    (`1.0.0rc1.dev2`) has no semver of the same order (any identifier added after `rc.1`
    ranks it above `1.0.0-rc.1`): refused."""
    found = PEP440.fullmatch(version)
    if not found:
        raise ValueError(f"version {version!r} is not one pyproject.toml writes (X.Y.Z[aN][.devN])")
    release, kind, number, dev = found.groups()
    if kind and dev is not None:
        raise ValueError(
            f"version {version!r}: a dev version of a pre-release has no semver of the same "
            f"order; use {release}.dev{dev} or {release}{kind}{number}"
        )
    if kind:
        return f"{release}-{SEMVER_PRE[kind]}.{number}"
    return f"{release}-0.dev.{dev}" if dev is not None else release


def component_provider() -> ComponentProvider:
    """The package's provider: pulumi's component provider, serving the analyzer's schema
    with SECRET_OUTPUTS marked."""
    from pulumi.provider.experimental.component import ComponentProvider

    served = ComponentProvider(COMPONENTS, NAME, None, schema_version())
    document = json.loads(served.schema or "{}")
    for component, names in SECRET_OUTPUTS.items():
        outputs = document["resources"][f"{NAME}:index:{component}"]["properties"]
        for output in names:
            outputs[output]["secret"] = True
    served.schema = json.dumps(document)
    return served


def schema() -> dict[str, Any]:
    """The package schema, as the host serves it to `pulumi package add`."""
    document: dict[str, Any] = json.loads(component_provider().schema or "{}")
    return document


def serve(args: list[str]) -> None:
    """Host the package: Pulumi runs provider/ with the engine's address (PulumiPlugin.yaml)."""
    from pulumi.provider import main

    main(component_provider(), args)
