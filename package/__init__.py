"""exactly-once: exactly-once effects from at-least-once AWS event sources.

One namespace for everything a user installs or a function runs, so nothing here takes a
generic top-level name (`handlers`, `components`) from a user's own code:
- `exactly_once.components`: the five Pulumi components (and their package, `package.py`);
- `exactly_once.handlers`: the Lambda-side code, which every function's zip carries under
  this same name (`exactly_once.handlers.etl.transform_once` in your own function);
- `exactly_once.ops`: `python -m exactly_once.ops`, checkpoints and re-runs (pattern 4).
In the repository this file is package/__init__.py and the subpackages are the top-level
folders `components/`, `handlers/` and `ops/` (pyproject.toml maps them).
"""


def __getattr__(name: str) -> str:
    """`exactly_once.__version__`, read from the installed distribution when asked (not at
    import: every function's zip carries this file, and a cold start should not pay for
    it; in a zip, with no distribution, it is "unknown")."""
    if name != "__version__":
        raise AttributeError(f"module 'exactly_once' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pulumi-exactly-once")
    except PackageNotFoundError:
        return "unknown"
