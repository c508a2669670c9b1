"""Times as Step Functions writes `$$.State.EnteredTime`: ISO 8601, UTC, to the
millisecond, with a Z. What a state machine and a function of ours write into one item
(a message's `fired_at`, a checkpoint's `saved_at`) or one log stream compare alike."""

from __future__ import annotations

import datetime as dt


def iso_ms(epoch: float) -> str:
    """`epoch` (seconds) as `2026-12-05T23:49:28.624Z`."""
    moment = dt.datetime.fromtimestamp(epoch, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def parse(text: str) -> dt.datetime:
    """An ISO 8601 time with its offset (Z included) as an aware datetime; ValueError if it
    is not one (no offset included: a naive time is no instant)."""
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no offset")
    return moment


def epoch(text: str) -> float:
    """An ISO 8601 time with its offset as epoch seconds."""
    return parse(text).timestamp()
