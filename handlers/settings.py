"""Handler settings: one frozen dataclass per handler, the only place its environment names live.

A component sets a function's environment with `SomeSettings.environment(field=value, ...)`
(every field, by name, checked); the handler reads it back once per cold start with
`SomeSettings.current()`. A field's variable is its name in capitals. There are no
defaults on the handler side, so the component's defaults are the only ones; a variable
that is missing or malformed fails the cold start with its name, instead of running with
a value nobody chose. Tests construct settings directly.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import os
import typing
from collections.abc import Mapping
from typing import Any, Self, cast

E = typing.TypeVar("E", bound=enum.Enum)


class SettingsError(RuntimeError):
    """The function's environment does not match what its handler reads."""


@dataclasses.dataclass(frozen=True)
class Settings:
    @classmethod
    def variables(cls) -> dict[str, str]:
        """Field name -> environment variable name."""
        return {field.name: field.name.upper() for field in dataclasses.fields(cls)}

    @classmethod
    def environment(cls, **values: Any) -> dict[str, Any]:
        """The environment for these settings, every field given by name (values may be
        Pulumi inputs; `encode` turns plain ints, bools and dicts into strings)."""
        names = cls.variables()
        missing, unknown = set(names) - set(values), set(values) - set(names)
        if missing or unknown:
            raise SettingsError(
                f"{cls.__name__}: missing {sorted(missing)}, unknown {sorted(unknown)}"
            )
        return {names[name]: value for name, value in values.items()}

    @classmethod
    def current(cls) -> Self:
        """This function's settings, read from the environment once per cold start."""
        if cls not in _CURRENT:
            _CURRENT[cls] = cls.from_env()
        return cast(Self, _CURRENT[cls])

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Self:
        env = os.environ if env is None else env
        types = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for name, variable in cls.variables().items():
            if variable not in env:
                raise SettingsError(
                    f"{variable} is not set (deploy the function with its component)"
                )
            try:
                values[name] = _decode(types[name], env[variable])
            except ValueError as exc:
                raise SettingsError(f"{variable}={env[variable]!r}: {exc}") from None
        return cls(**values)


_CURRENT: dict[type[Settings], Settings] = {}  # one sandbox serves one invocation at a time


def encode(value: str | int | bool | Mapping[str, Any]) -> str:
    """A plain value as its environment string (the inverse of what `from_env` reads)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True)
    return str(value)


def choice(kind: type[E], value: object, what: str) -> E:
    """`value` as a member of the enum `kind` (members and their values both accepted);
    ValueError naming `what` and the choices otherwise."""
    try:
        return kind(value)
    except ValueError:
        choices = [member.value for member in kind]
        raise ValueError(f"{what} must be one of {choices}, got {value!r}") from None


def _decode(kind: Any, text: str) -> Any:
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return choice(kind, text, "the value")
    if kind is bool:
        if text not in ("true", "false"):
            raise ValueError("expected true or false")
        return text == "true"
    if kind is int:
        return int(text)
    if kind is str:
        return text
    return json.loads(text)  # dicts and lists
