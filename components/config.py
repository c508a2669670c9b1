"""Turn a stack-config object (camelCase keys) into a component's args dataclass."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeVar

T = TypeVar("T")


def snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def args_from_config(cls: type[T], values: dict[str, Any] | None, **fixed: Any) -> T:
    """`cls(**values)` with camelCase keys; an unknown key is an error naming the valid ones."""
    fields = {field.name for field in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs = dict(fixed)
    for key, value in (values or {}).items():
        name = snake(key)
        if name not in fields:
            valid = ", ".join(sorted(fields))
            raise ValueError(f"{cls.__name__}: unknown config key {key!r} (valid: {valid})")
        kwargs[name] = value
    return cls(**kwargs)
