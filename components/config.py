"""A component's args dataclass from a stack-config object (camelCase keys), or from the
dict the Pulumi package host passes for a program in another language."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, Union

T = TypeVar("T")

# An arg with a default: optional in the Pulumi package schema, which the analyzer infers
# from annotations alone (it ignores dataclass defaults and reads only `X | None` as
# optional), while Python's type checkers see plain `T`, as the value never is None.
if TYPE_CHECKING:
    Defaulted = Union[T, T]  # noqa: UP007 (a generic alias that is just T)
else:
    Defaulted = T | None  # subscripted at runtime: Defaulted[int] is int | None

# A choice is written `Defaulted[TheEnum | TheEnumName]`, beside the enum a Literal of its
# values: a program passes a member or its string (as the docs and a stack's config do) and
# type checkers take either; the enum goes first, as the Pulumi package analyzer reads only
# the first type of an optional union (so the schema lists the enum's values). Each
# Literal is held to its enum by tests/unit/test_choices.py.


def snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def args_from_config(cls: type[T], values: dict[str, Any] | None, **fixed: Any) -> T:
    """`cls(**values)` with camelCase keys, nested args too (e.g. `platform`); an unknown
    key is an error naming the valid ones."""
    fields = {field.name: field.type for field in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = dict(fixed)
    for key, value in (values or {}).items():
        name = snake(key)
        if name not in fields:
            valid = ", ".join(sorted(fields))
            raise ValueError(f"{cls.__name__}: unknown config key {key!r} (valid: {valid})")
        kwargs[name] = _from_config(fields[name], value)
    return cls(**kwargs)


def _from_config(kind: Any, value: Any) -> Any:
    """A config value as its field's type: camelCase dicts of nested args dataclasses (in
    dicts or lists too) turned into them; anything else as given."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        kinds = [k for k in typing.get_args(kind) if k is not type(None)]
        kind = kinds[0] if len(kinds) == 1 else kind
    if isinstance(kind, type) and dataclasses.is_dataclass(kind) and isinstance(value, Mapping):
        return args_from_config(kind, dict(value))
    if typing.get_origin(kind) is dict and isinstance(value, Mapping):
        item = typing.get_args(kind)[1]
        return {k: _from_config(item, v) for k, v in value.items()}
    if typing.get_origin(kind) is list and isinstance(value, list):
        [item] = typing.get_args(kind)
        return [_from_config(item, v) for v in value]
    return value


def as_args(cls: type[T], args: T | Mapping[str, Any]) -> T:
    """`args` as `cls`: the instance a Python program gives, or the dict (Python names,
    nested args as dicts) that `pulumi.provider.experimental` builds from the inputs a
    TypeScript, Go, C#, Java or YAML program sends."""
    if isinstance(args, cls):
        # validated again: a program may have changed a field since __post_init__
        for value in (args, *vars(args).values()):  # nested options too (roles, platform)
            # (is_dataclass first: getattr on a pulumi Output lifts, it never says None)
            if dataclasses.is_dataclass(value) and hasattr(value, "validate"):
                value.validate()
        return args
    if not isinstance(args, Mapping):
        raise TypeError(f"{cls.__name__}: expected {cls.__name__} or a dict, got {args!r}")
    # (field.type is the annotation object itself: args modules do not postpone them)
    return cls(
        **{
            field.name: _nested(field.type, args[field.name])
            for field in dataclasses.fields(cls)  # type: ignore[arg-type]
            if field.name in args
        }
    )


def _nested(kind: Any, value: Any) -> Any:
    """Dicts of nested args dataclasses (in lists or dicts) turned into them, and whole
    floats into the ints they were (the wire carries numbers as floats; the host's own
    int conversion in pulumi 3.272 is overwritten by the float it converted)."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        kinds = [k for k in typing.get_args(kind) if k is not type(None)]
        kind = kinds[0] if len(kinds) == 1 else kind
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if typing.get_origin(kind) is list and isinstance(value, list):
        [item] = typing.get_args(kind)
        return [_nested(item, v) for v in value]
    if typing.get_origin(kind) is dict and isinstance(value, Mapping):
        item = typing.get_args(kind)[1]
        return {k: _nested(item, v) for k, v in value.items()}
    if isinstance(kind, type) and dataclasses.is_dataclass(kind) and isinstance(value, Mapping):
        return as_args(kind, value)
    return value
