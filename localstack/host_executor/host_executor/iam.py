"""IAM enforcement for LocalStack in host mode, where the community edition enforces none.

On by default in `localstack/up` (EXACTLY_ONCE_IAM=enforce; `audit` records denials
without refusing, `off` removes the handlers). A request handler on LocalStack's gateway
chain, beside `faults.py`, attributes every AWS call to its principal and asks
`iam_policy.decide` what AWS would answer:

- a **role session**: the temporary keys LocalStack's STS issued. Lambda sandboxes run
  with their execution role's (LocalStack assumes it when it starts an environment, as
  Lambda does), Step Functions tasks with the state machine's role, API Gateway AWS
  integrations with their credentials role, event source mappings with the function's
  role. Checked against the role's inline and customer-managed policies, plus the
  resource's own policy (function policy, queue policy) where one exists.
- a **service principal** (LocalStack's internal calls carry `service_principal` and
  `source_arn` with no keys of their own): `lambda:InvokeFunction` from events, s3 or
  apigateway is checked against the function's resource policy, `sqs:SendMessage`
  against the queue policy, `sts:AssumeRole` against the role's trust policy. Any
  other such call has no AWS counterpart to check; it is counted as *unchecked*, with
  its reason, and passed.
- the **admin**: any other key (the tests, the deploy engine, the demo use `test`). Exempt.

A denied call gets AWS's AccessDenied error for the service, before the service sees
it. S3 also answers 403 AccessDenied instead of 404 for a missing key (GetObject,
HeadObject, CopyObject's source) when the caller lacks s3:ListBucket on the bucket,
as AWS documents for GetObject and HeadObject. An operation a checked principal makes
that `iam_policy.required` does not know is denied, never passed.

`GET /_localstack/exactly-once/iam` reports calls checked / allowed / denied by
principal, the unchecked ones by reason, and every denial; `DELETE` resets it.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import threading
from typing import Any

from localstack.runtime import hooks

from host_executor import iam_policy
from host_executor.iam_policy import Decision, Principal

LOG = logging.getLogger("localstack.exactly_once.iam")
PATH = "/_localstack/exactly-once/iam"
MODES = ("enforce", "audit", "off")
MAX_DENIALS = 1000
# The error AWS answers a refused call with: (code, HTTP status), by LocalStack service name.
ACCESS_DENIED = {
    "s3": ("AccessDenied", 403),
    "sqs": ("AccessDenied", 403),
    "sts": ("AccessDenied", 403),
    "lambda": ("AccessDeniedException", 403),
}
DEFAULT_DENIED = ("AccessDeniedException", 400)  # DynamoDB, Step Functions, Logs, EventBridge
# Why a call LocalStack makes without a role is not checked: AWS makes no such call, or
# makes it as the service itself with no permission of ours involved. By "service.Operation"
# or by service.
UNCHECKED_REASONS = {
    "kinesis": "LocalStack keeps DynamoDB streams in Kinesis (AWS makes no such call)",
    "cloudwatch.PutMetricData": "Lambda's invocation metrics (AWS publishes them itself)",
    "events.PutEvents": "S3 event notifications to EventBridge (AWS needs no permission)",
    "lambda.Invoke": "an event source mapping or Lambda's async queue invoking a function "
    "(AWS needs no permission)",
    "s3": "LocalStack's own storage of function code (AWS makes no such call)",
    "dynamodb": "LocalStack's own bookkeeping of tables and streams (AWS makes no such call)",
    "lambda.GetFunction": "LocalStack's own lookup of a function (AWS makes no such call)",
}


def unchecked_reason(service: str, operation: str) -> str:
    name = f"{service}.{operation}"
    return UNCHECKED_REASONS.get(name) or UNCHECKED_REASONS.get(service) or "no caller identity"


def mode() -> str:
    value = os.environ.get("EXACTLY_ONCE_IAM", "off").lower()
    if value not in MODES:
        raise ValueError(f"EXACTLY_ONCE_IAM must be one of {MODES}, got {value!r}")
    return value


# -- the report -------------------------------------------------------------------------------
class Report:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.principals: dict[str, collections.Counter[str]] = collections.defaultdict(
                collections.Counter
            )
            self.unchecked: collections.Counter[str] = collections.Counter()
            self.exempt = 0
            self.denials: list[dict[str, Any]] = []
            self.denied = 0

    def checked(self, principal: str, allowed: bool) -> None:
        with self._lock:
            counts = self.principals[principal]
            counts["checked"] += 1
            counts["allowed" if allowed else "denied"] += 1

    def deny(self, principal: str, operation: str, action: str, resource: str, reason: str) -> None:
        with self._lock:
            self.denied += 1
            if len(self.denials) < MAX_DENIALS:
                self.denials.append(
                    {
                        "seq": self.denied,  # so a test can tell the denials it provoked
                        "principal": principal,
                        "operation": operation,
                        "action": action,
                        "resource": resource,
                        "reason": reason,
                    }
                )

    def skip(self, reason: str) -> None:
        with self._lock:
            self.unchecked[reason] += 1

    def admin(self) -> None:
        with self._lock:
            self.exempt += 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            principals = {name: dict(counts) for name, counts in self.principals.items()}
            return {
                "mode": mode(),
                "totals": {
                    "checked": sum(c.get("checked", 0) for c in principals.values()),
                    "allowed": sum(c.get("allowed", 0) for c in principals.values()),
                    "denied": self.denied,
                    "unchecked": sum(self.unchecked.values()),
                    "exempt": self.exempt,
                },
                "principals": principals,
                "unchecked": dict(self.unchecked.most_common()),
                "denials": list(self.denials),
            }


REPORT = Report()


# -- who calls ----------------------------------------------------------------------------------
def _access_key(context: Any) -> str | None:
    from localstack.utils.aws.request_context import extract_access_key_id_from_auth_header

    key = extract_access_key_id_from_auth_header(context.request.headers)
    if key:
        return key
    credential = context.request.args.get("X-Amz-Credential", "")  # a presigned URL
    return credential.split("/", 1)[0] or None


def _session(access_key: str, account: str) -> Any:
    from localstack.services.sts.models import sts_stores

    # LocalStack's STS keeps every account's temporary credentials in its us-east-1 store.
    creds = sts_stores[account]["us-east-1"].credentials.get(access_key)
    if creds is None:
        for account_id, _, store in sts_stores.iter_stores():
            if account_id != account and access_key in store.credentials:
                return store.credentials[access_key]
    return creds


TEMPORARY_PREFIXES = ("ASIA", "LSIA")


def caller(context: Any) -> tuple[str, Principal | None, str]:
    """(kind, principal, source ARN); kind is role, unknown, service, internal or admin.
    Worked out once per request (the response handler asks again)."""
    found = getattr(context, "_exactly_once_caller", None)
    if found is None:
        found = context._exactly_once_caller = _identify(context)
    return found


def _identify(context: Any) -> tuple[str, Principal | None, str]:
    key = _access_key(context) or ""
    params = context.internal_request_params or {}
    if key.startswith(TEMPORARY_PREFIXES):
        session = _session(key, context.account_id)
        if session is None:
            return "unknown", Principal(arn=f"unknown temporary key {key}"), ""
        return "role", Principal(arn=session.arn), params.get("source_arn") or ""
    if context.is_internal_call:
        service = params.get("service_principal")
        if service:
            return (
                "service",
                Principal(service=f"{service}.amazonaws.com"),
                params.get("source_arn") or "",
            )
        return "internal", None, ""
    return "admin", None, ""


# -- what the principals may do ------------------------------------------------------------------
def _role(role_arn: str) -> Any:
    from localstack.services.iam.models import iam_stores

    account = role_arn.split(":")[4]
    return iam_stores[account]["us-east-1"].ROLES.get(role_arn.rsplit("/", 1)[-1])


def identity_policies(principal: Principal) -> list[str]:
    """The role's inline and customer-managed policy documents."""
    from localstack.services.iam.models import iam_stores

    entity = _role(principal.role_arn)
    if entity is None:
        raise LookupError(f"role {principal.role_arn} does not exist")
    documents = list(entity.inline_policies.values())
    store = iam_stores[principal.role_arn.split(":")[4]]["us-east-1"]
    for arn in entity.attached_policy_arns:
        managed = store.MANAGED_POLICIES.get(arn)
        if managed is None:
            raise LookupError(f"attached policy {arn} is not evaluated (AWS-managed or missing)")
        version = managed.policy.get("DefaultVersionId")
        documents.append(managed.versions[version]["Document"])
    return documents


def resource_policy(action: str, resource: str, region: str, account: str) -> str | None:
    """The resource's own policy, where this project's resources have one."""
    if action == "lambda:InvokeFunction":
        from localstack.services.lambda_.invocation.models import lambda_stores

        parts = resource.split(":")
        function = lambda_stores[parts[4]][parts[3]].functions.get(parts[6])
        if function is None:
            return None
        statements = [
            statement
            for permission in function.permissions.values()
            for statement in permission.policy.Statement
        ]
        return json.dumps({"Version": "2012-10-17", "Statement": statements})
    if action.startswith("sqs:"):
        from localstack.services.sqs.models import sqs_stores

        parts = resource.split(":")
        queue = sqs_stores[parts[4]][parts[3]].queues.get(parts[5])
        return queue.attributes.get("Policy") if queue is not None else None
    if action == "sts:AssumeRole":
        entity = _role(resource)
        if entity is None:
            return None
        document = entity.role.get("AssumeRolePolicyDocument")
        return document if isinstance(document, str) else json.dumps(document)
    return None


def _conditions(principal: Principal, source_arn: str, account: str) -> dict[str, str]:
    values = {"aws:PrincipalAccount": account}
    if principal.arn:
        values["aws:PrincipalArn"] = principal.role_arn
    if source_arn:
        values["aws:SourceArn"] = source_arn
        owner = source_arn.split(":")[4] if source_arn.count(":") >= 5 else ""
        values["aws:SourceAccount"] = owner or account  # S3 bucket ARNs name no account
    return values


def _denied(context: Any, reason: str) -> Exception:
    from localstack.aws.api import CommonServiceException

    code, status = ACCESS_DENIED.get(context.service.service_name, DEFAULT_DENIED)
    message = "Access Denied" if context.service.service_name == "s3" else reason
    return CommonServiceException(code, message, status_code=status, sender_fault=True)


def authorize(context: Any) -> list[tuple[str, str, Decision]]:
    """Every (action, resource, decision) this request needs; empty if not checked."""
    kind, principal, source_arn = caller(context)
    service, operation = context.service.service_name, context.operation.name
    name = f"{service}.{operation}"
    if kind == "admin":
        REPORT.admin()
        return []
    if kind == "internal":
        REPORT.skip(f"LocalStack-internal {name}: {unchecked_reason(service, operation)}")
        return []
    assert principal is not None
    region, account = context.region, context.account_id
    if kind == "unknown":
        return [("*", "*", Decision(False, f"{principal}: not issued by this STS"))]
    try:
        needs = iam_policy.required(service, operation, context.service_request, region, account)
    except iam_policy.Unmapped:
        if kind == "service":
            REPORT.skip(f"{principal} {name}: not mapped, and no resource-based policy applies")
            return []
        return [(name, "?", Decision(False, f"{name} is not mapped to IAM: refused"))]
    if kind == "service":
        # Service principals hold no identity policies: only a resource-based policy can
        # let them in, and only these calls have one in AWS.
        needs = [
            (action, resource)
            for action, resource in needs
            if action in ("lambda:InvokeFunction", "sqs:SendMessage", "sts:AssumeRole")
        ]
        if not needs:
            REPORT.skip(f"{principal} {name}: no resource-based policy applies")
            return []
    decisions = []
    conditions = _conditions(principal, source_arn, account)
    for action, resource in needs:
        try:
            identity = identity_policies(principal) if kind == "role" else []
            decision = iam_policy.decide(
                principal,
                action,
                resource,
                identity,
                resource_policy(action, resource, region, account),
                conditions,
            )
        except LookupError as exc:
            decision = Decision(False, f"{principal}: {exc}")
        decisions.append((action, resource, decision))
    return decisions


def enforce(chain: Any, context: Any, response: Any) -> None:
    if context.service is None or context.operation is None:
        return
    operation = f"{context.service.service_name}.{context.operation.name}"
    decisions = authorize(context)
    if not decisions:
        return
    principal = caller(context)[1]
    assert principal is not None
    refused = [(a, r, d) for a, r, d in decisions if not d.allowed]
    # Counted by role (not by session: LocalStack opens one per sandbox, task client...)
    REPORT.checked(principal.role_arn or str(principal), not refused)
    if not refused:
        return
    action, resource, decision = refused[0]
    REPORT.deny(str(principal), operation, action, resource, decision.reason)
    LOG.warning("IAM denied %s: %s", operation, decision.reason)
    if mode() == "enforce":
        raise _denied(context, decision.reason)


# S3 answers 403, not 404, for a missing key when the caller may not list the bucket
# (API_GetObject and API_HeadObject, "Permissions").
MISSING_KEY_OPERATIONS = ("GetObject", "HeadObject", "CopyObject")


def hide_missing_keys(chain: Any, context: Any, response: Any) -> None:
    if (
        response.status_code != 404
        or context.service is None
        or context.service.service_name != "s3"
        or context.operation is None
        or context.operation.name not in MISSING_KEY_OPERATIONS
    ):
        return
    kind, principal, _ = caller(context)
    if kind != "role" or principal is None:
        return
    params = context.service_request or {}
    bucket = params.get("Bucket", "")
    if context.operation.name == "CopyObject":
        source = iam_policy._s3_copy_source(params.get("CopySource", ""))[1]
        bucket = source.removeprefix("arn:aws:s3:::").split("/", 1)[0]
    bucket_arn = f"arn:aws:s3:::{bucket}"
    try:
        decision = iam_policy.decide(
            principal, "s3:ListBucket", bucket_arn, identity_policies(principal)
        )
    except LookupError as exc:
        decision = Decision(False, str(exc))
    if decision.allowed:
        return
    operation = f"s3.{context.operation.name}"
    reason = f"missing key answered 403: {decision.reason}"
    REPORT.deny(str(principal), operation, "s3:ListBucket", bucket_arn, reason)
    LOG.warning("IAM: %s of a missing key without s3:ListBucket -> 403", operation)
    if mode() != "enforce":
        return
    from localstack.aws.api import CommonServiceException
    from localstack.aws.protocol.serializer import create_serializer

    error = CommonServiceException("AccessDenied", "Access Denied", 403, sender_fault=True)
    denied = create_serializer(context.service).serialize_error_to_response(
        error, context.operation, context.request.headers, context.request_id
    )
    response.update_from(denied)


class ReportResource:
    def on_get(self, request: Any) -> dict[str, Any]:
        return REPORT.snapshot()

    def on_delete(self, request: Any) -> dict[str, Any]:
        REPORT.reset()
        return {"reset": True}


@hooks.on_infra_start()
def register_iam_enforcement() -> None:
    if mode() == "off":
        return
    from localstack.aws import handlers
    from localstack.http import Resource
    from localstack.services.internal import get_internal_apis

    if enforce not in handlers.serve_custom_service_request_handlers.handlers:
        # First in line: AWS refuses an unauthorized call before anything else happens.
        handlers.serve_custom_service_request_handlers.handlers.insert(0, enforce)
        handlers.run_custom_response_handlers.append(hide_missing_keys)
        get_internal_apis().add(Resource(PATH, ReportResource()))
        LOG.info("IAM enforcement: %s", mode())
