"""What the e2e tests check after a refused or throttled start: the starter logged that the
event will be retried, and Lambda's asynchronous retry started it exactly once."""

from __future__ import annotations

from typing import Any

from tooling.clients import dead_letters, eventually, executions, log_lines, steady


def retry_warning(out: dict[str, Any], tag: str) -> str:
    """The starter's first log line about the event tagged `tag`."""
    return eventually(lambda: [line for line in log_lines(out["functionName"]) if tag in line])[0]


def started_once_by_the_retry(out: dict[str, Any], tag: str) -> None:
    """Lambda retries a failed asynchronous invoke about a minute later: one execution,
    nothing dead-lettered."""
    eventually(lambda: executions(out["stateMachineArn"], tag), timeout=150, interval=2)
    assert steady(lambda: len(executions(out["stateMachineArn"], tag)), seconds=3) == 1
    assert dead_letters(out["dlqUrl"], tag, wait=0) == []
