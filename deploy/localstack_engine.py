"""Deploy the real Pulumi program to LocalStack without the Pulumi CLI.

Why this exists: the Pulumi CLI and its AWS plugin cannot be installed on our build
machines. With the CLI, `python -m deploy up` uses the Automation API instead and
this module is not used. Here the unchanged program (`__main__.py` and its
components) runs under `pulumi.runtime.set_mocks`, and `Engine.new_resource`
creates each resource for real in LocalStack through boto3, returning its real
id and outputs, so dependent resources receive real ARNs, names and URLs.

Rules: every resource type has an explicit create/delete pair in `HANDLERS`; an
unknown type fails loudly with its name, never silently faked. What was created
is recorded (in creation order) in `.pulumi-local/<stack>.json` after each step,
so `destroy` deletes it in reverse order even after a failed `up`.
"""

from __future__ import annotations

import json
import logging
import runpy
import secrets
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pulumi
from botocore.config import Config
from botocore.exceptions import ClientError

from deploy import STATE_DIR
from deploy.stack_config import ROOT, StackConfig

LOG = logging.getLogger("deploy")
ACCOUNT = "000000000000"  # LocalStack's default account

Outputs = dict[str, Any]
Create = Callable[["Engine", str, dict[str, Any]], tuple[str, Outputs]]
Delete = Callable[["Engine", str, Outputs], None]


SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how the Pulumi wire format marks a secret


def unwrap_secrets(value: Any) -> Any:
    """Inputs as the provider would see them: secret markers removed, values kept."""
    if isinstance(value, dict):
        if SECRET_SIG in value:
            return unwrap_secrets(value.get("value"))
        return {key: unwrap_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unwrap_secrets(item) for item in value]
    return value


class UnsupportedResource(Exception):
    """The program uses a resource type this engine has no handler for."""


def state_path(stack: str) -> Path:
    return STATE_DIR / f"{stack}.json"


class Engine(pulumi.runtime.Mocks):
    def __init__(self, stack: str, endpoint: str, region: str) -> None:
        if not endpoint:
            raise SystemExit(
                f"stack {stack!r} sets no endpoint: this engine deploys to LocalStack only; "
                "install the Pulumi CLI to deploy to AWS"
            )
        self.stack = stack
        self.endpoint = endpoint
        self.region = region
        self._session = boto3.session.Session(
            aws_access_key_id="test", aws_secret_access_key="test", region_name=self.region
        )
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.created: list[dict[str, Any]] = []

    # -- plumbing ------------------------------------------------------------------
    def client(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                # Service names are dynamic here; boto3-stubs type clients per literal name.
                self._clients[service] = self._session.client(  # type: ignore[call-overload]
                    service,
                    endpoint_url=self.endpoint,
                    config=Config(retries={"max_attempts": 5, "mode": "standard"}),
                )
            return self._clients[service]

    def arn(self, service: str, resource: str, region: bool = True) -> str:
        return f"arn:aws:{service}:{self.region if region else ''}:{ACCOUNT}:{resource}"

    @staticmethod
    def physical_name(logical: str, inputs: dict[str, Any], key: str = "name") -> str:
        """The given name, or an auto-name like Pulumi's: logical name plus a random suffix."""
        if inputs.get(key):
            return str(inputs[key])
        if inputs.get("namePrefix"):  # e.g. a vended-logs group (platform.py)
            return f"{inputs['namePrefix']}{secrets.token_hex(4)[:7]}"
        return f"{logical}-{secrets.token_hex(4)[:7]}"

    def _record(self, typ: str, name: str, id_: str, outputs: Outputs) -> None:
        with self._lock:
            self.created.append({"type": typ, "name": name, "id": id_, "outputs": outputs})
            STATE_DIR.mkdir(exist_ok=True)
            state_path(self.stack).write_text(json.dumps(self.created, indent=1, default=str))

    # -- pulumi.runtime.Mocks ------------------------------------------------------------
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, Outputs]:
        if args.resource_id:  # `Resource.get` (its args carry no `custom`): read, never create
            return args.resource_id, self._read(args.typ, args.name, args.resource_id)
        if args.typ.startswith("pulumi:providers:") or not args.custom:
            return f"{args.name}-id", dict(args.inputs)  # providers and components: no cloud object
        handler = HANDLERS.get(args.typ)
        if handler is None:
            raise UnsupportedResource(
                f"the LocalStack engine has no handler for resource type {args.typ!r} "
                f"(resource {args.name!r}); add one to deploy/localstack_engine.py"
            )
        create, _ = handler
        started = time.monotonic()
        inputs = unwrap_secrets(dict(args.inputs))
        id_, outputs = create(self, args.name, inputs)
        state = {**inputs, **outputs, "id": id_}
        self._record(args.typ, args.name, id_, state)
        LOG.info("created %s %s (%.1fs)", args.typ, args.name, time.monotonic() - started)
        return id_, state

    def _read(self, typ: str, name: str, id_: str) -> Outputs:
        if typ == "aws:sfn/stateMachine:StateMachine":  # (a scheduler channel's type)
            found = self.client("stepfunctions").describe_state_machine(stateMachineArn=id_)
            return {"id": id_, "arn": id_, "name": found["name"], "type": found["type"]}
        raise UnsupportedResource(
            f"the LocalStack engine cannot read resource type {typ!r} (resource {name!r})"
        )

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list]:
        if args.token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "accountId": ACCOUNT,
                "arn": self.arn("iam", "root", False),
                "userId": ACCOUNT,
            }, []
        if args.token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region}, []
        if args.token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}, []
        raise UnsupportedResource(f"the LocalStack engine cannot serve invoke {args.token!r}")


# -- the program -------------------------------------------------------------------------
def up(config: StackConfig, main: Path = ROOT / "__main__.py") -> dict[str, Any]:
    """Create the stack's resources by running the Pulumi program; return its outputs.

    A previous deployment of the stack is destroyed first: `up` always starts clean."""
    from pulumi.runtime.settings import get_root_resource
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    destroy(config.stack, config.endpoint, config.region, strict=False)
    engine = Engine(config.stack, config.endpoint, config.region)
    pulumi.runtime.set_all_config(config.as_pulumi_config())
    pulumi.runtime.set_mocks(engine, project=config.project, stack=config.stack, preview=False)
    outputs: dict[str, Any] = {}

    async def program() -> None:
        if str(main.parent) not in sys.path:
            sys.path.insert(0, str(main.parent))
        runpy.run_path(str(main), run_name="__main__")
        root = get_root_resource()
        assert root is not None, "the program registered no stack"
        stack_outputs = await pulumi.Output.from_input(root.outputs).future()  # type: ignore[attr-defined]
        outputs.update(stack_outputs or {})

    _sync_await(run_pulumi_func(program))
    return outputs


def destroy(stack: str, endpoint: str, region: str, strict: bool = True) -> int:
    """Delete what `up` recorded, newest first; returns how many resources were deleted.

    Every deletion is attempted; failures are reported together at the end (or only
    logged with strict=False, as `up` does for a previous deployment that may be gone)."""
    path = state_path(stack)
    if not path.exists():
        return 0
    engine = Engine(stack, endpoint, region)
    records = json.loads(path.read_text())
    failures = []
    for record in reversed(records):
        _, delete = HANDLERS[record["type"]]
        try:
            delete(engine, record["id"], record["outputs"])
            LOG.info("deleted %s %s", record["type"], record["name"])
        except ClientError as exc:
            failures.append(f"{record['type']} {record['name']}: {exc}")
    path.unlink()
    if failures:
        message = "could not delete:\n  " + "\n  ".join(failures)
        if strict:
            raise RuntimeError(message)
        LOG.warning("%s", message)
    return len(records) - len(failures)


# -- resource handlers: (create, delete) per type ---------------------------------------------
def _ignore_missing(call: Callable[[], Any]) -> None:
    try:
        call()
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if not any(word in code for word in ("NotFound", "NoSuch", "NonExistent", "Nonexistent")):
            raise


# S3
def create_bucket(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    bucket = e.physical_name(name, i, "bucket").lower()
    e.client("s3").create_bucket(Bucket=bucket)
    return bucket, {
        "bucket": bucket,
        "arn": f"arn:aws:s3:::{bucket}",
        "bucketDomainName": f"{bucket}.s3.amazonaws.com",
        "region": e.region,
    }


def delete_bucket(e: Engine, id_: str, _: Outputs) -> None:
    s3 = e.client("s3")
    try:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=id_):
            objects = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            if objects:
                s3.delete_objects(Bucket=id_, Delete={"Objects": objects, "Quiet": True})
    except ClientError:
        pass
    _ignore_missing(lambda: s3.delete_bucket(Bucket=id_))


def create_public_access_block(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    keys = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")
    e.client("s3").put_public_access_block(
        Bucket=i["bucket"],
        PublicAccessBlockConfiguration={k[0].upper() + k[1:]: bool(i.get(k)) for k in keys},
    )
    return i["bucket"], {}


def create_bucket_encryption(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    rules = [
        {
            "ApplyServerSideEncryptionByDefault": {
                "SSEAlgorithm": rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"]
            }
        }
        for rule in i["rules"]
    ]
    e.client("s3").put_bucket_encryption(
        Bucket=i["bucket"], ServerSideEncryptionConfiguration={"Rules": rules}
    )
    return i["bucket"], {}


def create_bucket_versioning(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    status = i["versioningConfiguration"]["status"]
    e.client("s3").put_bucket_versioning(
        Bucket=i["bucket"], VersioningConfiguration={"Status": status}
    )
    return i["bucket"], {}


def create_bucket_lifecycle(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    rules = []
    for rule in i["rules"]:
        entry: dict[str, Any] = {
            "ID": rule["id"],
            "Status": rule["status"],
            "Filter": {"Prefix": (rule.get("filter") or {}).get("prefix", "")},
        }
        if abort := rule.get("abortIncompleteMultipartUpload"):
            entry["AbortIncompleteMultipartUpload"] = {
                "DaysAfterInitiation": int(abort["daysAfterInitiation"])
            }
        rules.append(entry)
    e.client("s3").put_bucket_lifecycle_configuration(
        Bucket=i["bucket"], LifecycleConfiguration={"Rules": rules}
    )
    return i["bucket"], {}


def create_bucket_notification(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    notification: dict[str, Any] = {}
    if i.get("eventbridge"):
        notification["EventBridgeConfiguration"] = {}
    lambdas = []
    for fn in i.get("lambdaFunctions") or []:
        rules = [
            {"Name": rule_name, "Value": fn[key]}
            for rule_name, key in (("prefix", "filterPrefix"), ("suffix", "filterSuffix"))
            if fn.get(key)
        ]
        entry: dict[str, Any] = {
            "LambdaFunctionArn": fn["lambdaFunctionArn"],
            "Events": fn["events"],
        }
        if rules:
            entry["Filter"] = {"Key": {"FilterRules": rules}}
        lambdas.append(entry)
    if lambdas:
        notification["LambdaFunctionConfigurations"] = lambdas
    e.client("s3").put_bucket_notification_configuration(
        Bucket=i["bucket"], NotificationConfiguration=notification
    )
    return i["bucket"], {}


def delete_bucket_notification(e: Engine, id_: str, _: Outputs) -> None:
    _ignore_missing(
        lambda: e.client("s3").put_bucket_notification_configuration(
            Bucket=id_, NotificationConfiguration={}
        )
    )


def _tags(i: dict[str, Any], key: str = "Key", value: str = "Value") -> list[dict[str, str]]:
    """The resource's `tags` input as AWS's list of pairs (platform.tags)."""
    return [{key: k, value: str(v)} for k, v in (i.get("tags") or {}).items()]


def _noop_delete(e: Engine, id_: str, outputs: Outputs) -> None:
    """Sub-configurations (of a bucket, of a REST API) go with their parent."""


# IAM
def create_role(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    role = e.physical_name(name, i)
    params: dict[str, Any] = {"RoleName": role, "AssumeRolePolicyDocument": i["assumeRolePolicy"]}
    if i.get("tags"):
        params["Tags"] = _tags(i)
    for key, param in (("permissionsBoundary", "PermissionsBoundary"), ("path", "Path")):
        if i.get(key):
            params[param] = i[key]
    arn = e.client("iam").create_role(**params)["Role"]["Arn"]
    return role, {"arn": arn, "name": role}


def delete_role(e: Engine, id_: str, _: Outputs) -> None:
    iam = e.client("iam")
    try:
        for policy in iam.list_role_policies(RoleName=id_)["PolicyNames"]:
            iam.delete_role_policy(RoleName=id_, PolicyName=policy)
    except ClientError:
        pass
    _ignore_missing(lambda: iam.delete_role(RoleName=id_))


def create_role_policy(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    policy = e.physical_name(name, i)
    e.client("iam").put_role_policy(
        RoleName=i["role"], PolicyName=policy, PolicyDocument=i["policy"]
    )
    return f"{i['role']}:{policy}", {"name": policy}


def delete_role_policy(e: Engine, id_: str, _: Outputs) -> None:
    role, policy = id_.split(":", 1)
    _ignore_missing(lambda: e.client("iam").delete_role_policy(RoleName=role, PolicyName=policy))


# CloudWatch Logs
def create_log_group(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    group = e.physical_name(name, i)
    logs = e.client("logs")
    logs.create_log_group(logGroupName=group, **({"tags": i["tags"]} if i.get("tags") else {}))
    if i.get("retentionInDays"):
        logs.put_retention_policy(logGroupName=group, retentionInDays=int(i["retentionInDays"]))
    return group, {"name": group, "arn": e.arn("logs", f"log-group:{group}")}


def delete_log_group(e: Engine, id_: str, _: Outputs) -> None:
    _ignore_missing(lambda: e.client("logs").delete_log_group(logGroupName=id_))


# SQS
def create_queue(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    queue = e.physical_name(name, i)
    attributes = {
        attr: str(int(i[key]))
        for key, attr in (
            ("messageRetentionSeconds", "MessageRetentionPeriod"),
            ("visibilityTimeoutSeconds", "VisibilityTimeout"),
        )
        if i.get(key) is not None
    }
    if i.get("sqsManagedSseEnabled"):
        attributes["SqsManagedSseEnabled"] = "true"
    extra = {"tags": {k: str(v) for k, v in i["tags"].items()}} if i.get("tags") else {}
    url = e.client("sqs").create_queue(QueueName=queue, Attributes=attributes, **extra)["QueueUrl"]
    return url, {"url": url, "name": queue, "arn": e.arn("sqs", queue)}


def delete_queue(e: Engine, id_: str, _: Outputs) -> None:
    _ignore_missing(lambda: e.client("sqs").delete_queue(QueueUrl=id_))


def create_queue_policy(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    e.client("sqs").set_queue_attributes(QueueUrl=i["queueUrl"], Attributes={"Policy": i["policy"]})
    return i["queueUrl"], {}


# CloudWatch
def create_metric_alarm(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    alarm = e.physical_name(name, i)
    e.client("cloudwatch").put_metric_alarm(
        AlarmName=alarm,
        AlarmDescription=i.get("alarmDescription") or "",
        Namespace=i["namespace"],
        MetricName=i["metricName"],
        Dimensions=[{"Name": k, "Value": str(v)} for k, v in (i.get("dimensions") or {}).items()],
        Statistic=i["statistic"],
        Period=int(i["period"]),
        EvaluationPeriods=int(i["evaluationPeriods"]),
        Threshold=float(i["threshold"]),
        ComparisonOperator=i["comparisonOperator"],
        TreatMissingData=i.get("treatMissingData") or "missing",
        AlarmActions=list(i.get("alarmActions") or []),
        OKActions=list(i.get("okActions") or []),
        Tags=_tags(i),
    )
    return alarm, {"name": alarm, "arn": e.arn("cloudwatch", f"alarm:{alarm}")}


def delete_metric_alarm(e: Engine, id_: str, _: Outputs) -> None:
    e.client("cloudwatch").delete_alarms(AlarmNames=[id_])


def create_dashboard(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    dashboard = i["dashboardName"]
    e.client("cloudwatch").put_dashboard(DashboardName=dashboard, DashboardBody=i["dashboardBody"])
    return dashboard, {"dashboardName": dashboard}


def delete_dashboard(e: Engine, id_: str, _: Outputs) -> None:
    e.client("cloudwatch").delete_dashboards(DashboardNames=[id_])


# Lambda
def _code_bytes(code: Any) -> bytes:
    path = getattr(code, "path", None)
    if not path:
        raise UnsupportedResource(f"Lambda code must be a pulumi.FileArchive zip, got {code!r}")
    return Path(path).read_bytes()


def create_function(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    function = e.physical_name(name, i)
    params: dict[str, Any] = {
        "FunctionName": function,
        "Runtime": i["runtime"],
        "Role": i["role"],
        "Handler": i["handler"],
        "Code": {"ZipFile": _code_bytes(i["code"])},
        "Timeout": int(i.get("timeout") or 3),
        "MemorySize": int(i.get("memorySize") or 128),
    }
    if i.get("architectures"):
        params["Architectures"] = list(i["architectures"])
    if i.get("layers"):
        params["Layers"] = list(i["layers"])
    if variables := (i.get("environment") or {}).get("variables"):
        params["Environment"] = {"Variables": {k: str(v) for k, v in variables.items()}}
    if target := (i.get("deadLetterConfig") or {}).get("targetArn"):
        params["DeadLetterConfig"] = {"TargetArn": target}
    if logging_config := i.get("loggingConfig"):
        params["LoggingConfig"] = {
            "LogFormat": logging_config.get("logFormat", "Text"),
            **({"LogGroup": logging_config["logGroup"]} if logging_config.get("logGroup") else {}),
            **{
                param: logging_config[key]
                for key, param in (
                    ("applicationLogLevel", "ApplicationLogLevel"),
                    ("systemLogLevel", "SystemLogLevel"),
                )
                if logging_config.get(key)
            },
        }
    if mode := (i.get("tracingConfig") or {}).get("mode"):
        params["TracingConfig"] = {"Mode": mode}
    if i.get("tags"):
        params["Tags"] = {k: str(v) for k, v in i["tags"].items()}
    if durable := i.get("durableConfig"):
        params["DurableConfig"] = {
            "ExecutionTimeout": int(durable["executionTimeout"]),
            "RetentionPeriodInDays": int(durable.get("retentionPeriod") or 14),
        }
    if i.get("publish"):
        params["Publish"] = True
    lam = e.client("lambda")
    created = lam.create_function(**params)
    arn = ":".join(created["FunctionArn"].split(":")[:7])  # unqualified, published or not
    version = created.get("Version", "$LATEST") if i.get("publish") else "$LATEST"
    lam.get_waiter("function_active_v2").wait(FunctionName=function)
    if i.get("reservedConcurrentExecutions") not in (None, -1):
        lam.put_function_concurrency(
            FunctionName=function,
            ReservedConcurrentExecutions=int(i["reservedConcurrentExecutions"]),
        )
    invoke_arn = f"arn:aws:apigateway:{e.region}:lambda:path/2015-03-31/functions/{arn}/invocations"
    return function, {
        "arn": arn,
        "name": function,
        "invokeArn": invoke_arn,
        "qualifiedArn": f"{arn}:{version}",
        "version": version,
    }


def delete_function(e: Engine, id_: str, _: Outputs) -> None:
    _ignore_missing(lambda: e.client("lambda").delete_function(FunctionName=id_))


def create_layer_version(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    published = e.client("lambda").publish_layer_version(
        LayerName=i["layerName"],
        Content={"ZipFile": _code_bytes(i["code"])},
        CompatibleRuntimes=list(i.get("compatibleRuntimes") or []),
    )
    arn = published["LayerVersionArn"]
    return arn, {"arn": arn, "layerArn": published["LayerArn"], "version": published["Version"]}


def delete_layer_version(e: Engine, id_: str, outputs: Outputs) -> None:
    name, version = id_.split(":")[6:8]  # arn:aws:lambda:<region>:<account>:layer:<name>:<n>
    _ignore_missing(
        lambda: e.client("lambda").delete_layer_version(LayerName=name, VersionNumber=int(version))
    )


def create_permission(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    statement = e.physical_name(name, i, "statementId")
    params = {
        "FunctionName": i["function"],
        "StatementId": statement,
        "Action": i["action"],
        "Principal": i["principal"],
    }
    if i.get("sourceArn"):
        params["SourceArn"] = i["sourceArn"]
    if i.get("sourceAccount"):
        params["SourceAccount"] = i["sourceAccount"]
    e.client("lambda").add_permission(**params)
    return f"{i['function']}:{statement}", {"statementId": statement}


def delete_permission(e: Engine, id_: str, _: Outputs) -> None:
    function, statement = id_.rsplit(":", 1)
    _ignore_missing(
        lambda: e.client("lambda").remove_permission(FunctionName=function, StatementId=statement)
    )


# Step Functions
def create_state_machine(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    machine = e.physical_name(name, i)
    params: dict[str, Any] = {
        "name": machine,
        "definition": i["definition"],
        "roleArn": i["roleArn"],
        "type": i.get("type") or "STANDARD",
    }
    if i.get("tags"):
        params["tags"] = _tags(i, "key", "value")
    if (i.get("tracingConfiguration") or {}).get("enabled"):
        params["tracingConfiguration"] = {"enabled": True}
    if (logging := i.get("loggingConfiguration")) and logging.get("logDestination"):
        params["loggingConfiguration"] = {
            "level": logging["level"],
            "includeExecutionData": bool(logging.get("includeExecutionData")),
            "destinations": [
                {"cloudWatchLogsLogGroup": {"logGroupArn": logging["logDestination"]}}
            ],
        }
    arn = e.client("stepfunctions").create_state_machine(**params)["stateMachineArn"]
    return arn, {"arn": arn, "name": machine}


def delete_state_machine(e: Engine, id_: str, _: Outputs) -> None:
    _ignore_missing(lambda: e.client("stepfunctions").delete_state_machine(stateMachineArn=id_))


# EventBridge
def create_event_rule(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    rule = e.physical_name(name, i)
    bus = i.get("eventBusName") or "default"
    params: dict[str, Any] = {
        "Name": rule,
        "EventBusName": bus,
        "State": i.get("state") or "ENABLED",
    }
    for key, param in (
        ("eventPattern", "EventPattern"),
        ("scheduleExpression", "ScheduleExpression"),
    ):
        if i.get(key):
            params[param] = i[key]
    if i.get("tags"):
        params["Tags"] = _tags(i)
    arn = e.client("events").put_rule(**params)["RuleArn"]
    return f"{bus}/{rule}" if bus != "default" else rule, {"arn": arn, "name": rule}


def delete_event_rule(e: Engine, id_: str, _: Outputs) -> None:
    bus, _slash, rule = id_.rpartition("/")
    _ignore_missing(
        lambda: e.client("events").delete_rule(Name=rule, EventBusName=bus or "default", Force=True)
    )


def create_event_target(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    target_id = i.get("targetId") or e.physical_name(name, {})
    target: dict[str, Any] = {"Id": target_id, "Arn": i["arn"]}
    if i.get("roleArn"):
        target["RoleArn"] = i["roleArn"]
    if i.get("input"):
        target["Input"] = i["input"]
    if dead_letter := i.get("deadLetterConfig"):
        target["DeadLetterConfig"] = {"Arn": dead_letter["arn"]}
    if retry := i.get("retryPolicy"):
        target["RetryPolicy"] = {
            "MaximumRetryAttempts": int(retry.get("maximumRetryAttempts", 185)),
            "MaximumEventAgeInSeconds": int(retry.get("maximumEventAgeInSeconds", 86400)),
        }
    if http := i.get("httpTarget"):
        target["HttpParameters"] = {
            "HeaderParameters": http.get("headerParameters") or {},
            "PathParameterValues": http.get("pathParameterValues") or [],
            "QueryStringParameters": http.get("queryStringParameters") or {},
        }
    bus = i.get("eventBusName") or "default"
    response = e.client("events").put_targets(Rule=i["rule"], EventBusName=bus, Targets=[target])
    if response.get("FailedEntryCount"):
        raise RuntimeError(f"put_targets failed: {response['FailedEntries']}")
    return f"{bus}/{i['rule']}/{target_id}", {"targetId": target_id}


def delete_event_target(e: Engine, id_: str, _: Outputs) -> None:
    bus, rule, target_id = id_.split("/", 2)
    _ignore_missing(
        lambda: e.client("events").remove_targets(Rule=rule, EventBusName=bus, Ids=[target_id])
    )


# DynamoDB
def _key_schema(hash_key: str, range_key: str | None) -> list[dict[str, str]]:
    schema = [{"AttributeName": hash_key, "KeyType": "HASH"}]
    if range_key:
        schema.append({"AttributeName": range_key, "KeyType": "RANGE"})
    return schema


def create_table(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    table = e.physical_name(name, i)
    params: dict[str, Any] = {
        "TableName": table,
        "KeySchema": _key_schema(i["hashKey"], i.get("rangeKey")),
        "AttributeDefinitions": [
            {"AttributeName": a["name"], "AttributeType": a["type"]} for a in i["attributes"]
        ],
        "BillingMode": i.get("billingMode") or "PAY_PER_REQUEST",
    }
    if i.get("streamEnabled"):
        params["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": i.get("streamViewType") or "NEW_AND_OLD_IMAGES",
        }
    if indexes := i.get("globalSecondaryIndexes"):
        params["GlobalSecondaryIndexes"] = [
            {
                "IndexName": index["name"],
                "KeySchema": (
                    [
                        {"AttributeName": k["attributeName"], "KeyType": k["keyType"]}
                        for k in index["keySchemas"]
                    ]
                    if index.get("keySchemas")
                    else _key_schema(index["hashKey"], index.get("rangeKey"))
                ),
                "Projection": {
                    "ProjectionType": index.get("projectionType") or "ALL",
                    **(
                        {"NonKeyAttributes": index["nonKeyAttributes"]}
                        if index.get("nonKeyAttributes")
                        else {}
                    ),
                },
                **_warm_throughput(index),
            }
            for index in indexes
        ]
    params |= _warm_throughput(i)
    if i.get("tags"):
        params["Tags"] = _tags(i)
    ddb = e.client("dynamodb")
    description = ddb.create_table(**params)["TableDescription"]
    ddb.get_waiter("table_exists").wait(TableName=table)
    if (ttl := i.get("ttl")) and ttl.get("enabled"):
        ddb.update_time_to_live(
            TableName=table,
            TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["attributeName"]},
        )
    if (i.get("pointInTimeRecovery") or {}).get("enabled"):
        ddb.update_continuous_backups(
            TableName=table,
            PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True},
        )
    return table, {
        "name": table,
        "arn": description["TableArn"],
        "streamArn": description.get("LatestStreamArn", ""),
    }


def _warm_throughput(args: dict[str, Any]) -> dict[str, Any]:
    """A table's or an index's warm throughput, as CreateTable takes it (if set)."""
    warm = args.get("warmThroughput") or {}
    units = {
        "ReadUnitsPerSecond": warm.get("readUnitsPerSecond"),
        "WriteUnitsPerSecond": warm.get("writeUnitsPerSecond"),
    }
    units = {k: int(v) for k, v in units.items() if v}  # (Pulumi's numbers are floats)
    return {"WarmThroughput": units} if units else {}


def delete_table(e: Engine, id_: str, _: Outputs) -> None:
    _ignore_missing(lambda: e.client("dynamodb").delete_table(TableName=id_))


def create_table_item(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    item = json.loads(i["item"])
    e.client("dynamodb").put_item(TableName=i["tableName"], Item=item)
    return f"{i['tableName']}|{json.dumps({i['hashKey']: item[i['hashKey']]})}", {}


def delete_table_item(e: Engine, id_: str, _: Outputs) -> None:
    table, key = id_.split("|", 1)
    _ignore_missing(lambda: e.client("dynamodb").delete_item(TableName=table, Key=json.loads(key)))


def create_event_source_mapping(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    params: dict[str, Any] = {
        "EventSourceArn": i["eventSourceArn"],
        "FunctionName": i["functionName"],
        "StartingPosition": i.get("startingPosition") or "LATEST",
        "BatchSize": int(i.get("batchSize") or 100),
    }
    for key, param in (
        ("bisectBatchOnFunctionError", "BisectBatchOnFunctionError"),
        ("maximumRetryAttempts", "MaximumRetryAttempts"),
    ):
        if i.get(key) is not None:
            params[param] = int(i[key]) if isinstance(i[key], float) else i[key]
    if filters := (i.get("filterCriteria") or {}).get("filters"):
        params["FilterCriteria"] = {"Filters": [{"Pattern": f["pattern"]} for f in filters]}
    if target := ((i.get("destinationConfig") or {}).get("onFailure") or {}).get("destinationArn"):
        params["DestinationConfig"] = {"OnFailure": {"Destination": target}}
    lam = e.client("lambda")
    uuid = lam.create_event_source_mapping(**params)["UUID"]
    for _ in range(60):  # usable once Enabled
        if lam.get_event_source_mapping(UUID=uuid)["State"] == "Enabled":
            break
        time.sleep(0.5)
    return uuid, {"uuid": uuid}


def delete_event_source_mapping(e: Engine, id_: str, _: Outputs) -> None:
    _ignore_missing(lambda: e.client("lambda").delete_event_source_mapping(UUID=id_))


# API Gateway (REST)
def _api(e: Engine) -> Any:
    return e.client("apigateway")


def create_rest_api(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    params: dict[str, Any] = {"name": e.physical_name(name, i)}
    if i.get("description"):
        params["description"] = i["description"]
    if types := (i.get("endpointConfiguration") or {}).get("types"):
        params["endpointConfiguration"] = {"types": [types] if isinstance(types, str) else types}
    if i.get("tags"):
        params["tags"] = {k: str(v) for k, v in i["tags"].items()}
    api = _api(e).create_rest_api(**params)
    root = next(
        r["id"] for r in _api(e).get_resources(restApiId=api["id"])["items"] if r["path"] == "/"
    )
    return api["id"], {
        "rootResourceId": root,
        "name": params["name"],
        "arn": f"arn:aws:apigateway:{e.region}::/restapis/{api['id']}",
        "executionArn": e.arn("execute-api", api["id"]),
    }


def delete_rest_api(e: Engine, id_: str, _: Outputs) -> None:
    _ignore_missing(lambda: _api(e).delete_rest_api(restApiId=id_))


def create_api_resource(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    resource = _api(e).create_resource(
        restApiId=i["restApi"], parentId=i["parentId"], pathPart=i["pathPart"]
    )
    return resource["id"], {"path": resource["path"]}


def create_method(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    params: dict[str, Any] = {
        "restApiId": i["restApi"],
        "resourceId": i["resourceId"],
        "httpMethod": i["httpMethod"],
        "authorizationType": i.get("authorization") or "NONE",
        "apiKeyRequired": bool(i.get("apiKeyRequired")),
    }
    for key in ("requestValidatorId", "requestModels", "requestParameters"):
        if i.get(key):
            params[key] = i[key]
    _api(e).put_method(**params)
    return f"{i['restApi']}/{i['resourceId']}/{i['httpMethod']}", {}


def create_integration(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    params: dict[str, Any] = {
        "restApiId": i["restApi"],
        "resourceId": i["resourceId"],
        "httpMethod": i["httpMethod"],
        "type": i["type"],
    }
    for key in (
        "integrationHttpMethod",
        "uri",
        "credentials",
        "passthroughBehavior",
        "requestTemplates",
    ):
        if i.get(key):
            params[key] = i[key]
    _api(e).put_integration(**params)
    return f"{i['restApi']}/{i['resourceId']}/{i['httpMethod']}/integration", {}


def create_method_response(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    _api(e).put_method_response(
        restApiId=i["restApi"],
        resourceId=i["resourceId"],
        httpMethod=i["httpMethod"],
        statusCode=i["statusCode"],
        responseModels=i.get("responseModels") or {},
    )
    return f"{i['restApi']}/{i['resourceId']}/{i['httpMethod']}/{i['statusCode']}", {}


def create_integration_response(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    params: dict[str, Any] = {
        "restApiId": i["restApi"],
        "resourceId": i["resourceId"],
        "httpMethod": i["httpMethod"],
        "statusCode": i["statusCode"],
        "responseTemplates": i.get("responseTemplates") or {},
    }
    if i.get("selectionPattern"):
        params["selectionPattern"] = i["selectionPattern"]
    _api(e).put_integration_response(**params)
    return f"{i['restApi']}/{i['resourceId']}/{i['httpMethod']}/{i['statusCode']}/integration", {}


def create_gateway_response(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    _api(e).put_gateway_response(
        restApiId=i["restApiId"],
        responseType=i["responseType"],
        statusCode=i.get("statusCode") or "400",
        responseTemplates=i.get("responseTemplates") or {},
    )
    return f"{i['restApiId']}/{i['responseType']}", {}


def create_request_validator(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    validator = _api(e).create_request_validator(
        restApiId=i["restApi"],
        name=e.physical_name(name, i),
        validateRequestBody=bool(i.get("validateRequestBody")),
        validateRequestParameters=bool(i.get("validateRequestParameters")),
    )
    return validator["id"], {}


def create_model(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    model = _api(e).create_model(
        restApiId=i["restApi"], name=i["name"], contentType=i["contentType"], schema=i["schema"]
    )
    return model["id"], {"name": i["name"]}


def create_deployment(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    deployment = _api(e).create_deployment(restApiId=i["restApi"])
    return deployment["id"], {}


def create_stage(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    api, stage = i["restApi"], i["stageName"]
    _api(e).create_stage(
        restApiId=api,
        stageName=stage,
        deploymentId=i["deployment"],
        tracingEnabled=bool(i.get("xrayTracingEnabled")),
        **({"tags": {k: str(v) for k, v in i["tags"].items()}} if i.get("tags") else {}),
    )
    return f"ags-{api}-{stage}", {
        # LocalStack's path-style URL: no DNS needed for {api}.execute-api.localhost...
        "invokeUrl": f"{e.endpoint}/_aws/execute-api/{api}/{stage}",
        "executionArn": e.arn("execute-api", f"{api}/{stage}"),
        "stageName": stage,
    }


def create_api_key(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    key = _api(e).create_api_key(name=e.physical_name(name, i), enabled=True)
    return key["id"], {"value": key["value"], "name": key["name"]}


def delete_api_key(e: Engine, id_: str, _: Outputs) -> None:
    _ignore_missing(lambda: _api(e).delete_api_key(apiKey=id_))


def create_usage_plan(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    params: dict[str, Any] = {
        "name": e.physical_name(name, i),
        "apiStages": [{"apiId": s["apiId"], "stage": s["stage"]} for s in i.get("apiStages") or []],
    }
    if throttle := i.get("throttleSettings"):
        params["throttle"] = {
            "rateLimit": float(throttle.get("rateLimit", 100)),
            "burstLimit": int(throttle.get("burstLimit", 200)),
        }
    plan = _api(e).create_usage_plan(**params)
    return plan["id"], {"name": params["name"]}


def delete_usage_plan(e: Engine, id_: str, _: Outputs) -> None:
    _ignore_missing(lambda: _api(e).delete_usage_plan(usagePlanId=id_))


def create_usage_plan_key(e: Engine, name: str, i: dict[str, Any]) -> tuple[str, Outputs]:
    _api(e).create_usage_plan_key(
        usagePlanId=i["usagePlanId"], keyId=i["keyId"], keyType=i.get("keyType") or "API_KEY"
    )
    return f"{i['usagePlanId']}/{i['keyId']}", {}


def delete_usage_plan_key(e: Engine, id_: str, _: Outputs) -> None:
    plan, key = id_.split("/", 1)
    _ignore_missing(lambda: _api(e).delete_usage_plan_key(usagePlanId=plan, keyId=key))


HANDLERS: dict[str, tuple[Create, Delete]] = {
    "aws:s3/bucket:Bucket": (create_bucket, delete_bucket),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": (
        create_public_access_block,
        _noop_delete,
    ),
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        create_bucket_encryption,
        _noop_delete,
    ),
    "aws:s3/bucketVersioning:BucketVersioning": (create_bucket_versioning, _noop_delete),
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        create_bucket_lifecycle,
        _noop_delete,
    ),
    "aws:s3/bucketNotification:BucketNotification": (
        create_bucket_notification,
        delete_bucket_notification,
    ),
    "aws:iam/role:Role": (create_role, delete_role),
    "aws:iam/rolePolicy:RolePolicy": (create_role_policy, delete_role_policy),
    "aws:cloudwatch/logGroup:LogGroup": (create_log_group, delete_log_group),
    "aws:sqs/queue:Queue": (create_queue, delete_queue),
    "aws:cloudwatch/metricAlarm:MetricAlarm": (create_metric_alarm, delete_metric_alarm),
    "aws:cloudwatch/dashboard:Dashboard": (create_dashboard, delete_dashboard),
    "aws:sqs/queuePolicy:QueuePolicy": (create_queue_policy, _noop_delete),
    "aws:lambda/function:Function": (create_function, delete_function),
    "aws:lambda/layerVersion:LayerVersion": (create_layer_version, delete_layer_version),
    "aws:lambda/permission:Permission": (create_permission, delete_permission),
    "aws:sfn/stateMachine:StateMachine": (create_state_machine, delete_state_machine),
    "aws:cloudwatch/eventRule:EventRule": (create_event_rule, delete_event_rule),
    "aws:cloudwatch/eventTarget:EventTarget": (create_event_target, delete_event_target),
    "aws:dynamodb/table:Table": (create_table, delete_table),
    "aws:dynamodb/tableItem:TableItem": (create_table_item, delete_table_item),
    "aws:lambda/eventSourceMapping:EventSourceMapping": (
        create_event_source_mapping,
        delete_event_source_mapping,
    ),
    "aws:apigateway/restApi:RestApi": (create_rest_api, delete_rest_api),
    # Everything inside a REST API goes with it.
    "aws:apigateway/resource:Resource": (create_api_resource, _noop_delete),
    "aws:apigateway/method:Method": (create_method, _noop_delete),
    "aws:apigateway/integration:Integration": (create_integration, _noop_delete),
    "aws:apigateway/methodResponse:MethodResponse": (create_method_response, _noop_delete),
    "aws:apigateway/integrationResponse:IntegrationResponse": (
        create_integration_response,
        _noop_delete,
    ),
    "aws:apigateway/response:Response": (create_gateway_response, _noop_delete),
    "aws:apigateway/requestValidator:RequestValidator": (create_request_validator, _noop_delete),
    "aws:apigateway/model:Model": (create_model, _noop_delete),
    "aws:apigateway/deployment:Deployment": (create_deployment, _noop_delete),
    "aws:apigateway/stage:Stage": (create_stage, _noop_delete),
    "aws:apigateway/apiKey:ApiKey": (create_api_key, delete_api_key),
    "aws:apigateway/usagePlan:UsagePlan": (create_usage_plan, delete_usage_plan),
    "aws:apigateway/usagePlanKey:UsagePlanKey": (create_usage_plan_key, delete_usage_plan_key),
}
