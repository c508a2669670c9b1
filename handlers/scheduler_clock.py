"""The scheduler's last sub-second step: return at a message's publish time, never before.

A Step Functions Wait counts whole seconds (AWS truncates a timestamp's fraction;
LocalStack also ends up to a second early), so the waiting execution Waits until a whole
second a little before `publishTime`, claims the message, and then calls this function,
which sleeps out the rest by its own clock. The target is invoked by the state machine
right after it returns. Nothing is imported beyond the standard library: the function is
cold for most messages, and its cold start falls inside the lead, not after the instant.
"""

from __future__ import annotations

import time
from typing import Any

MARGIN_SECONDS = 0.5  # left of the function's own timeout, to return instead of timing out


class NotYet(Exception):
    """The publish time is further away than this invocation can sleep: the state
    machine retries (it only happens if a Wait woke far too early)."""


def handler(event: Any, context: Any) -> dict[str, float]:
    publish_time = float(event["publishTime"])
    budget = context.get_remaining_time_in_millis() / 1000 - MARGIN_SECONDS
    deadline = time.monotonic() + budget
    # Sleep by the wall clock (the target's clock is a wall clock too), re-checking after
    # every sleep: a sleep may end early by a clock step.
    while (left := publish_time - time.time()) > 0:
        if time.monotonic() + left > deadline:
            raise NotYet(f"{left:.3f}s to publishTime, more than this invocation can sleep")
        time.sleep(left)
    return {"late": time.time() - publish_time}
