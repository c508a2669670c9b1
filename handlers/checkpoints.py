"""The resumable workflow's checkpoint item: one DynamoDB item per business key, shared by
the state machine that writes it (components/resumable_asl.py) and the operators' tools
that read and change it (ops/checkpoints.py).

    pk                 the business key
    first_execution    the execution that created the item
    out_<step>         the step's entry as a JSON string: "{}" until the step is done,
                       then {"done": true, "output": ...}
    saved_at           when the lease holder last saved a step ($$.State.EnteredTime: ISO
                       8601, UTC, milliseconds); a takeover reads it (handlers/resumable.py)
"""

from __future__ import annotations

EMPTY = "{}"  # a step not done yet
SAVED_AT = "saved_at"


def attribute(step: str) -> str:
    """The item attribute holding `step`'s entry."""
    return f"out_{step}"
