"""One registration idiom for the patterns' pluggable parts (the ETL's strategies, the
starter's backends): an abstract base class whose subclasses register themselves by being
defined, under their `name`."""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")


def register(registry: dict[Any, Any], cls: type[T], base: type) -> None:
    """Put an instance of `cls` in `registry` under `cls.name`. Refused (TypeError) when
    `cls` leaves an abstract method undefined (its base's or its own: asked here, as
    `__init_subclass__` runs before ABCMeta marks the class abstract), or when its name is
    taken: a subclass of a registered class does not silently replace it."""
    missing = sorted(
        name
        for name in {*getattr(base, "__abstractmethods__", ()), *dir(cls)}
        if getattr(getattr(cls, name, None), "__isabstractmethod__", False)
    )
    if missing:
        raise TypeError(f"{cls.__name__} is abstract: it defines no {', '.join(missing)}")
    name = getattr(cls, "name")  # noqa: B009 (a class attribute the subclasses set)
    if name in registry:
        raise TypeError(
            f"{cls.__name__}: {name!r} is registered already, by "
            f"{type(registry[name]).__name__}: give it a name of its own"
        )
    registry[name] = cls()
