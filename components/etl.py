"""Pattern 5: S3 PutObject -> transform Lambda -> exactly one output per input object version."""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
import dataclasses
import enum
import re
from pathlib import Path
from typing import Literal

import pulumi
import pulumi_aws as aws

from exactly_once.components.audit import AuditOptions, scheduled_audit
from exactly_once.components.buckets import secure_bucket
from exactly_once.components.component import Component
from exactly_once.components.config import Defaulted, as_args
from exactly_once.components.event_patterns import s3_object_created_pattern
from exactly_once.components.functions import (
    allow,
    dead_letter_queue,
    handler_function,
    invoke_from_rule,
)
from exactly_once.components.monitoring import (
    MonitoringOptions,
    Watch,
    metrics_environment,
)
from exactly_once.components.platform import (
    OWN_OPTION,
    Architecture,
    ArchitectureName,
    PlatformOptions,
)
from exactly_once.components.roles import IamStatement, RoleOptions
from exactly_once.components.tables import key_table
from exactly_once.handlers.etl import (
    PATTERN,
    STRATEGY_OF,
    EtlSettings,
    Strategy,
    StrategyName,
    TransformSettings,
)
from exactly_once.handlers.runtime import LogLevel, LogLevelName
from exactly_once.handlers.s3_publish import MIN_PART_SIZE
from exactly_once.handlers.settings import choice, encode

POWERTOOLS = STRATEGY_OF[Strategy.POWERTOOLS].requirements


class Trigger(enum.StrEnum):
    NOTIFICATION = "notification"
    EVENTBRIDGE = "eventbridge"


TriggerName = Literal["notification", "eventbridge"]  # its values (components/config.py)


REFERENCE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
# Set by the component; a transform's own environment may not take them.
RESERVED_VARIABLES = {
    *EtlSettings.variables().values(),
    *TransformSettings.variables().values(),
    "LOG_LEVEL",
    "POWERTOOLS_SERVICE_NAME",
}


@dataclasses.dataclass
class IdempotentEtlArgs:
    """Your transform, run exactly once per input object version."""

    transform: str
    """`package.module:function` in `transform_source`: `function(source, obj)` reads the
    input version's bytes from the stream `source` and yields the output's (see
    handlers/etl.py; examples in examples/etl/etl_transforms)."""
    transform_source: str
    """The folder your module is imported from (a relative path is from the Pulumi
    program's directory); bundled into the function beside the `exactly_once` package."""
    transform_requirements: Defaulted[list[str]] = dataclasses.field(default_factory=list)
    """pip requirements of your transform, vendored into the function, beside those of a
    requirements.txt in transform_source (read as its requirement lines)."""
    transform_environment: Defaulted[dict[str, str]] = dataclasses.field(default_factory=dict)
    """Your transform's own settings, as environment variables."""
    output_suffix: Defaulted[str] = ""
    """Appended to each output key `<output_prefix><input key>.<version or ETag>`."""
    content_type: Defaulted[str] = "application/octet-stream"
    """The outputs' Content-Type."""
    strategy: Defaulted[Strategy | StrategyName] = Strategy.CONDITIONAL_WRITE
    """conditional-write | deterministic | control-record | powertools (docs/idempotent-etl.md)."""
    trigger: Defaulted[Trigger | TriggerName] = Trigger.NOTIFICATION
    """An S3 notification (default) or an EventBridge rule."""
    output_prefix: Defaulted[str] = "out/"
    """Outputs are written under this key prefix."""
    record_ttl_days: Defaulted[int] = 7
    """How long control and FAILED records are kept."""
    force_destroy: Defaulted[bool] = False
    """Delete the buckets this component creates with their objects when it is destroyed
    (for test stacks). Off: a bucket holding data stops the destroy, as S3 does."""
    timeout: Defaulted[int] = 60
    """The function's timeout, seconds."""
    architecture: Defaulted[Architecture | ArchitectureName] = Architecture.X86_64
    """x86_64 or arm64 (Graviton: about 20% cheaper per GB-second)."""
    memory_size: Defaulted[int] = 512
    """The function's memory, MB."""
    part_size_mb: Defaulted[int] = 8
    """Outputs above this size are multipart uploads of parts this size (S3: >= 5)."""
    log_level: Defaulted[LogLevel | LogLevelName] = LogLevel.INFO
    """The function's log level."""
    input_bucket_name: pulumi.Input[str] | None = None
    """An existing input bucket (yours: its notification configuration stays yours, so
    the trigger is EventBridge; turn on its EventBridge notifications). None: create one."""
    input_prefix: Defaulted[str] = ""
    """Only objects under this key prefix are transformed (and may be read)."""
    input_suffix: Defaulted[str] = ""
    """Only objects whose key ends so are transformed (and may be read)."""
    output_bucket_name: pulumi.Input[str] | None = None
    """An existing output bucket (give it an AbortIncompleteMultipartUpload lifecycle
    rule, as a created one has). None: create one."""

    transform_excludes: list[str] | None = None
    """Globs (relative to transform_source) left out of the function's code, beside what
    is never bundled: .venv, .git, node_modules, build, dist, caches (.mypy_cache,
    .pytest_cache, ...), editor folders, .env files, Pulumi.*.yaml."""
    transform_statements: list[IamStatement] | None = None
    """What your transform itself calls on AWS (a lookup table, a secret): added to the
    function's role, nothing more."""
    kms_key_arns: list[pulumi.Input[str]] | None = None
    """The KMS keys of SSE-KMS buckets you bring (input, output): the function may
    decrypt with them (reads) and generate data keys (writes, multipart uploads)."""
    roles: RoleOptions | None = None
    """Permissions boundary and path for every IAM role this component creates."""
    platform: PlatformOptions | None = None
    """Tags, X-Ray tracing, log retention and format, Step Functions logging, the logs'
    service name, and each function's settings, on everything this component creates
    (docs/platform.md)."""
    monitoring: MonitoringOptions | None = None
    """Metrics namespace, alarms (and whom they tell), dashboard (docs/operations.md)."""
    audit: AuditOptions | None = None
    """A scheduled audit: every input version past its grace has exactly one output, or a
    FAILED record (Lost, Doubled, Pending metrics, each alarmed; docs/operations.md)."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        self.strategy = choice(Strategy, self.strategy, "strategy")
        self.trigger = choice(Trigger, self.trigger, "trigger")
        self.architecture = choice(Architecture, self.architecture, "architecture")
        self.log_level = choice(LogLevel, self.log_level, "log_level")
        if self.input_bucket_name is not None and self.trigger != Trigger.EVENTBRIDGE:
            raise ValueError(
                "an existing input bucket's notification configuration is its owner's: use "
                "trigger='eventbridge' and turn on the bucket's EventBridge notifications"
            )
        if self.input_prefix and self.input_suffix and "*" in self.input_prefix + self.input_suffix:
            raise ValueError("input_prefix and input_suffix together may not contain '*'")
        if self.part_size_mb * 1024 * 1024 < MIN_PART_SIZE:
            raise ValueError(f"part_size_mb must be at least 5 (S3), got {self.part_size_mb}")
        self._validate_transform()

    def _validate_transform(self) -> None:
        if not REFERENCE.match(self.transform):
            raise ValueError(f"transform must be 'package.module:function', got {self.transform!r}")
        source = Path(self.transform_source)
        if not source.is_dir():
            raise ValueError(f"transform_source {str(source.resolve())!r} is not a folder")
        module_name, _, function = self.transform.partition(":")
        module = source.joinpath(*module_name.split("."))
        file = module.with_suffix(".py") if module.with_suffix(".py").is_file() else None
        file = file or (module / "__init__.py" if (module / "__init__.py").is_file() else None)
        if file is None:
            raise ValueError(
                f"transform {self.transform!r}: no {module.relative_to(source)}.py "
                f"(or package) in transform_source {str(source)!r}"
            )
        if not _may_define(file, function):
            raise ValueError(
                f"transform {self.transform!r}: {file.relative_to(source)} defines no "
                f"{function!r} (the function fails its first event otherwise)"
            )
        if (source / "exactly_once").exists():
            raise ValueError(
                f"transform_source {str(source)!r} has an 'exactly_once' folder, which would "
                "shadow the ETL's own package in the function"
            )
        taken = sorted(RESERVED_VARIABLES & set(self.transform_environment))
        if taken or any(name.startswith("AWS_") for name in self.transform_environment):
            hints = [f"{name}: set {OWN_OPTION[name]}" for name in taken if name in OWN_OPTION]
            raise ValueError(
                f"transform_environment may not set {taken or 'AWS_*'}: the component sets "
                "them" + (f" ({'; '.join(hints)})" if hints else "")
            )


def folder_requirements(source: str) -> list[str]:
    """The requirement lines of `source`/requirements.txt, if there is one (comments, blank
    lines and pip options such as -r or --index-url are not requirements: refused, so
    nothing is silently left out)."""
    path = Path(source) / "requirements.txt"
    if not path.is_file():
        return []
    found = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-"):
            raise ValueError(
                f"{path}:{number}: {line!r}: give pip options another way (PIP_INDEX_URL, "
                "PIP_FIND_LINKS); a transform's requirements.txt lists requirements only"
            )
        found.append(line)
    return found


class IdempotentEtl(Component):
    """Pattern 5: your transform, run on every object put in a bucket, with exactly one
    output per input object version."""

    _kind = "IdempotentEtl"
    _functions = ("transform",)

    alarm_names: pulumi.Output[list[str]]
    """Its alarms (DLQ not empty, inputs rejected; docs/operations.md)."""
    dashboard_name: pulumi.Output[str] | None
    """Its CloudWatch dashboard (None with monitoring.dashboard off)."""

    input_bucket_name: pulumi.Output[str]
    """The bucket whose objects are transformed."""
    output_bucket_name: pulumi.Output[str]
    """The bucket outputs are written to."""
    control_table: aws.dynamodb.Table
    """Control and FAILED records."""
    function: aws.lambda_.Function
    """The transform function."""
    dlq: aws.sqs.Queue
    """Inputs no retry can fix, with the reason."""

    def __init__(
        self, name: str, args: IdempotentEtlArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        args = as_args(IdempotentEtlArgs, args)  # a dict from the package host
        super().__init__(name, args.roles, args.platform, opts)
        child = pulumi.ResourceOptions(parent=self)
        # A created input is versioned: every upload of a key is a version to transform once
        # (an unversioned bucket of yours works too: each write is told apart by its ETag).
        created_in = (
            secure_bucket(f"{name}-in", self, versioned=True, force_destroy=args.force_destroy)
            if args.input_bucket_name is None
            else None
        )
        self.input_bucket_name, input_arn = self._bucket(args.input_bucket_name, created_in)
        created_out = (
            secure_bucket(
                f"{name}-out", self, force_destroy=args.force_destroy, abort_uploads_after_days=1
            )
            if args.output_bucket_name is None
            else None
        )
        self.output_bucket_name, output_arn = self._bucket(args.output_bucket_name, created_out)
        self.control_table = key_table(
            f"{name}-control",
            self,
            key="id",
            ttl_attribute="expiration",
            point_in_time_recovery=True,
        )
        self.dlq = dead_letter_queue(name, self)
        objects_in = input_arn.apply(lambda arn: f"{arn}/{args.input_prefix}*{args.input_suffix}")
        objects_out = output_arn.apply(lambda arn: f"{arn}/*")
        # S3 answers a missing key with 404 only to a caller that may list the bucket, and
        # with 403 AccessDenied to anyone else (API_GetObject, "Permissions"). The handler
        # needs the 404: on the input, so a vanished version is dead-lettered with its
        # reason instead of retried as a denial; on the output where it looks for a
        # published output (a strategy that `reads_output`: HEAD needs s3:GetObject).
        strategy = STRATEGY_OF[Strategy(args.strategy)]  # what it needs, whichever it is
        read_out = strategy.reads_output
        listed = [input_arn, output_arn] if read_out else [input_arn]
        # Outputs are PUT (or multipart-uploaded: s3:PutObject covers the upload's create,
        # parts and completion) straight to their key, never staged, copied or deleted; a
        # failed multipart upload is aborted.
        written = ["s3:PutObject", "s3:AbortMultipartUpload"]
        statements = [
            allow(["s3:ListBucket"], listed),
            allow(["s3:GetObject", "s3:GetObjectVersion"], [objects_in]),
            allow(["s3:GetObject", *written] if read_out else written, [objects_out]),
        ]
        statements += [extra.statement() for extra in args.transform_statements or []]
        if args.kms_key_arns:
            # SSE-KMS: a GET decrypts; a PUT (and each multipart part) needs a data key.
            statements.append(allow(["kms:Decrypt", "kms:GenerateDataKey"], args.kms_key_arns))
        # Every strategy records a malformed input's FAILED record; only the lock-based
        # ones read, update and delete records.
        recorded = ["dynamodb:PutItem"]
        if strategy.locking:
            recorded = ["dynamodb:GetItem", *recorded, "dynamodb:UpdateItem", "dynamodb:DeleteItem"]
        statements.append(allow(recorded, [self.control_table.arn]))
        transform = handler_function(
            f"{name}-transform",
            handler="exactly_once.handlers.etl.handler",
            statements=statements,
            environment={
                **args.transform_environment,
                **EtlSettings.environment(
                    output_bucket=self.output_bucket_name,
                    strategy=args.strategy,
                    output_prefix=args.output_prefix,
                    output_suffix=args.output_suffix,
                    content_type=args.content_type,
                    control_table=self.control_table.name,
                    record_ttl_seconds=encode(args.record_ttl_days * 24 * 3600),
                    dlq_url=self.dlq.url,
                    part_size=encode(args.part_size_mb * 1024 * 1024),
                ),
                **TransformSettings.environment(transform=args.transform),
                "LOG_LEVEL": args.log_level,
                **metrics_environment(name, args.monitoring),
            },
            dead_letter_arn=self.dlq.arn,
            timeout=args.timeout,
            memory_size=args.memory_size,
            requirements=(
                *strategy.requirements,
                *folder_requirements(args.transform_source),
                *args.transform_requirements,
            ),
            sources=(args.transform_source,),
            excludes=tuple(args.transform_excludes or ()),
            architecture=args.architecture,
            parent=self,
            platform=self._platform,
            args=args,
        )
        self.function = transform.function
        if args.trigger == Trigger.NOTIFICATION:
            permission = aws.lambda_.Permission(
                f"{name}-s3-invoke",
                action="lambda:InvokeFunction",
                function=self.function.name,
                principal="s3.amazonaws.com",
                source_arn=input_arn,
                # Bucket names are global: the bucket must also be this account's, or a
                # deleted bucket's name taken by another account could invoke it.
                source_account=aws.get_caller_identity_output(
                    opts=pulumi.InvokeOptions(parent=self)
                ).account_id,
                opts=child,
            )
            aws.s3.BucketNotification(
                f"{name}-notification",
                bucket=self.input_bucket_name,
                lambda_functions=[
                    aws.s3.BucketNotificationLambdaFunctionArgs(
                        lambda_function_arn=self.function.arn,
                        events=["s3:ObjectCreated:*"],
                        filter_prefix=args.input_prefix or None,
                        filter_suffix=args.input_suffix or None,
                    )
                ],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[permission]),
            )
        else:
            if created_in is not None:  # an existing bucket's owner turns EventBridge on
                aws.s3.BucketNotification(
                    f"{name}-events", bucket=created_in.id, eventbridge=True, opts=child
                )
            rule = aws.cloudwatch.EventRule(
                f"{name}-rule",
                event_pattern=s3_object_created_pattern(
                    self.input_bucket_name,
                    key_prefix=args.input_prefix,
                    key_suffix=args.input_suffix,
                ),
                opts=child,
            )
            invoke_from_rule(name, rule, self.function, self, self.dlq)
        watch = Watch(name, PATTERN, args.monitoring, self)
        watch.dead_letters(self.dlq)
        watch.alarm(
            "inputs-rejected",
            watch.own("Rejected"),
            "input objects were rejected (malformed, gone or overwritten); each has a FAILED "
            "record and a DLQ message with the reason",
        )
        watch.counts("Objects", ["Written", "Duplicate", "Rejected"])
        watch.counts("Output bytes", ["Bytes"])
        outputs = {
            "inputBucket": self.input_bucket_name,
            "outputBucket": self.output_bucket_name,
            # what `exactly-once audit` derives each input's output key from
            "inputPrefix": args.input_prefix,
            "inputSuffix": args.input_suffix,
            "outputPrefix": args.output_prefix,
            "outputSuffix": args.output_suffix,
            "recordTtlSeconds": args.record_ttl_days * 24 * 3600,
            "controlTable": self.control_table.name,
            "functionName": self.function.name,
            "dlqUrl": self.dlq.url,
        }
        if args.audit is not None:
            # what the audit lists (a versioned input's versions, or its objects) and reads
            # (a FAILED record or lock, for a version without output), nothing more
            audit_reads = [
                allow(["s3:ListBucket"], [input_arn, output_arn]),
                allow(["s3:GetBucketVersioning", "s3:ListBucketVersions"], [input_arn]),
                allow(["dynamodb:BatchGetItem"], [self.control_table.arn]),
            ]
            scheduled_audit(self, name, outputs, audit_reads, args.audit, args.monitoring, watch)
        self._finish(watch, outputs)

    def _bucket(
        self, existing: pulumi.Input[str] | None, created: aws.s3.Bucket | None
    ) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """(name, ARN) of a bucket given by name or created by this component."""
        if created is not None:
            return created.bucket, created.arn
        assert existing is not None
        partition = aws.get_partition_output(opts=pulumi.InvokeOptions(parent=self)).partition
        name = pulumi.Output.from_input(existing)
        return name, pulumi.Output.all(partition, name).apply(lambda v: f"arn:{v[0]}:s3:::{v[1]}")


def _may_define(file: Path, name: str) -> bool:
    """Whether the module in `file` may have a top-level `name`, read statically: a def, a
    class, an assignment or an import of it; a module that builds names at run time (a
    star import, a module __getattr__, globals()) is given the benefit of the doubt."""
    import ast

    try:
        tree = ast.parse(file.read_text(), str(file))
    except (SyntaxError, UnicodeDecodeError) as exc:
        raise ValueError(f"transform module {file.name} does not parse: {exc}") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any(alias.name == "*" for alias in node.names):
                return True
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(
                t.id for target in targets for t in ast.walk(target) if isinstance(t, ast.Name)
            )
    if "__getattr__" in names or "globals" in {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
    }:
        return True
    return name in names
