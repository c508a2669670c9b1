"""Every choice an args class takes is its enum or the enum's value as a string (the docs'
tables and a stack's config write strings): the hint says both, the Literal beside each
enum lists exactly its values, and the enum comes first, the type the Pulumi package
analyzer puts in the schema (components/config.py)."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import pkgutil
import typing
from typing import Any, Literal

import pytest

from exactly_once import components
from exactly_once.components.etl import IdempotentEtlArgs, Trigger
from exactly_once.components.platform import FunctionOptions, LogFormat, PlatformOptions
from exactly_once.handlers.etl import Strategy
from tests.unit.pulumi_harness import ROOT


def args_classes() -> list[type[Any]]:
    """The dataclasses of the components' modules (args, options and their parts)."""
    found = []
    for module in pkgutil.iter_modules(components.__path__):
        loaded = importlib.import_module(f"{components.__name__}.{module.name}")
        found += [
            value
            for value in vars(loaded).values()
            if dataclasses.is_dataclass(value)
            and isinstance(value, type)
            and value.__module__ == loaded.__name__
        ]
    return found


# (field.type: the annotation itself, as the args modules do not postpone them; the
# analyzer reads it so)
CHOICES = [
    pytest.param(cls, field.name, field.type, id=f"{cls.__name__}.{field.name}")
    for cls in args_classes()
    for field in dataclasses.fields(cls)
    if any(
        isinstance(kind, type) and issubclass(kind, enum.Enum)
        for kind in typing.get_args(field.type)
    )
]


def test_the_args_have_choices() -> None:
    assert len(CHOICES) >= 14


@pytest.mark.parametrize(("cls", "name", "hint"), CHOICES)
def test_a_choice_takes_its_enum_or_exactly_its_values(cls: type, name: str, hint: Any) -> None:
    kinds = [kind for kind in typing.get_args(hint) if kind is not type(None)]
    assert len(kinds) == 2, (cls, name, hint)
    members, literal = kinds
    assert isinstance(members, type) and issubclass(members, enum.Enum), "the enum first"
    assert typing.get_origin(literal) is Literal, (cls, name, hint)
    assert set(typing.get_args(literal)) == {member.value for member in members}


def test_a_string_is_taken_as_its_member_and_a_member_as_itself() -> None:
    etl = IdempotentEtlArgs(
        "etl_transforms.csv_jsonl:transform",
        transform_source=str(ROOT / "examples" / "etl"),
        strategy="control-record",
        trigger=Trigger.EVENTBRIDGE,
    )
    assert (etl.strategy, etl.trigger) == (Strategy.CONTROL_RECORD, Trigger.EVENTBRIDGE)
    assert PlatformOptions(log_format="JSON").log_format is LogFormat.JSON
    assert FunctionOptions(architecture="arm64").architecture == "arm64"
