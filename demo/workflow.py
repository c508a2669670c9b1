"""The demo workflow the `local` stack's starters target (stack config `demoWorkflow: true`).
It is demo code: a starter in a real stack is given its own state machine."""

from __future__ import annotations

from typing import Any


def definition(wait_seconds: int = 2) -> dict[str, Any]:
    """Waits, then fails when the input's `key` contains 'fail' (to exercise retries)."""
    return {
        "Comment": "Demo target: succeeds unless the key contains 'fail'",
        "StartAt": "Work",
        "States": {
            "Work": {"Type": "Wait", "Seconds": wait_seconds, "Next": "Check"},
            "Check": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.key", "StringMatches": "*fail*", "Next": "Failed"}],
                "Default": "Done",
            },
            "Failed": {"Type": "Fail", "Error": "DemoFailure", "Cause": "key contains 'fail'"},
            "Done": {"Type": "Succeed"},
        },
    }
