"""The component package: the schema the analyzer infers (served by the real host over
gRPC), every input and output typed and described, other languages' inputs constructing
each component, and the per-language examples checked against the schema."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime.sync_await import _sync_await

from exactly_once.components.config import as_args
from exactly_once.components.package import COMPONENTS, NAME, SECRET_OUTPUTS, schema
from tests.unit.pulumi_harness import ROOT, run

SCHEMA = schema()
RESOURCES = SCHEMA["resources"]
TYPES = SCHEMA["types"]


def token(component: type) -> str:
    return f"{NAME}:index:{component.__name__}"


def args_class(component: type) -> Any:
    return typing.get_type_hints(component.__init__)["args"]


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_the_host_serves_the_schema_over_grpc() -> None:
    # The entry point PulumiPlugin.yaml names, started as Pulumi starts a plugin (its
    # first argument the engine's address), from another directory
    grpc = pytest.importorskip("grpc")  # installed with pulumi: never skipped in practice
    from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

    host = subprocess.Popen(
        [sys.executable, str(ROOT / "provider"), "127.0.0.1:1"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(sys.prefix),
    )
    try:
        assert host.stdout is not None
        port = int(host.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = provider_pb2_grpc.ResourceProviderStub(channel)
            answer = stub.GetSchema(provider_pb2.GetSchemaRequest(version=0), timeout=60)
    finally:
        host.terminate()
        host.wait(10)
    served = json.loads(answer.schema)
    assert served == SCHEMA
    assert sorted(served["resources"]) == sorted(token(c) for c in COMPONENTS)


def test_the_plugin_manifest_names_the_host() -> None:
    manifest = yaml.safe_load((ROOT / "PulumiPlugin.yaml").read_text())
    assert manifest["runtime"]["name"] == "python"
    assert (ROOT / manifest["main"] / "__main__.py").is_file()


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_every_input_is_typed_described_and_required_only_without_a_default(
    component: type,
) -> None:
    resource = RESOURCES[token(component)]
    args = args_class(component)
    fields = {camel(field.name): field for field in dataclasses.fields(args)}
    assert set(resource["inputProperties"]) == set(fields)
    for name, prop in resource["inputProperties"].items():
        assert "type" in prop or "$ref" in prop, name
        assert prop.get("description"), f"{component.__name__}.{name} has no description"
    required = {
        name
        for name, field in fields.items()
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    }
    assert set(resource.get("requiredInputs", [])) == required
    assert resource.get("description"), component.__name__


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_every_output_is_typed_and_described(component: type) -> None:
    resource = RESOURCES[token(component)]
    # its own annotations and those of the package's classes it inherits (Component)
    public = {
        camel(n)
        for klass in component.__mro__
        if klass.__module__.startswith("exactly_once.")
        for n in vars(klass).get("__annotations__", {})
        if not n.startswith("_")
    }
    assert set(resource["properties"]) == public
    for name, prop in resource["properties"].items():
        assert "type" in prop or "$ref" in prop, name
        assert prop.get("description"), f"{component.__name__}.{name} has no description"


def test_every_choice_is_an_enum_of_its_python_values() -> None:
    from exactly_once.components.etl import Strategy, Trigger
    from exactly_once.handlers.executions import ReusePolicy

    for enum in (Strategy, Trigger, ReusePolicy):
        [values] = [t["enum"] for n, t in TYPES.items() if n.endswith(f":{enum.__name__}")]
        assert [v["value"] for v in values] == [member.value for member in enum]


# -- what another language sends ------------------------------------------------------
def wire(inputs: dict[str, Any]) -> dict[str, Any]:
    """Inputs as the engine delivers them to the host: JSON values, numbers as floats."""
    return json.loads(json.dumps(inputs), parse_int=float)


ARN = "arn:aws:lambda:us-east-1:123456789012:function:"
OTHER_LANGUAGE_INPUTS: dict[str, dict[str, Any]] = {
    "NameDedupStarter": {
        "bucketName": "uploads",
        "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:orders",
        "reusePolicy": "ALLOW_DUPLICATE_FAILED_ONLY",
        "timeout": 20,
    },
    "ApiGatewayStarter": {
        "keySource": "$.orderId",
        "definition": json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
        "authorization": "AWS_IAM",
        "throttleBurstLimit": 50,
    },
    "Scheduler": {"channels": {"email": ARN + "email"}, "windowMinutes": 90},
    "ResumableWorkflow": {
        "steps": [
            {"name": "reserve", "function": ARN + "reserve"},
            {
                "name": "charge",
                "function": ARN + "charge",
                "retry": [{"errorEquals": ["Timeout"], "maxAttempts": 2}],
            },
        ],
    },
    "IdempotentEtl": {
        "transform": "etl_transforms.jsonl_gzip:transform",
        "transformSource": str(ROOT / "examples" / "etl"),
        "strategy": "control-record",
        "partSizeMb": 16,
        "inputBucketName": "teams-uploads",
        "trigger": "eventbridge",
    },
}


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_another_languages_inputs_construct_the_component(component: type) -> None:
    from pulumi.provider.experimental.component import ComponentProvider

    provider = ComponentProvider(COMPONENTS, NAME)
    definition = provider._component_defs[component.__name__]
    mapped = provider.map_inputs(wire(OTHER_LANGUAGE_INPUTS[component.__name__]), definition)
    args = as_args(args_class(component), mapped)
    # the wire's floats are ints again, its strings enum members, its dicts args classes
    for field in dataclasses.fields(args):
        value = getattr(args, field.name)
        if field.name in (
            "timeout",
            "window_minutes",
            "late_tolerance_seconds",
            "part_size_mb",
            "throttle_burst_limit",
        ):
            assert type(value) is int
    made: list[Any] = []
    mocks = run(lambda: made.append(component("from-another-language", mapped)))
    assert [r for r in mocks.resources if r.custom]
    # AND exactly its credential outputs are secrets: state and logs never hold them in clear
    secret = set(SECRET_OUTPUTS.get(component.__name__, ()))
    for name in SCHEMA["resources"][token(component)]["properties"]:
        value = getattr(made[0], re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower())
        if isinstance(value, pulumi.Output):
            assert _sync_await(value.is_secret()) == (name in secret), name


@pytest.mark.parametrize("component", COMPONENTS, ids=lambda c: c.__name__)
def test_the_schema_marks_exactly_the_credential_outputs_secret(component: type) -> None:
    outputs = SCHEMA["resources"][token(component)]["properties"]
    marked = {name for name, spec in outputs.items() if spec.get("secret")}
    assert marked == set(SECRET_OUTPUTS.get(component.__name__, ()))


# -- the per-language examples --------------------------------------------------------
class Expr:
    """A value computed by the program (a variable, a call): its type is not checked."""


def check(value: Any, prop: dict[str, Any], where: str) -> None:
    if isinstance(value, Expr) or (isinstance(value, str) and re.fullmatch(r"\$\{[^}]+\}", value)):
        return
    if "$ref" in prop:
        definition = TYPES[prop["$ref"].split("#/types/")[1]]
        if "enum" in definition:
            assert value in [v["value"] for v in definition["enum"]], f"{where}: {value!r}"
        else:
            check_object(value, definition["properties"], definition.get("required", []), where)
        return
    kind = prop["type"]
    expected = {
        "string": str,
        "integer": int,
        "number": (int, float),
        "boolean": bool,
        "array": list,
        "object": dict,
    }[kind]
    assert isinstance(value, expected), f"{where}: {value!r} is not {kind}"
    if kind == "array":
        for i, item in enumerate(value):
            check(item, prop["items"], f"{where}[{i}]")
    if kind == "object":
        for key, item in value.items():
            check(item, prop["additionalProperties"], f"{where}.{key}")


def check_object(value: Any, props: dict[str, Any], required: list[str], where: str) -> None:
    assert isinstance(value, dict), f"{where}: {value!r} is not an object"
    unknown = set(value) - set(props)
    assert not unknown, f"{where}: no such properties {sorted(unknown)}"
    missing = set(required) - set(value)
    assert not missing, f"{where}: required {sorted(missing)} missing"
    for key, item in value.items():
        check(item, props[key], f"{where}.{key}")


def check_component(type_token: str, properties: dict[str, Any], where: str) -> None:
    resource = RESOURCES[type_token]
    required = resource.get("requiredInputs", [])
    check_object(properties, resource["inputProperties"], required, where)


def test_the_yaml_example_uses_the_schema() -> None:
    program = yaml.safe_load((ROOT / "examples" / "yaml" / "Pulumi.yaml").read_text())
    used = {r["type"] for r in program["resources"].values()}
    assert used and used <= set(RESOURCES)
    for name, resource in program["resources"].items():
        check_component(resource["type"], resource.get("properties", {}), name)


def test_the_typescript_example_uses_the_schema() -> None:
    source = (ROOT / "examples" / "typescript" / "index.ts").read_text()
    found = re.findall(r"new exactlyOnce\.(\w+)\(\"([^\"]+)\", ", source)
    assert {component for component, _ in found} == {c.__name__ for c in COMPONENTS}
    for component, name in found:
        start = source.index(f'new exactlyOnce.{component}("{name}", ') + len(
            f'new exactlyOnce.{component}("{name}", '
        )
        properties, _ = TypeScriptLiteral(source, start).value()
        check_component(f"{NAME}:index:{component}", properties, name)


class TypeScriptLiteral:
    """Just enough of TypeScript's literals: objects, arrays, strings, numbers, booleans;
    anything else (a variable, a call, a template string) is an `Expr`."""

    def __init__(self, text: str, position: int) -> None:
        self.text, self.at = text, position

    def value(self) -> tuple[Any, int]:
        self.skip()
        char = self.text[self.at]
        if char == "{":
            return self.object(), self.at
        if char == "[":
            return self.array(), self.at
        if char in "'\"":
            end = self.text.index(char, self.at + 1)
            literal, self.at = self.text[self.at + 1 : end], end + 1
            return literal, self.at
        match = re.compile(r"-?\d+(\.\d+)?|true\b|false\b").match(self.text, self.at)
        if match:
            self.at = match.end()
            word = match.group()
            return (word == "true") if word in ("true", "false") else json.loads(word), self.at
        self.expression()
        return Expr(), self.at

    def object(self) -> dict[str, Any]:
        self.at += 1
        result: dict[str, Any] = {}
        while self.skip() != "}":
            key = re.compile(r"\w+").match(self.text, self.at)
            assert key, self.text[self.at : self.at + 40]
            self.at = key.end()
            self.skip()
            assert self.text[self.at] == ":"
            self.at += 1
            result[key.group()], _ = self.value()
            if self.skip() == ",":
                self.at += 1
        self.at += 1
        return result

    def array(self) -> list[Any]:
        self.at += 1
        items = []
        while self.skip() != "]":
            item, _ = self.value()
            items.append(item)
            if self.skip() == ",":
                self.at += 1
        self.at += 1
        return items

    def expression(self) -> None:
        """Skip to the end of this value: the next ',' '}' or ']' outside brackets."""
        depth = 0
        while True:
            char = self.text[self.at]
            if char in "([{":
                depth += 1
            elif char in ")]}":
                if depth == 0:
                    return
                depth -= 1
            elif char == "," and depth == 0:
                return
            elif char in "'\"`":
                self.at = self.text.index(char, self.at + 1)
            self.at += 1

    def skip(self) -> str:
        while self.text[self.at].isspace():
            self.at += 1
        return self.text[self.at]


SHIPPED_OR_USING = (
    "components",
    "handlers",
    "ops",
    "deploy",
    "demo",
    "benchmarks",
    "tests",
    "examples",
    "provider",
)
UNNAMESPACED = re.compile(r"^\s*(from|import) (components|handlers|ops)(\.|\s|$)", re.M)


def test_nothing_imports_the_packages_by_their_bare_folder_names() -> None:
    # One name per module: `handlers.errors.BadInput` beside `exactly_once.handlers.errors.
    # BadInput` would be two classes, and an except clause would miss one.
    files = [ROOT / "__main__.py"] + [
        path for folder in SHIPPED_OR_USING for path in (ROOT / folder).rglob("*.py")
    ]
    offenders = [str(p.relative_to(ROOT)) for p in files if UNNAMESPACED.search(p.read_text())]
    assert offenders == []


def test_the_python_example_builds_every_component() -> None:
    # Python programs use the classes themselves; the example runs as `pulumi up` would
    # run it from this directory, under mocks
    import runpy

    mocks = run(lambda: runpy.run_path(str(ROOT / "examples" / "python" / "__main__.py")))
    built = {r.typ for r in mocks.resources}
    assert {token(c) for c in COMPONENTS} <= built
