"""What an AWS request needs from IAM, and whether a set of policies grants it.

Pure Python (no LocalStack import), so the unit tests run it as it runs inside LocalStack.

- `required(service, operation, params, region, account)`: the (action, resource ARN)
  pairs AWS authorizes for one API call, from the Service Authorization Reference
  (https://docs.aws.amazon.com/service-authorization/latest/reference/), for every
  operation this project's handlers, state machines and integrations make. Anything
  else raises `Unmapped`: a checked principal's unknown call is denied, never passed.
- `decide(...)`: AWS's evaluation for one account (https://docs.aws.amazon.com/IAM/
  latest/UserGuide/reference_policies_evaluation-logic.html): an explicit Deny in any
  policy wins; otherwise an Allow in an identity-based policy or in a resource-based
  policy naming the principal; otherwise an implicit deny.

Statements are matched by moto's evaluator (`moto.iam.access_control.IAMPolicy`, also
what LocalStack ships), after three corrections made once per document: actions are
compared case-insensitively, as AWS does; regex characters in patterns are escaped (moto
turns `*` into `.*` and nothing else, so `?` and `+` would be read as regex); and
conditions, which moto checks for StringEquals only and otherwise ignores, are limited
to the operators registered here (`CONDITION_OPERATORS`), any other making the
statement fail closed. Principals of resource-based policies are matched here (moto
compares only `AWS` principals) and the statement then evaluated without them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlparse

# LocalStack's service names -> IAM's action prefixes, where they differ.
PREFIXES = {"stepfunctions": "states", "dynamodbstreams": "dynamodb"}


class Unmapped(Exception):
    """An operation whose IAM action and resource this module does not know."""


class Unsupported(Exception):
    """A policy element this evaluator cannot check (so it must not pass silently)."""


# -- what a request needs -------------------------------------------------------------------
def _s3_object(bucket: str, key: str) -> str:
    return f"arn:aws:s3:::{bucket}/{key}"


def _s3(operation: str, p: Mapping[str, Any]) -> list[tuple[str, str]]:
    bucket = p.get("Bucket", "")
    obj = _s3_object(bucket, p.get("Key", ""))
    versioned = bool(p.get("VersionId"))
    if operation in ("GetObject", "HeadObject"):
        # HEAD needs what GET needs (API_HeadObject: "you must have the s3:GetObject permission")
        return [("s3:GetObjectVersion" if versioned else "s3:GetObject", obj)]
    if operation in ("PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"):
        return [("s3:PutObject", obj)]
    if operation in ("CopyObject", "UploadPartCopy"):
        return [("s3:PutObject", obj), _s3_copy_source(p.get("CopySource", ""))]
    if operation == "DeleteObject":
        return [("s3:DeleteObjectVersion" if versioned else "s3:DeleteObject", obj)]
    if operation == "DeleteObjects":
        return [
            (
                "s3:DeleteObjectVersion" if entry.get("VersionId") else "s3:DeleteObject",
                _s3_object(bucket, entry.get("Key", "")),
            )
            for entry in (p.get("Delete") or {}).get("Objects", [])
        ]
    if operation == "AbortMultipartUpload":
        return [("s3:AbortMultipartUpload", obj)]
    if operation == "ListParts":
        return [("s3:ListMultipartUploadParts", obj)]
    bucket_arn = f"arn:aws:s3:::{bucket}"
    if operation in ("ListObjects", "ListObjectsV2", "HeadBucket"):
        return [("s3:ListBucket", bucket_arn)]
    if operation == "ListObjectVersions":
        return [("s3:ListBucketVersions", bucket_arn)]
    if operation == "GetBucketVersioning":
        return [("s3:GetBucketVersioning", bucket_arn)]
    if operation == "ListMultipartUploads":
        return [("s3:ListBucketMultipartUploads", bucket_arn)]
    raise Unmapped(f"s3.{operation}")


def _s3_copy_source(source: Any) -> tuple[str, str]:
    """CopySource is "bucket/key[?versionId=v]" (URL-encoded), or parsed into a dict."""
    if isinstance(source, Mapping):
        bucket, key, version = (
            source.get("Bucket", ""),
            source.get("Key", ""),
            source.get("VersionId"),
        )
    else:
        path, _, query = unquote(str(source)).lstrip("/").partition("?versionId=")
        bucket, _, key = path.partition("/")
        version = query or None
    return ("s3:GetObjectVersion" if version else "s3:GetObject", _s3_object(bucket, key))


def _dynamodb(operation: str, p: Mapping[str, Any], region: str, account: str) -> list:
    def table(name: str, index: str | None = None) -> str:
        arn = f"arn:aws:dynamodb:{region}:{account}:table/{name}"
        return f"{arn}/index/{index}" if index else arn

    if operation in (
        "GetItem",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "DescribeTable",
        "DescribeTimeToLive",
        "ConditionCheckItem",
    ):
        return [(f"dynamodb:{operation}", table(p.get("TableName", "")))]
    if operation in ("Query", "Scan"):
        return [(f"dynamodb:{operation}", table(p.get("TableName", ""), p.get("IndexName")))]
    if operation in ("BatchGetItem", "BatchWriteItem"):
        needs = []
        for name, entries in (p.get("RequestItems") or {}).items():
            if operation == "BatchGetItem":
                needs.append(("dynamodb:BatchGetItem", table(name)))
                continue
            kinds = {kind for entry in entries for kind in entry}
            needs += [
                (f"dynamodb:{'PutItem' if kind == 'PutRequest' else 'DeleteItem'}", table(name))
                for kind in sorted(kinds)
            ]
        return needs
    if operation in ("TransactWriteItems", "TransactGetItems"):
        actions = {
            "Put": "PutItem",
            "Update": "UpdateItem",
            "Delete": "DeleteItem",
            "ConditionCheck": "ConditionCheckItem",
            "Get": "GetItem",
        }
        return [
            (f"dynamodb:{actions[kind]}", table(body.get("TableName", "")))
            for item in p.get("TransactItems", [])
            for kind, body in item.items()
        ]
    raise Unmapped(f"dynamodb.{operation}")


def _dynamodb_streams(operation: str, p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if operation in ("DescribeStream", "GetShardIterator"):
        return [(f"dynamodb:{operation}", p.get("StreamArn", ""))]
    if operation == "GetRecords":
        # LocalStack's iterators start with the stream ARN ("<arn>|1|<kinesis iterator>")
        return [("dynamodb:GetRecords", str(p.get("ShardIterator", "")).split("|", 1)[0])]
    if operation == "ListStreams":
        return [("dynamodb:ListStreams", "*")]  # no resource-level permissions
    raise Unmapped(f"dynamodbstreams.{operation}")


def _states(operation: str, p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if operation in ("StartExecution", "StartSyncExecution", "ListExecutions"):
        return [(f"states:{operation}", p.get("stateMachineArn", ""))]
    if operation in ("DescribeStateMachine",):
        return [(f"states:{operation}", p.get("stateMachineArn", ""))]
    if operation in (
        "DescribeExecution",
        "StopExecution",
        "GetExecutionHistory",
        "DescribeStateMachineForExecution",
        "RedriveExecution",
    ):
        return [(f"states:{operation}", p.get("executionArn", ""))]
    if operation in ("SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"):
        return [(f"states:{operation}", "*")]
    raise Unmapped(f"stepfunctions.{operation}")


def queue_arn(queue_url: str, region: str, account: str) -> str:
    """arn:aws:sqs:<region>:<account>:<name> for LocalStack's and AWS's queue URL forms."""
    parts = [part for part in urlparse(queue_url).path.split("/") if part]
    if len(parts) >= 2:
        account, name = parts[-2], parts[-1]
    else:
        name = parts[-1] if parts else queue_url
    return f"arn:aws:sqs:{region}:{account}:{name}"


_SQS_ACTIONS = {
    "SendMessage": "SendMessage",
    "SendMessageBatch": "SendMessage",
    "ReceiveMessage": "ReceiveMessage",
    "DeleteMessage": "DeleteMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibility": "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
    "GetQueueAttributes": "GetQueueAttributes",
    "PurgeQueue": "PurgeQueue",
}


def _sqs(operation: str, p: Mapping[str, Any], region: str, account: str) -> list:
    if operation == "GetQueueUrl":
        owner = p.get("QueueOwnerAWSAccountId") or account
        return [("sqs:GetQueueUrl", f"arn:aws:sqs:{region}:{owner}:{p.get('QueueName', '')}")]
    if operation in _SQS_ACTIONS:
        return [
            (f"sqs:{_SQS_ACTIONS[operation]}", queue_arn(p.get("QueueUrl", ""), region, account))
        ]
    raise Unmapped(f"sqs.{operation}")


def function_arn(name: str, qualifier: str | None, region: str, account: str) -> str:
    """The function ARN AWS authorizes for a FunctionName (name, name:qualifier, partial
    or full ARN) and an optional Qualifier."""
    if name.startswith("arn:"):
        arn = name
    elif ":function:" in name:  # "123456789012:function:name[:qualifier]"
        arn = f"arn:aws:lambda:{region}:{name}"
    else:
        base, _, embedded = name.partition(":")
        arn = f"arn:aws:lambda:{region}:{account}:function:{base}"
        if embedded:
            arn += f":{embedded}"
    if qualifier and arn.count(":") == 6:
        arn += f":{qualifier}"
    return arn


# The ARN AWS authorizes a durable execution's calls on (function:NAME:VERSION/
# durable-execution/NAME/ID) for an execution ARN as the local runner issues it; set by
# durable.py, which records both.
durable_execution_arn: Callable[[str], str] = lambda arn: arn  # noqa: E731
# Authorized on the execution (Lambda developer guide, durable functions, security).
_DURABLE_EXECUTION_ACTIONS = frozenset(
    {
        "CheckpointDurableExecution",
        "GetDurableExecutionState",
        "GetDurableExecution",
        "GetDurableExecutionHistory",
        "StopDurableExecution",
    }
)


def _lambda(operation: str, p: Mapping[str, Any], region: str, account: str) -> list:
    if operation in _DURABLE_EXECUTION_ACTIONS:
        execution = durable_execution_arn(str(p.get("DurableExecutionArn", "")))
        return [(f"lambda:{operation}", execution)]
    actions = {
        "Invoke": "InvokeFunction",
        "InvokeAsync": "InvokeFunction",
        "InvokeWithResponseStream": "InvokeFunction",
        "GetFunction": "GetFunction",
        "GetFunctionConfiguration": "GetFunctionConfiguration",
        "ListDurableExecutionsByFunction": "ListDurableExecutionsByFunction",
    }
    if operation not in actions:
        raise Unmapped(f"lambda.{operation}")
    arn = function_arn(p.get("FunctionName", ""), p.get("Qualifier"), region, account)
    return [(f"lambda:{actions[operation]}", arn)]


def _logs(operation: str, p: Mapping[str, Any], region: str, account: str) -> list:
    # Log-group permissions are granted on "log-group:<name>:*" (the CloudWatch Logs docs:
    # iam-access-control-overview-cwl), which covers the group's streams.
    group = f"arn:aws:logs:{region}:{account}:log-group:{p.get('logGroupName', '')}"
    if operation in ("CreateLogStream", "PutLogEvents", "GetLogEvents"):
        return [(f"logs:{operation}", f"{group}:log-stream:{p.get('logStreamName', '')}")]
    if operation in ("CreateLogGroup", "DescribeLogStreams", "FilterLogEvents"):
        return [(f"logs:{operation}", f"{group}:*")]
    raise Unmapped(f"logs.{operation}")


def _sts(operation: str, p: Mapping[str, Any]) -> list[tuple[str, str]]:
    if operation == "AssumeRole":
        return [("sts:AssumeRole", p.get("RoleArn", ""))]
    if operation == "GetCallerIdentity":
        return []  # "No permissions are required to perform this operation" (API reference)
    raise Unmapped(f"sts.{operation}")


def _events(operation: str, p: Mapping[str, Any], region: str, account: str) -> list:
    if operation == "PutEvents":
        buses = {entry.get("EventBusName") or "default" for entry in p.get("Entries", [])}
        return [
            (
                "events:PutEvents",
                bus
                if bus.startswith("arn:")
                else f"arn:aws:events:{region}:{account}:event-bus/{bus}",
            )
            for bus in sorted(buses)
        ]
    raise Unmapped(f"events.{operation}")


def required(
    service: str, operation: str, params: Mapping[str, Any], region: str, account: str
) -> list[tuple[str, str]]:
    """The (action, resource ARN) pairs AWS checks for this call; `Unmapped` if unknown."""
    params = params or {}
    if service == "s3":
        return _s3(operation, params)
    if service == "dynamodb":
        return _dynamodb(operation, params, region, account)
    if service == "dynamodbstreams":
        return _dynamodb_streams(operation, params)
    if service == "stepfunctions":
        return _states(operation, params)
    if service == "sqs":
        return _sqs(operation, params, region, account)
    if service == "lambda":
        return _lambda(operation, params, region, account)
    if service == "logs":
        return _logs(operation, params, region, account)
    if service == "sts":
        return _sts(operation, params)
    if service == "events":
        return _events(operation, params, region, account)
    raise Unmapped(f"{service}.{operation}")


# -- evaluating policies -------------------------------------------------------------------------
def _wildcard(pattern: str, value: str) -> bool:
    regex = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(regex, value, re.DOTALL) is not None


def _arn_like(pattern: str, value: str) -> bool:
    """ArnLike: each of the six colon-separated parts matched on its own (IAM user guide,
    reference_policies_elements_condition_operators, "ARN condition operators")."""
    expected, actual = pattern.split(":", 5), value.split(":", 5)
    return len(expected) == len(actual) == 6 and all(
        _wildcard(e, a) for e, a in zip(expected, actual, strict=True)
    )


def _any(expected: Any, test: Any) -> bool:
    values = expected if isinstance(expected, list) else [expected]
    return any(test(str(value)) for value in values)


def _string_like(expected: Any, actual: str) -> bool:
    return _any(expected, lambda pattern: _wildcard(pattern, actual))


def _arn_like_any(expected: Any, actual: str) -> bool:
    return _any(expected, lambda pattern: _arn_like(pattern, actual))


def _equals(expected: Any, actual: str) -> bool:
    return _any(expected, lambda value: value == actual)


CONDITION_OPERATORS = {
    "StringEquals": _equals,
    "StringLike": _string_like,
    "ArnEquals": _equals,
    "ArnLike": _arn_like_any,
}
ABSENT = "\x00absent"  # a key the request lacks: matches no pattern, as in AWS


def _register_operators() -> None:
    """Teach moto's condition table the operators above (it ignores unknown ones)."""
    from moto.iam import policy_conditions

    for operator, test in CONDITION_OPERATORS.items():
        policy_conditions.CONDITION_OPERATIONS.setdefault(
            operator,
            lambda expected, actual, test=test: actual != ABSENT and test(expected, actual),
        )


def _escape(pattern: str) -> str:
    """A policy pattern for moto's matcher, which turns `*` into `.*` and nothing else."""
    return re.escape(pattern).replace(r"\*", "*").replace(r"\?", ".")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _statement(raw: Mapping[str, Any]) -> dict[str, Any]:
    if {"NotResource", "NotPrincipal"} & raw.keys():
        raise Unsupported("NotResource and NotPrincipal are not evaluated")
    statement = dict(raw)
    for element in ("Action", "NotAction"):
        if element in statement:
            statement[element] = [_escape(a.lower()) for a in _as_list(statement[element])]
    if "Resource" in statement:
        statement["Resource"] = [_escape(r) for r in _as_list(statement["Resource"])]
    if "Condition" in statement:
        for operator in statement["Condition"]:
            if operator not in CONDITION_OPERATORS:
                raise Unsupported(f"condition operator {operator} is not evaluated")
        statement["Condition"] = {
            operator: {key.lower(): value for key, value in values.items()}
            for operator, values in statement["Condition"].items()
        }
    return statement


@functools.lru_cache(maxsize=1024)
def parse(document: str) -> tuple[dict[str, Any], ...]:
    """A policy document's statements, corrected for moto (see the module docstring)."""
    text = unquote(document) if document.lstrip().startswith("%7B") else document
    raw = json.loads(text).get("Statement", [])
    return tuple(_statement(statement) for statement in _as_list(raw))


@dataclasses.dataclass(frozen=True)
class Principal:
    """Who calls: a role session (`arn`: arn:aws:sts::<account>:assumed-role/<role>/<session>)
    or a service principal (`service`: events.amazonaws.com)."""

    arn: str = ""
    service: str = ""

    @property
    def role_arn(self) -> str:
        account = self.arn.split(":")[4] if self.arn.count(":") >= 5 else ""
        role = self.arn.split(":assumed-role/", 1)[-1].split("/", 1)[0]
        return f"arn:aws:iam::{account}:role/{role}" if account else ""

    def __str__(self) -> str:
        return self.arn or self.service


def _names(statement: Mapping[str, Any], principal: Principal) -> bool:
    """Does this resource-based policy statement's Principal name the caller?"""
    named = statement.get("Principal")
    if named == "*":
        return True
    if not isinstance(named, Mapping):
        return False
    if principal.service:
        return principal.service in _as_list(named.get("Service", []))
    aws = _as_list(named.get("AWS", []))
    return "*" in aws or principal.arn in aws or principal.role_arn in aws


@dataclasses.dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


def _evaluate(
    statements: Iterable[Mapping[str, Any]], action: str, resource: str, context: Mapping[str, str]
) -> str:
    """PERMITTED, DENIED or NEUTRAL, by moto's evaluator."""
    from moto.iam.access_control import IAMPolicy

    _register_operators()
    statements = list(statements)
    if not statements:
        return "NEUTRAL"
    keys = {
        key
        for statement in statements
        for values in statement.get("Condition", {}).values()
        for key in values
    }
    values = {key: context.get(key, ABSENT) for key in keys}
    policy = IAMPolicy(json.dumps({"Version": "2012-10-17", "Statement": statements}))
    return policy.is_action_permitted(action.lower(), resource, None, values).name


def decide(
    principal: Principal,
    action: str,
    resource: str,
    identity_policies: Iterable[str] = (),
    resource_policy: str | None = None,
    context: Mapping[str, str] | None = None,
) -> Decision:
    """AWS's answer for one (action, resource) within one account."""
    context = {key.lower(): value for key, value in (context or {}).items()}
    try:
        results = [_evaluate(parse(doc), action, resource, context) for doc in identity_policies]
        if resource_policy:
            named = [
                {k: v for k, v in s.items() if k != "Principal"}
                for s in parse(resource_policy)
                if _names(s, principal)
            ]
            results.append(_evaluate(named, action, resource, context))
    except Unsupported as exc:
        return Decision(False, f"cannot evaluate the policy: {exc}")
    who = f"User: {principal} is not authorized to perform: {action} on resource: {resource}"
    if "DENIED" in results:
        return Decision(False, f"{who} with an explicit deny")
    if "PERMITTED" in results:
        return Decision(True, "allowed")
    basis = "resource-based" if principal.service else "identity-based"
    return Decision(False, f"{who} because no {basis} policy allows the {action} action")
