"""One registration idiom for the patterns' pluggable parts (the ETL's strategies, the
starter's backends): an abstract base class whose subclasses register themselves by being
defined, under their `name`."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def concrete(cls: type[T], base: type) -> type[T]:
    """`cls`, refused (TypeError) if it leaves one of `base`'s abstract methods undefined.
    Asked in `__init_subclass__`, which runs before ABCMeta marks the class abstract."""
    missing = sorted(
        name
        for name in getattr(base, "__abstractmethods__", ())
        if getattr(getattr(cls, name, None), "__isabstractmethod__", False)
    )
    if missing:
        raise TypeError(f"{cls.__name__} is abstract: it defines no {', '.join(missing)}")
    return cls
