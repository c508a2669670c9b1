"""Execution names derived from event keys: the heart of name dedup.

A name is a pure function of (key, attempt): the same event always maps to the same
name, so a redelivery collides with the first execution instead of running twice.

Layout: ``<body>`` for attempt 0 and ``<body>-r<attempt>`` for deliberate retries.
The body is the key itself when it is short and made only of ``[0-9A-Za-z_-]`` (the
characters CloudWatch accepts), otherwise ``<readable prefix>--<hash>``. A verbatim
key that could be mistaken for either suffix is hashed too, so the mapping stays
injective: two different (key, attempt) pairs never share a name, short of a
collision of 80-bit SHA-256 prefixes.

Step Functions takes names of up to 80 characters; Lambda durable functions'
DurableExecutionName up to 64 of the same characters ([a-zA-Z0-9-_]): `limit` is which.
A durable name is scoped to its function (`durable_execution_name`).
"""

from __future__ import annotations

import hashlib
import re

from exactly_once.handlers.errors import BadEvent

MAX_NAME = 80  # Step Functions limit
DURABLE_MAX_NAME = 64  # Lambda Invoke's DurableExecutionName limit
MAX_ATTEMPT = 9999
_SUFFIX_ROOM = len(f"-r{MAX_ATTEMPT}")
MAX_BODY = MAX_NAME - _SUFFIX_ROOM
HASH_CHARS = 20  # 80 bits
# fullmatch, never `$`: `$` also matches before a trailing newline, and AWS refuses a
# name with one.
_SAFE = re.compile(r"[0-9A-Za-z_-]+")
_UNSAFE_RUN = re.compile(r"[^0-9A-Za-z_-]+")
# Suffixes our own layout uses; a verbatim key ending like this is hashed instead.
_RESERVED = re.compile(rf"(--[0-9a-f]{{{HASH_CHARS}}}|-r\d+)\Z")
HIDDEN_PREFIX = "h"


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:HASH_CHARS]


def readable(key: str) -> str:
    """The key with every run of characters outside [0-9A-Za-z_-] replaced by '_'."""
    return _UNSAFE_RUN.sub("_", key)


def name_body(key: str, hide: bool = False, limit: int = MAX_NAME) -> str:
    if not key:
        raise BadEvent("the event key is empty")
    if hide:
        return f"{HIDDEN_PREFIX}--{key_hash(key)}"
    room = limit - _SUFFIX_ROOM
    if len(key) <= room and _SAFE.fullmatch(key) and not _RESERVED.search(key):
        return key
    prefix = readable(key)[: room - HASH_CHARS - 2]
    return f"{prefix}--{key_hash(key)}"


def execution_name(key: str, attempt: int = 0, hide: bool = False, limit: int = MAX_NAME) -> str:
    """The execution name for this key and attempt (0 = first run), of at most `limit`
    characters."""
    if not 0 <= attempt <= MAX_ATTEMPT:
        raise ValueError(f"attempt must be in 0..{MAX_ATTEMPT}, got {attempt}")
    body = name_body(key, hide, limit)
    return body if attempt == 0 else f"{body}-r{attempt}"


DURABLE_SCOPE_CHARS = 8  # 32 bits of the function's hash


def durable_execution_name(
    function_arn: str, key: str, attempt: int = 0, hide: bool = False
) -> str:
    """DurableExecutionName for this key and attempt on this durable function:
    `<scope>-<name>`, `scope` a hash of the unqualified function ARN. The Lambda developer
    guide calls durable execution names unique per account and Region, the API model per
    function: scoped, two functions never take each other's names under either reading
    (their starters would count each other's events duplicates), while a function's
    versions and aliases share its names (a new version still sees the old ones)."""
    unqualified = ":".join(function_arn.split(":")[:7])  # arn:aws:lambda:R:A:function:NAME
    scope = hashlib.sha256(unqualified.encode()).hexdigest()[:DURABLE_SCOPE_CHARS]
    limit = DURABLE_MAX_NAME - DURABLE_SCOPE_CHARS - 1
    return f"{scope}-{execution_name(key, attempt, hide, limit)}"


def is_valid_name(name: str, limit: int = MAX_NAME) -> bool:
    """Valid for StartExecution (or, limit 64, Invoke's DurableExecutionName) and for
    CloudWatch logging."""
    return 1 <= len(name) <= limit and bool(_SAFE.fullmatch(name))
