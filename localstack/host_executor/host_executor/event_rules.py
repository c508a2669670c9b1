"""A disabled EventBridge rule matches nothing, as on AWS.

LocalStack's EventBridge matches every rule of the bus against an event, whatever the
rule's state: a rule turned off with DisableRule still invokes its targets. AWS: "A
disabled rule won't match any events, and won't self-trigger if it has a schedule
expression" (EventBridge API reference, DisableRule; it adds that events may still match
for "a short period of time" after the call). This on_infra_start hook skips a DISABLED
rule when an event is matched, so a test that turns a rule off (an event that never
reaches its target: tests/e2e/test_audit.py) sees what AWS would do.
"""

from __future__ import annotations

from typing import Any

from localstack.runtime import hooks


@hooks.on_infra_start()
def disabled_rules_match_nothing() -> None:
    from localstack.services.events.provider import EventsProvider

    original = EventsProvider._process_rules
    if getattr(original, "skips_disabled", False):
        return

    def process(self: Any, rule: Any, *args: Any, **kwargs: Any) -> Any:
        if str(getattr(rule, "state", "")) == "DISABLED":
            return None
        return original(self, rule, *args, **kwargs)

    process.skips_disabled = True  # type: ignore[attr-defined]
    EventsProvider._process_rules = process
