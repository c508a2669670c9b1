"""Step Functions refuses execution names AWS refuses; LocalStack takes any.

AWS (API_StartExecution, `name`): 1-80 characters, else ValidationException
("1 validation error detected: Value '...' at 'name' failed to satisfy constraint:
Member must have length less than or equal to 80"); and no whitespace, brackets
< > { } [ ], wildcards ? *, special characters " # % \\ ^ | ~ ` $ & , ; : /, or control
characters, else InvalidName. LocalStack starts an execution under any name, so a name
rule that would fail on AWS would pass here. A request handler on the gateway chain
refuses them as AWS does, before Step Functions sees the call.
"""

from __future__ import annotations

import re
from typing import Any

from localstack.runtime import hooks

MAX_NAME = 80
FORBIDDEN = re.compile(r"[\s<>{}\[\]?*\"#%\\^|~`$&,;:/\x00-\x1f\x7f-\x9f]")
OPERATIONS = ("StartExecution", "StartSyncExecution")


def refusal(name: Any) -> tuple[str, str] | None:
    """(error code, message) AWS answers for this name, or None if it is a valid one."""
    if not isinstance(name, str):
        return None  # no name: StartExecution makes one up
    if not 1 <= len(name) <= MAX_NAME:
        return (
            "ValidationException",
            f"1 validation error detected: Value '{name}' at 'name' failed to satisfy "
            f"constraint: Member must have length less than or equal to {MAX_NAME}",
        )
    if FORBIDDEN.search(name):
        return "InvalidName", f"Invalid Name: '{name}'"
    return None


def validate_execution_names(chain: Any, context: Any, response: Any) -> None:
    if (
        context.service is None
        or context.service.service_name != "stepfunctions"
        or context.operation is None
        or context.operation.name not in OPERATIONS
    ):
        return
    refused = refusal((context.service_request or {}).get("name"))
    if refused is not None:
        from localstack.aws.api import CommonServiceException

        raise CommonServiceException(*refused, status_code=400, sender_fault=True)


@hooks.on_infra_start()
def register_execution_name_validation() -> None:
    from localstack.aws import handlers

    if validate_execution_names not in handlers.serve_custom_service_request_handlers.handlers:
        handlers.serve_custom_service_request_handlers.append(validate_execution_names)
