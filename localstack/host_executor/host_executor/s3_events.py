"""S3's EventBridge events carry the object key as it is, as on AWS.

LocalStack URL-encodes the key of every S3 event it sends (`quote(key)`), EventBridge's
included. AWS URL-encodes it only in S3 event notifications (the `Records` form:
"The object key name value is URL encoded", S3 user guide, notification-content-structure);
in EventBridge events `detail.object.key` is the key itself (S3 user guide, ev-events:
e.g. `raw/health-check/2023-08-08T14:03:40.532432.zip`, colons and all). Handlers written
for AWS would decode twice or never on LocalStack; this on_infra_start hook sends the
EventBridge form as AWS does. Notifications keep LocalStack's encoding (spaces as `%20`
where AWS writes `+`), which a form-decoding handler reads alike.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

from localstack.runtime import hooks


@hooks.on_infra_start()
def raw_keys_in_eventbridge_events() -> None:
    from localstack.services.s3.notifications import EventBridgeNotifier

    original = EventBridgeNotifier._get_event_payload
    if getattr(original, "raw_keys", False):
        return

    def payload(ctx: Any, config_id: Any = None) -> Any:
        entry = original(ctx, config_id)
        detail = json.loads(entry["Detail"])
        if isinstance(detail.get("object"), dict) and "key" in detail["object"]:
            detail["object"]["key"] = unquote(ctx.key_name)
            entry["Detail"] = json.dumps(detail)
        return entry

    payload.raw_keys = True  # type: ignore[attr-defined]
    EventBridgeNotifier._get_event_payload = staticmethod(payload)
