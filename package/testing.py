"""Run a Pulumi program that uses these components in a test: no engine, no cloud.

    from exactly_once.testing import run

    def test_the_scheduler_has_a_dead_letter_queue():
        mocks = run(lambda: Scheduler("reminders", SchedulerArgs(channels={...})))
        assert mocks.of_type("aws:sqs/queue:Queue")

`run` declares the program's resources under `pulumi.runtime.set_mocks`, waits for all of
them and returns what was declared. Every resource is given the outputs AWS would give it
(an ARN of the right shape, a queue URL, a stage's invoke URL, a table's stream ARN, a
function's qualified ARN), and the provider functions the components call
(`aws.get_region`, `aws.get_caller_identity`, `aws.get_partition`) answer for `REGION` and
`ACCOUNT`, so no component fails on an output a generic echo mock leaves out;
`aws.iam.get_policy_document(_output)` answers the JSON the provider renders, so a program's
own roles and policies built from it are declared as they would be. Inputs are recorded as
the engine sees them: camelCase names, Outputs resolved. docs/testing.md.

Transforms (`ResourceOptions(transforms=...)`) are the engine's: they do not run here (the
legacy `transformations` do: the SDK runs them itself). Needs the `pulumi` extra.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pulumi
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

ACCOUNT = "123456789012"
REGION = "us-east-1"
# DynamoDB's stream label shape (an ISO time, colons and all): ARNs built from it parse as
# on AWS.
STREAM_LABEL = "2026-01-01T00:00:00.000"
POLICY_DOCUMENT = "aws:iam/getPolicyDocument:getPolicyDocument"

__all__ = ["ACCOUNT", "REGION", "Mocks", "arn_of", "run"]


def arn_of(typ: str, name: str) -> str:
    """The ARN AWS gives a resource of this type and name, so policies read as on AWS."""
    prefix = f"{REGION}:{ACCOUNT}"
    shapes = {
        "aws:s3/bucket:Bucket": f"arn:aws:s3:::{name}",
        "aws:s3/bucketV2:BucketV2": f"arn:aws:s3:::{name}",
        "aws:sqs/queue:Queue": f"arn:aws:sqs:{prefix}:{name}",
        "aws:sns/topic:Topic": f"arn:aws:sns:{prefix}:{name}",
        "aws:lambda/function:Function": f"arn:aws:lambda:{prefix}:function:{name}",
        "aws:dynamodb/table:Table": f"arn:aws:dynamodb:{prefix}:table/{name}",
        "aws:sfn/stateMachine:StateMachine": f"arn:aws:states:{prefix}:stateMachine:{name}",
        "aws:cloudwatch/logGroup:LogGroup": f"arn:aws:logs:{prefix}:log-group:{name}",
        "aws:iam/role:Role": f"arn:aws:iam::{ACCOUNT}:role/{name}",
        "aws:cloudwatch/eventRule:EventRule": f"arn:aws:events:{prefix}:rule/{name}",
        "aws:cloudwatch/eventBus:EventBus": f"arn:aws:events:{prefix}:event-bus/{name}",
        "aws:apigateway/restApi:RestApi": f"arn:aws:apigateway:{REGION}::/restapis/{name}",
    }
    service = typ.split(":")[1].split("/")[0]
    return shapes.get(typ, f"arn:aws:{service}:{prefix}:{name}")


# aws.iam.get_policy_document, rendered as the provider renders it (terraform-provider-aws,
# internal/service/iam: policy_document_data_source.go and policy_model.go), so a test reads
# the JSON a deployment would send. A statement is kept as the provider's model holds it
# (its JSON names; principals and conditions as lists of blocks) until it is written.
_Statement = dict[str, Any]


def _policy_document(args: Mapping[str, Any]) -> dict[str, Any]:
    """The provider's answer: the source documents, then the statements, then the override
    documents, merged by Sid; `json` indented as the provider writes it, `id` its hash."""
    version = args.get("version") or "2012-10-17"
    merged: dict[str, Any] = {"Version": "", "Id": "", "Statement": []}
    sources = [_parsed(text) for text in args.get("sourcePolicyDocuments") or [] if text]
    _unique_sids([s for source in sources for s in source["Statement"]], "source documents")
    configured = [_configured(s, version) for s in args.get("statements") or []]
    _unique_sids(configured, "statements")
    own = {"Version": version, "Id": args.get("policyId") or "", "Statement": configured}
    overrides = [_parsed(text) for text in args.get("overridePolicyDocuments") or [] if text]
    for document in [*sources, own, *overrides]:
        _merge(merged, document)
    written = {
        key: value
        for key, value in [
            ("Version", merged["Version"]),
            ("Id", merged["Id"]),
            ("Statement", [_written(s) for s in merged["Statement"]]),
        ]
        if value
    }
    indented = _go_escaped(json.dumps(written, indent=2, ensure_ascii=False))
    minified = _go_escaped(json.dumps(written, separators=(",", ":"), ensure_ascii=False))
    # the provider's id: the CRC-32 of the indented JSON (its create.StringHashcode)
    identity = str(zlib.crc32(indented.encode()))
    return {**args, "version": version, "json": indented, "minifiedJson": minified, "id": identity}


def _configured(statement: Mapping[str, Any], version: str) -> _Statement:
    """A statement as given to get_policy_document: its string sets deduplicated; policy
    variables written `&{...}` (Terraform's way past its own `${`) made `${...}` in
    resources, principals and condition values."""

    def strings(key: str) -> str | list[str] | None:
        return _set(statement[key]) if statement.get(key) else None

    def principals(key: str) -> list[tuple[str, Any]]:
        blocks = statement.get(key) or []
        return [(b["type"], _variables(_set(b["identifiers"]), version)) for b in blocks]

    return {
        "Sid": statement.get("sid") or "",
        "Effect": statement.get("effect") or "Allow",
        "Action": strings("actions"),
        "NotAction": strings("notActions"),
        "Resource": _variables(strings("resources"), version),
        "NotResource": _variables(strings("notResources"), version),
        "Principal": principals("principals"),
        "NotPrincipal": principals("notPrincipals"),
        "Condition": [
            (c["test"], c["variable"], _variables(list(c["values"]), version))
            for c in statement.get("conditions") or []
        ],
    }


def _set(values: Sequence[str]) -> str | list[str]:
    """A set of strings as the provider writes it: one alone as a string, more in reverse
    order (its own sort)."""
    unique = sorted(set(values), reverse=True)
    return unique[0] if len(unique) == 1 else unique


def _variables(values: Any, version: str) -> Any:
    if values is None:
        return None
    if isinstance(values, str):
        if version == "2008-10-17" and "&{" in values:
            raise ValueError(
                f"found &{{ sequence in ({values}), which is not supported in document "
                "version 2008-10-17"
            )
        return values.replace("&{", "${")
    return [_variables(value, version) for value in values]


def _parsed(text: str) -> dict[str, Any]:
    """A source or override document, read as the provider reads it into its model (field
    names in any case; a single principal `*` is {"*": "*"}; condition values as strings)."""
    document = {key.lower(): value for key, value in json.loads(text).items()}
    statements = document.get("statement") or []
    if not isinstance(statements, list):
        raise ValueError(
            f"policy document's Statement is not a list (the provider's error): {text}"
        )
    return {
        "Version": document.get("version") or "",
        "Id": document.get("id") or "",
        "Statement": [_read(s) for s in statements],
    }


def _read(statement: Mapping[str, Any]) -> _Statement:
    fields = {key.lower(): value for key, value in statement.items()}

    def principals(key: str) -> list[tuple[str, Any]]:
        given = fields.get(key)
        if isinstance(given, str):
            return [("*", ["*"])]
        return [
            (kind, identifiers if isinstance(identifiers, str) else sorted(identifiers))
            for kind, identifiers in (given or {}).items()
        ]

    conditions = [
        (test, variable, str(values).lower() if isinstance(values, bool) else values)
        for test, variables in (fields.get("condition") or {}).items()
        for variable, values in variables.items()
        if isinstance(values, str | bool | list)  # (the provider drops any other)
    ]
    return {
        "Sid": fields.get("sid") or "",
        "Effect": fields.get("effect") or "",
        "Action": fields.get("action"),
        "NotAction": fields.get("notaction"),
        "Resource": fields.get("resource"),
        "NotResource": fields.get("notresource"),
        "Principal": principals("principal"),
        "NotPrincipal": principals("notprincipal"),
        "Condition": conditions,
    }


def _unique_sids(statements: list[_Statement], where: str) -> None:
    sids = [s["Sid"] for s in statements if s["Sid"]]
    for sid in sids:
        if sids.count(sid) > 1:
            raise ValueError(f"duplicate Sid ({sid}) in the policy document's {where}")


def _merge(into: dict[str, Any], document: dict[str, Any]) -> None:
    """The provider's merge: a later document's Id wins, its Version only if later, and
    each of its statements replaces the one with its Sid or is added."""
    into["Id"] = document["Id"] or into["Id"]
    into["Version"] = max(into["Version"], document["Version"])
    for statement in document["Statement"]:
        sids = [s["Sid"] for s in into["Statement"]]
        if statement["Sid"] and statement["Sid"] in sids:
            into["Statement"][sids.index(statement["Sid"])] = statement
        else:
            into["Statement"].append(statement)


def _written(statement: _Statement) -> dict[str, Any]:
    """A statement's JSON, its fields in the provider's order, empty ones left out."""
    written = {
        "Sid": statement["Sid"],
        "Effect": statement["Effect"],
        "Action": statement["Action"],
        "NotAction": statement["NotAction"],
        "Resource": statement["Resource"],
        "NotResource": statement["NotResource"],
        "Principal": _principal(statement["Principal"]),
        "NotPrincipal": _principal(statement["NotPrincipal"]),
        "Condition": _condition(statement["Condition"]),
    }
    # strings and blocks: left out when empty; Action and the like only when not given
    return {
        key: value
        for key, value in written.items()
        if value is not None
        and (value or key in ("Action", "NotAction", "Resource", "NotResource"))
    }


def _principal(blocks: list[tuple[str, Any]]) -> Any:
    """Principals by type, a type given twice joined; `*` alone for {"*": "*"} only (IAM
    refuses `*` in a trust policy where it takes {"AWS": "*"})."""
    if len(blocks) == 1 and blocks[0][0] == "*" and blocks[0][1] in ("*", ["*"]):
        return "*"
    by_type: dict[str, Any] = {}
    for kind, identifiers in blocks:
        before = by_type.get(kind)
        if isinstance(identifiers, str):
            by_type[kind] = identifiers if before is None else [*_listed(before), identifiers]
        else:
            by_type[kind] = [*_listed(before), *sorted(identifiers, reverse=True)]
    return dict(sorted(by_type.items()))


def _condition(blocks: list[tuple[str, str, Any]]) -> dict[str, dict[str, Any]]:
    """{test: {variable: values}}, the values of one test and variable joined, one value
    alone as a string."""
    joined: dict[str, dict[str, list[str]]] = {}
    for test, variable, values in blocks:
        joined.setdefault(test, {}).setdefault(variable, []).extend(_listed(values))
    return {
        test: {v: values[0] if len(values) == 1 else values for v, values in sorted(by.items())}
        for test, by in sorted(joined.items())
    }


def _listed(values: Any) -> list[Any]:
    return [] if values is None else [values] if isinstance(values, str) else list(values)


def _go_escaped(text: str) -> str:
    """Go's encoder escapes these in strings (where alone they occur in JSON text)."""
    for character in "<>&\u2028\u2029":
        text = text.replace(character, f"\\u{ord(character):04x}")
    return text


class Mocks(pulumi.runtime.Mocks):
    """Gives each resource AWS-shaped outputs and records what was declared."""

    def __init__(self) -> None:
        self.resources: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.resources.append(args)
        name = args.inputs.get("name") or args.inputs.get("namePrefix") or args.name
        arn = arn_of(args.typ, name)
        if args.resource_id:  # `Resource.get` by its ARN (a Scheduler's state machine channel)
            return args.resource_id, {**args.inputs, "arn": args.resource_id}
        version = "1" if args.inputs.get("publish") else "$LATEST"
        outputs = {
            **args.inputs,
            "arn": arn,
            "name": name,
            "bucket": args.inputs.get("bucket") or name,
            "url": f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}",
            "invokeArn": f"arn:aws:apigateway:{REGION}:lambda:path/functions/{arn}/invocations",
            "streamArn": f"{arn}/stream/{STREAM_LABEL}",
            "rootResourceId": "root",
            "executionArn": f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{args.name}",
            "invokeUrl": f"https://{args.name}.execute-api.{REGION}.amazonaws.com/v1",
            "qualifiedArn": f"{arn}:{version}",  # "1" once published, as Lambda names it
        }
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        if args.token == POLICY_DOCUMENT:
            return _policy_document(args.args), []
        # aws.get_region, aws.get_caller_identity, aws.get_partition: one answer for all
        return {
            "accountId": ACCOUNT,
            "arn": f"arn:aws:iam::{ACCOUNT}:user/test",
            "userId": "test",
            "id": REGION,
            "name": REGION,
            "region": REGION,
            "partition": "aws",
            "dnsSuffix": "amazonaws.com",
        }, []

    def of_type(self, typ: str) -> list[pulumi.runtime.MockResourceArgs]:
        """Every resource of a Pulumi type token, e.g. "aws:lambda/function:Function"."""
        return [r for r in self.resources if r.typ == typ]

    def named(self, name: str, type: str | None = None) -> pulumi.runtime.MockResourceArgs:
        """The one resource with this Pulumi name (e.g. "reminders-slots"). Pulumi names are
        unique per type only (a Scheduler's "reminders-api" is its RestApi and its Function):
        `type` picks one, as a type token ("aws:lambda/function:Function") or its last part
        ("Function")."""
        found = [r for r in self.resources if r.name == name]
        chosen = [r for r in found if type in (None, r.typ, r.typ.rsplit(":", 1)[-1])]
        if len(chosen) == 1:
            return chosen[0]
        if not found:
            names = ", ".join(sorted({r.name for r in self.resources}))
            raise KeyError(f"no resource named {name!r} (declared: {names})")
        types = ", ".join(sorted(r.typ for r in found))
        if type is None:
            raise KeyError(f"{len(found)} resources named {name!r} ({types}): give type=")
        raise KeyError(f"{len(chosen)} resources named {name!r} of type {type!r} ({types})")


def _forget_the_last_program() -> None:
    """Pulumi keeps a failed program's error, and its Outputs still pending, for the program
    after it (its RPC manager and pending Outputs outlive set_mocks): a test after one whose
    program failed on an Output would fail with that error."""
    from pulumi.runtime import settings

    manager = getattr(settings, "_get_rpc_manager", None)  # (Pulumi's own: guarded)
    if manager is not None:
        manager().clear()
    outputs = getattr(settings.SETTINGS, "outputs", None)  # (not in every release)
    if outputs is not None:
        with settings.SETTINGS.lock:
            outputs.clear()


def run(
    program: Callable[[], object],
    config: Mapping[str, str] | None = None,
    project: str = "project",
    stack: str = "test",
    mocks: Mocks | None = None,
) -> Mocks:
    """Declare `program`'s resources under fresh mocks (or `mocks`, a subclass of yours
    that answers some resources or calls its own way) and wait for every one of them.
    `config`: the stack's config as Pulumi keys it ({"project:key": "value"})."""
    mocks = mocks if mocks is not None else Mocks()
    _forget_the_last_program()
    pulumi.runtime.set_all_config(dict(config or {}))
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False)

    def body() -> None:  # plain: pulumi 3.168 (the floor) calls it without awaiting
        program()

    _sync_await(run_pulumi_func(body))
    return mocks
