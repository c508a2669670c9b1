"""Execution names: valid, short, deterministic, injective."""

from __future__ import annotations

import random
import string

import pytest

from exactly_once.handlers.errors import BadEvent
from exactly_once.handlers.names import (
    DURABLE_MAX_NAME,
    HASH_CHARS,
    MAX_ATTEMPT,
    MAX_NAME,
    execution_name,
    is_valid_name,
    key_hash,
)

INVALID_CHARS = ' <>{}[]?*"#%\\^|~$&,;:/`\t\n\x00\x7f'


def random_keys(count: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    alphabet = string.ascii_letters + string.digits + "-_./ " + INVALID_CHARS + "éü中"
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 300))) for _ in range(count)]


def test_short_safe_key_is_used_verbatim() -> None:
    assert execution_name("order-123_A") == "order-123_A"


def test_attempts_get_a_suffix() -> None:
    assert execution_name("order-123", attempt=2) == "order-123-r2"


@pytest.mark.parametrize("key", ["in/a b.csv", "x" * 200, "a:b", "ünïcode", "tab\there"])
def test_unsafe_or_long_keys_get_a_readable_prefix_and_hash(key: str) -> None:
    name = execution_name(key)
    assert name.endswith("--" + key_hash(key))
    assert is_valid_name(name)


def test_readable_prefix_keeps_the_safe_characters() -> None:
    assert execution_name("in/a b.csv").startswith("in_a_b_csv--")


def test_hidden_keys_reveal_nothing() -> None:
    name = execution_name("alice@example.com", hide=True)
    assert "alice" not in name
    assert name == f"h--{key_hash('alice@example.com')}"


LIMITS = pytest.mark.parametrize(
    "limit", [MAX_NAME, DURABLE_MAX_NAME], ids=["step-functions", "durable-function"]
)


@LIMITS
def test_every_name_is_valid_for_its_service_and_cloudwatch(limit: int) -> None:
    for key in random_keys(2000):
        for attempt in (0, 1, MAX_ATTEMPT):
            for hide in (False, True):
                name = execution_name(key, attempt, hide, limit)
                assert 1 <= len(name) <= limit
                assert is_valid_name(name, limit), name
                assert not set(name) & set(INVALID_CHARS)


def test_names_are_stable_across_runs() -> None:
    # Golden values: a change here would make every in-flight redelivery a new execution.
    assert execution_name("in/a b.csv") == "in_a_b_csv--" + key_hash("in/a b.csv")
    assert key_hash("in/a b.csv") == "efa24e2b4dea62ee4454"
    assert len(key_hash("x")) == HASH_CHARS


@LIMITS
def test_distinct_keys_and_attempts_never_share_a_name(limit: int) -> None:
    tricky = [
        "a-b",
        "a/b",
        "a b",
        "a_b",
        "abc-r1",  # looks like attempt 1 of "abc"
        "abc",
        f"a_b--{key_hash('a/b')}",  # looks like the hashed name of "a/b"
        f"h--{key_hash('secret')}",  # looks like a hidden name
        "secret",
        "x" * 58,  # the longest verbatim durable body
        "x" * 59,
        "x" * 74,  # the longest verbatim Step Functions body
        "x" * 75,
    ]
    keys = set(tricky + random_keys(3000, seed=11))
    seen: dict[str, tuple[str, int]] = {}
    for key in keys:
        for attempt in (0, 1, 2, 10):
            name = execution_name(key, attempt, limit=limit)
            assert seen.setdefault(name, (key, attempt)) == (key, attempt), name


def test_an_empty_key_is_rejected() -> None:
    with pytest.raises(BadEvent):
        execution_name("")


def test_attempt_out_of_range_is_rejected() -> None:
    with pytest.raises(ValueError, match="attempt"):
        execution_name("k", attempt=MAX_ATTEMPT + 1)


def test_a_durable_name_keeps_a_short_key_and_hashes_what_step_functions_would_keep() -> None:
    assert execution_name("order-123", limit=DURABLE_MAX_NAME) == "order-123"
    key = "x" * 70  # verbatim for Step Functions (<= 74), too long for 64 with a suffix
    assert execution_name(key) == key
    durable = execution_name(key, attempt=MAX_ATTEMPT, limit=DURABLE_MAX_NAME)
    assert durable.endswith(f"--{key_hash(key)}-r{MAX_ATTEMPT}")
    assert len(durable) <= DURABLE_MAX_NAME


@pytest.mark.parametrize("key", ["order-1\n", "order-1\r\n", "\norder-1", "order-1-r2\n"])
def test_a_key_with_a_newline_is_hashed_never_used_verbatim(key: str) -> None:
    # `$` matches before a trailing newline: such a key once passed as safe, and AWS
    # refuses a name holding one
    name = execution_name(key)
    assert "\n" not in name and "\r" not in name
    assert name != key and is_valid_name(name)
    assert not is_valid_name("order-1\n")
    assert execution_name(key) != execution_name(key.strip())


def test_durable_names_are_scoped_to_their_function_not_its_version() -> None:
    from exactly_once.handlers.names import durable_execution_name

    orders = "arn:aws:lambda:us-east-1:123456789012:function:orders"
    refunds = "arn:aws:lambda:us-east-1:123456789012:function:refunds"
    # two functions' starters with overlapping keys never take each other's names (AWS's
    # guide calls names unique per account and Region: they would drop each other's events)
    assert durable_execution_name(f"{orders}:1", "k") != durable_execution_name(f"{refunds}:1", "k")
    # a function's versions and aliases share its names: a new version still sees the old
    assert (
        durable_execution_name(f"{orders}:1", "k")
        == durable_execution_name(f"{orders}:live", "k")
        == durable_execution_name(orders, "k")
    )
    names = set()
    for key in ["k", "k-r1", "a/b", "x" * 200, "alice@example.com"]:
        for attempt in (0, 1, MAX_ATTEMPT):
            name = durable_execution_name(f"{orders}:2", key, attempt)
            assert is_valid_name(name, DURABLE_MAX_NAME), name
            names.add(name)
    assert len(names) == 15
