"""Pattern 3: the precise scheduler. Register messages by API; each fires once, at its time.

POST /messages -> DynamoDB (RESERVED, or STANDBY when due within the window: then the
    API starts its clock too, so a near-term message never waits for the stream)
sweep (EventBridge schedule) -> RESERVED due within the window -> STANDBY, and starts
    STANDBY ones due in the window that the stream never started (same name: no duplicate)
stream (filtered to STANDBY) -> starter -> the slot clock of the message's second,
    `slot-<epoch>`, shared by every message due in that second (or, for a message started
    too late to join its slot, a slot of one: an execution of the same machine named by
    its id): Wait until LEAD_SECONDS before the second -> the slot function claims each
    message (STANDBY -> FIRING), delivers it at its millisecond -> DONE, or FAILED with
    the error
"""

# No `from __future__ import annotations`: the Pulumi package analyzer reads these
# annotations as types (docs/pulumi-package.md).
import dataclasses
import functools
import json
from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_aws as aws

from exactly_once.components.audit import AuditOptions, scheduled_audit
from exactly_once.components.component import Component
from exactly_once.components.config import Defaulted, as_args
from exactly_once.components.functions import (
    allow,
    dead_letter_queue,
    handler_function,
    on_schedule,
)
from exactly_once.components.monitoring import (
    Metric,
    MonitoringOptions,
    Watch,
    metrics_environment,
)
from exactly_once.components.platform import PlatformOptions
from exactly_once.components.rest_api import api_key, fingerprint, stage_name
from exactly_once.components.roles import RoleOptions
from exactly_once.components.state_machines import executions_of, state_machine
from exactly_once.components.tables import index, key_table, warm_writes_args
from exactly_once.components.targets import ACTIONS
from exactly_once.handlers.receiver import TTL_ATTRIBUTE as RECEIVER_TTL
from exactly_once.handlers.scheduler import (
    PATTERN,
    STATUS_INDEX,
    SchedulerSettings,
    Status,
)
from exactly_once.handlers.scheduler_index import LANE
from exactly_once.handlers.scheduler_slots import SlotSettings
from exactly_once.handlers.scheduler_store import TTL_ATTRIBUTE
from exactly_once.handlers.settings import encode
from exactly_once.handlers.targets import TargetKind, kind_of, machine_of

# The slot function delivers a second's messages, each with its retries, and a Lambda
# target may take up to 15 minutes: Lambda's longest. Its
# workers stop a minute sooner: the function that invoked them fans out at once, so a
# worker's claims (held a minute at a time, three while waiting for a throttling target,
# never past its slot's end: handlers/scheduler_slots.py, `Keeper`) are never renewed past
# the slot's life.
SLOT_TIMEOUT_SECONDS = 900
# The slots function's memory, chosen from measured CPU (benchmarks/scheduler_model.py:
# memory_table): its cold start (imports and six clients, 0.24 s of one vCPU) and 50
# claims take about 2.1 s at 256 MB (0.14 vCPU), past its 2 s lead: a cold slot's
# messages fired ~0.6 s late. At 512 MB they fire on time, for $1.33 more per million
# messages at 10 a second (docs/cost.md). platform.functions["slots"] overrides it.
SLOT_MEMORY_MB = 512
WORKERS_TIMEOUT_SECONDS = SLOT_TIMEOUT_SECONDS - 60
# The sweep makes an AWS call per message it moves (every one registered past the window:
# rate x period of them a run, 360,000 at 100 a second and the default hour) at about
# 2 ms of one vCPU each over TLS (benchmarks/measured.json): a whole vCPU (1,769 MB) and
# Lambda's longest timeout move some 400,000 a run (docs/cost.md: sweep_moves_a_run),
# where 256 MB and 300 s moved ~30,000: $0.02 a month more at the default period, idle.
SWEEP_MEMORY_MB = 1769
SWEEP_TIMEOUT_SECONDS = 900
# What the stream starter is given: STANDBY images, to start (the slot function emits
# the fired messages' metrics: no final image is read).
STREAM_FILTERS = ({"dynamodb": {"NewImage": {"status": {"S": [Status.STANDBY]}}}},)


# Lambda throttled the slot function's invoke (it never ran): a busy second's deliveries
# may hold the account's concurrency. Kept trying, 1 s growing 1.5x to 10 s, full jitter:
# about 2 minutes on average, at most about 4, before the message waits for the sweep.
THROTTLED_INVOKE: dict[str, Any] = {
    "ErrorEquals": ["Lambda.TooManyRequestsException"],
    "IntervalSeconds": 1,
    "MaxAttempts": 30,
    "BackoffRate": 1.5,
    "MaxDelaySeconds": 10,
    "JitterStrategy": "FULL",
}
# Anything else: claims the table kept refusing (a throttle past the function's own
# retries, AccessDenied from a policy being changed), Lambda's own errors, a function that
# failed or timed out. 2 s doubling to 60 s, full jitter: about 2 minutes on average, at
# most about 4; each retry takes up what the attempts before it left.
FIRE_FAILED: dict[str, Any] = {
    "ErrorEquals": ["States.ALL"],
    "IntervalSeconds": 2,
    "MaxAttempts": 8,
    "BackoffRate": 2,
    "MaxDelaySeconds": 60,
    "JitterStrategy": "FULL",
}


def slot_definition(slot_function_arn: str) -> dict[str, Any]:
    """Wait -> Fire: one execution per second of publish times, or a slot of one (a message
    too late for its second's: its input names it), handlers/scheduler_slots.py. Two
    state transitions, whatever the number of messages. A failed Fire is retried (the
    function finds its own claims: at least once to the target, with the message id),
    but never after StatusNotRecorded (the deliveries happened); a slot that fails for
    good leaves its unclaimed messages STANDBY, and the sweep starts their slot's next
    attempt once they are overdue."""
    return {
        "Comment": "One second's messages: wait, claim, fire each once on time "
        "(components/scheduler)",
        "StartAt": "Wait",
        "States": {
            "Wait": {"Type": "Wait", "TimestampPath": "$.wakeAt", "Next": "Fire"},
            "Fire": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {
                    "FunctionName": slot_function_arn,
                    "Payload": {
                        # the whole input: a slot of one's names its message (a path to a
                        # field some inputs lack would fail the others)
                        "input.$": "$",
                        "execution.$": "$$.Execution.Id",
                        # each attempt claims as itself; a retry, or a restart of a slot
                        # whose claimant died (its name says so), also takes up claims
                        # whose lease ended
                        "retry.$": "$$.State.RetryCount",
                    },
                },
                "ResultSelector": {"fired.$": "$.Payload"},
                # Step Functions retries an error by the first retrier that matches it,
                # and by no other once that one is spent (developer guide, "Handling
                # errors in Step Functions workflows"): each error its own budget.
                "Retry": [
                    {"ErrorEquals": ["StatusNotRecorded"], "MaxAttempts": 0},
                    THROTTLED_INVOKE,
                    FIRE_FAILED,
                ],
                "End": True,
            },
        },
    }


def status_index_arn(table: aws.dynamodb.Table) -> pulumi.Output[str]:
    """The messages table's status index, as IAM names it (a Query's resource)."""
    return table.arn.apply(lambda arn: f"{arn}/index/{STATUS_INDEX}")


def _standard_only(channel: str, arn: str, machine_type: str | None) -> str | None:
    """A channel's state machine must be STANDARD: StartExecution starts an EXPRESS
    workflow's name again ("Idempotency is not automatically managed")."""
    if machine_type == "EXPRESS":
        raise ValueError(
            f"channel {channel!r}'s target {arn} is an EXPRESS state machine: Step Functions "
            "starts a second execution of a name it already started, so a message could run "
            "twice; give a STANDARD state machine (or a Lambda function that starts it)"
        )
    return machine_type


def _invoker_item(channel: str, redeliver: bool, target_arn: str) -> str:
    """The table item naming a channel's target, and whether it may be sent a message again
    after an unknown outcome (handlers/targets.py: resend_policy)."""
    item: dict[str, Any] = {"pk": {"S": f"INVOKER#{channel}"}, "target_arn": {"S": target_arn}}
    if redeliver:
        item["redeliver"] = {"BOOL": True}
    return json.dumps(item)


@dataclasses.dataclass
class SchedulerArgs:
    """The window must cover the sweep period, or a message could be swept too late."""

    channels: dict[str, pulumi.Input[str]]
    """Channel name -> the ARN of what a message of that channel is delivered to: a Lambda
    function, an SQS queue (FIFO: deduplicated by message id), an SNS topic, a Step
    Functions state machine (STANDARD: the execution named by the message id; an EXPRESS one
    given by its ARN fails the preview, one given as an Output is never sent to) or an
    EventBridge bus."""
    redeliver: Defaulted[list[str]] = dataclasses.field(default_factory=list)
    """Channels whose target drops a redelivery by the message id (a function wrapped in
    `exactly_once.receiver.receiver` does), or accepts a message twice: a send whose
    outcome is unknown (a timeout, a lost answer) is sent again, within the send budget.
    Any other channel's Lambda target is sent a message once at most; one whose outcome is
    unknown ends UNKNOWN (docs/scheduler.md)."""
    receiver_table: Defaulted[bool] = False
    """Create a table for `exactly_once.handlers.receiver` (the `receiverTable` output): your
    target function's record of the messages it applied."""
    sweep_period_minutes: Defaulted[int] = 60
    """How often the sweep runs."""
    window_minutes: Defaulted[int] = 65
    """The sweep moves messages due within this window to STANDBY."""
    late_tolerance_seconds: Defaulted[int] = 60
    """A registration whose publishTime had passed when API Gateway received it, by at
    most this many seconds, is accepted and fired at once, recorded as late (a client
    slowed by a cold start or a burst loses nothing); older ones get 400."""
    stage_name: Defaulted[str] = "v1"
    """The API's stage."""
    retention_days: Defaulted[int] = 7
    """How long an ended message's record is kept past its end (GET answers it, a replayed
    registration under its Idempotency-Key finds it, the audit reads it): then DynamoDB's
    TTL removes it, free (usually within a few days of its expiry). 0 keeps every record
    for ever (the table, and its point-in-time recovery, then grow with every message:
    docs/cost.md)."""
    table_warm_writes: Defaulted[int] = 0
    """Pre-warm the messages table and its status index to this many writes a second
    (their warm throughput), so that a burst meets a new table as one that served it
    before: 10,000 messages due in one second need about 12,000 (a claim and a final
    write each; docs/cost.md, "The scheduler in a burst"). DynamoDB charges the increase
    once; 0 leaves the table's own (a new on-demand table writes 4,000 a second)."""
    warm_ahead_from: Defaulted[int] = 1000
    """A second with at least this many messages has its functions warmed ahead: the
    stream starter, estimating the second's count from the status index as it starts its
    messages, starts a warm-up of the slot function and of the workers it will fan out to,
    8 s before the second, so that a burst after a quiet spell fires on time (docs/cost.md,
    "The scheduler in a burst"). 0: never."""

    roles: RoleOptions | None = None
    """Permissions boundary and path for every IAM role this component creates."""
    platform: PlatformOptions | None = None
    """Tags, X-Ray tracing, log retention and format, Step Functions logging, the logs'
    service name, and each function's settings, on everything this component creates
    (docs/platform.md)."""
    monitoring: MonitoringOptions | None = None
    """Metrics namespace, alarms (and whom they tell), dashboard (docs/operations.md)."""
    audit: AuditOptions | None = None
    """A scheduled audit: every message past its time plus the grace has ended, and with
    `receiver_table` each DONE one was received (Lost, Pending metrics, each alarmed;
    docs/operations.md)."""

    def __post_init__(self) -> None:
        self.validate()  # bad args fail where they are written, with the reason

    def validate(self) -> None:
        if not self.channels:
            raise ValueError("a scheduler needs at least one channel")
        for channel, target in self.channels.items():
            if isinstance(target, str):  # an Output is checked when it resolves
                kind_of(target, f"channel {channel!r}'s target")
        unknown = sorted(set(self.redeliver) - set(self.channels))
        if unknown:
            raise ValueError(f"redeliver names channels that do not exist: {', '.join(unknown)}")
        if self.late_tolerance_seconds < 0:
            raise ValueError(
                f"late_tolerance_seconds must be 0 or more, not {self.late_tolerance_seconds}"
            )
        if self.retention_days < 0:
            raise ValueError(f"retention_days must be 0 or more, not {self.retention_days}")
        if self.table_warm_writes and self.table_warm_writes < 4000:
            raise ValueError(
                f"table_warm_writes must be 0 or at least 4000 (a new on-demand table's own), "
                f"not {self.table_warm_writes}"
            )
        if self.warm_ahead_from < 0:
            raise ValueError(f"warm_ahead_from must be 0 or more, not {self.warm_ahead_from}")
        if 0 < self.retention_days * 86400 <= self.late_tolerance_seconds:
            # a registration replayed after its record expired must find its time passed
            # beyond the tolerance (refused), never register the message again
            raise ValueError(
                f"retention_days ({self.retention_days}) must be longer than "
                f"late_tolerance_seconds ({self.late_tolerance_seconds})"
            )
        if self.sweep_period_minutes < 1:  # EventBridge's rate() takes a positive integer
            raise ValueError(
                f"sweep_period_minutes must be 1 or more, not {self.sweep_period_minutes}"
            )
        stage_name(self.stage_name)
        if self.window_minutes < self.sweep_period_minutes:
            raise ValueError(
                f"window_minutes ({self.window_minutes}) must be at least sweep_period_minutes "
                f"({self.sweep_period_minutes}), or messages due between sweeps fire late"
            )


class Scheduler(Component):
    """Pattern 3: register messages by API (POST /messages); each fires once, at its time."""

    _kind = "Scheduler"
    _functions = ("api", "starter", "sweep", "slots", "slot-workers")

    alarm_names: pulumi.Output[list[str]]
    """Its alarms (DLQ not empty, messages failed or overdue, executions failed)."""
    dashboard_name: pulumi.Output[str] | None
    """Its CloudWatch dashboard (None with monitoring.dashboard off)."""

    table: aws.dynamodb.Table
    """Messages and channels."""
    state_machine: aws.sfn.StateMachine
    """The slot clock: one execution per second of publish times, or per message that came
    too late for its second's."""
    receiver_table: aws.dynamodb.Table | None
    """With `receiver_table`: the table your target's receiver records messages in (string
    key `pk`, TTL on `expires_at`); grant its role dynamodb:PutItem, UpdateItem
    and DeleteItem on it and set RECEIVER_TABLE to its name."""
    url: pulumi.Output[str]
    """The API: POST /messages, GET and DELETE /messages/{id}."""
    api_key: pulumi.Output[str]
    """The API key."""
    dlq: aws.sqs.Queue
    """Stream records that could not be started."""
    sweep_function: aws.lambda_.Function
    """Moves messages due within the window to STANDBY."""
    starter_function: aws.lambda_.Function
    """Starts a STANDBY message's execution."""
    slot_function: aws.lambda_.Function
    """Fires a second's messages, each at its millisecond."""

    def __init__(
        self, name: str, args: SchedulerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        args = as_args(SchedulerArgs, args)  # a dict from the package host
        super().__init__(name, args.roles, args.platform, opts)
        self.table = self._table(name, args.table_warm_writes)
        self.receiver_table = (
            key_table(f"{name}-received", self, ttl_attribute=RECEIVER_TTL)
            if args.receiver_table
            else None
        )
        targets = self._channels(name, args)
        self.slot_function, self.state_machine = self._slots(name, args, targets)
        environment = SchedulerSettings.environment(
            table=self.table.name,
            state_machine_arn=self.state_machine.arn,
            window_seconds=encode(args.window_minutes * 60),
            late_tolerance_seconds=encode(args.late_tolerance_seconds),
            join_slots=encode(True),
            retention_days=encode(args.retention_days),
            warm_ahead_from=encode(args.warm_ahead_from),
        ) | metrics_environment(name, args.monitoring)
        # Read by 0.4's code, which Lambda may run with this configuration for a moment
        # during the upgrade (the provider updates a function's configuration, then its
        # code): without it 0.4's settings fail to load. Gone in 0.6 (CHANGELOG).
        environment["SLOT_MACHINE_ARN"] = self.state_machine.arn
        self.dlq = dead_letter_queue(name, self)
        self.url, self.api_key = self._api(name, args, environment)
        self.sweep_function = self._sweep(name, args, environment)
        self.starter_function = self._stream_starter(name, environment)
        watch = self._watch(name, args)
        receipts = self._receipts(args)
        outputs: dict[str, Any] = {
            "table": self.table.name,
            "stateMachineArn": self.state_machine.arn,
            "url": self.url,
            "apiKey": self.api_key,
            "dlqUrl": self.dlq.url,
            "sweepFunction": self.sweep_function.name,
            "starterFunction": self.starter_function.name,
            "slotFunction": self.slot_function.name,
            "receiverTable": self.receiver_table.name if self.receiver_table else None,
            "receipts": receipts,
            "receiptDays": args.audit.receipt_days if args.audit else 30,
            "retentionDays": args.retention_days,
            "tableWarmWrites": args.table_warm_writes,
            "redeliver": args.redeliver,
        }
        if args.audit is not None:
            # pending messages by the status index, DONE ones by a scan, their receipts
            audit_reads = [
                allow(["dynamodb:Query"], [status_index_arn(self.table)]),
                allow(["dynamodb:Scan"], [self.table.arn]),
            ]
            if receipts:
                tables = self._tables(list(receipts.values()))
                audit_reads.append(allow(["dynamodb:BatchGetItem"], tables))
            scheduled_audit(self, name, outputs, audit_reads, args.audit, args.monitoring, watch)
        self._finish(watch, outputs)

    def _receipts(self, args: SchedulerArgs) -> dict[str, pulumi.Input[str]]:
        """Channel -> the table its target's receiver records messages in (the audit's):
        only the channels the audit options name (a `redeliver` channel's target may take a
        message twice without a receiver, and keep no receipt)."""
        if args.audit is None:
            return {}
        named = {**dict.fromkeys(args.audit.receipt_channels, ""), **args.audit.receipts}
        unknown = sorted(set(named) - set(args.channels))
        if unknown:
            raise ValueError(f"audit receipts: no channel {', '.join(unknown)}")
        if args.audit.receipt_channels and self.receiver_table is None:
            raise ValueError("audit.receipt_channels record in receiver_table: set receiver_table")
        table = self.receiver_table.name if self.receiver_table is not None else ""
        return {channel: given or table for channel, given in named.items()}

    def _tables(self, names: list[pulumi.Input[str]]) -> list[pulumi.Output[str]]:
        """The ARNs of tables of this account and Region, by name."""
        invoke = pulumi.InvokeOptions(parent=self)
        partition = aws.get_partition_output(opts=invoke).partition
        region = aws.get_region_output(opts=invoke).region
        account = aws.get_caller_identity_output(opts=invoke).account_id
        return [
            pulumi.Output.concat(
                "arn:", partition, ":dynamodb:", region, ":", account, ":table/", n
            )
            for n in names
        ]

    def _watch(self, name: str, args: SchedulerArgs) -> Watch:
        watch = Watch(name, PATTERN, args.monitoring, self)
        watch.dead_letters(self.dlq)
        watch.alarm(
            "messages-failed",
            watch.own("Failed"),
            "messages FAILED: their channel's target refused them (GET /messages/{id} "
            "shows the error)",
        )
        watch.alarm(
            "messages-unknown",
            watch.own("Unknown"),
            "messages UNKNOWN: sent, the outcome unseen (a timeout, a lost answer), and not "
            "sent again lest it apply twice: check the target for the message id "
            "(docs/runbook.md)",
        )
        watch.alarm(
            "messages-overdue",
            watch.own("Overdue"),
            "messages still RESERVED or STANDBY 60 s, or FIRING 20 min, past their publish "
            "time (the sweep restarts a STANDBY one; one that stays needs a look: "
            "docs/runbook.md)",
            statistic="Maximum",
            level=True,
        )
        watch.alarm(
            "sweep-failed",
            Metric("AWS/Lambda", "Errors", {"FunctionName": self.sweep_function.name}),
            "a sweep left messages (its time ran out, or calls kept failing: its log line "
            "'sweep' says which); Lambda retries it twice, the next period's run goes on; "
            "held until a run succeeds",
            level=True,  # (Lambda writes Errors 0 for a run that succeeds: OK again then)
        )
        watch.stopped(
            "sweep-stopped",
            watch.own("Overdue"),  # (every run writes it, 0 included)
            args.sweep_period_minutes * 60,
            "no sweep has run for two periods (its schedule rule disabled, its function or "
            "its permission gone): RESERVED messages are not moved, missed starts not made",
        )
        watch.failed_executions(
            self.state_machine.arn,
            "slot executions failed (the slot function kept failing, or a delivered "
            "message's status could not be written: the execution's history says which; "
            "unclaimed messages are restarted by the sweep)",
            what="slot-executions",
        )
        watch.counts("Messages", ["Registered", "DuplicateSuppressed", "Rejected", "Cancelled"])
        watch.counts("Fired", ["Fired", "Late", "Failed", "Unknown", "Overdue"])
        lateness = watch.own("LatenessMs")
        watch.graph("Lateness (ms)", [(lateness, "p50"), (lateness, "p99"), (lateness, "Maximum")])
        return watch

    def _table(self, name: str, warm_writes: int) -> aws.dynamodb.Table:
        """Messages (by status and publish time) and the channels' targets; its stream
        feeds the starter; pre-warmed to `warm_writes` a second, if any."""
        warm = {"warm_throughput": warm_writes_args(warm_writes)} if warm_writes else {}
        return aws.dynamodb.Table(
            f"{name}-messages",
            billing_mode="PAY_PER_REQUEST",
            hash_key="pk",
            attributes=[
                aws.dynamodb.TableAttributeArgs(name="pk", type="S"),
                aws.dynamodb.TableAttributeArgs(name=LANE, type="S"),
                aws.dynamodb.TableAttributeArgs(name="publish_at", type="N"),
            ],
            # by lane (status#n), not by status: handlers/scheduler_index.py
            global_secondary_indexes=[
                index(STATUS_INDEX, LANE, "publish_at", "KEYS_ONLY", warm_writes)
            ],
            stream_enabled=True,
            stream_view_type="NEW_AND_OLD_IMAGES",
            # ended messages expire (retention_days; their removal's stream record is
            # filtered out of the starter's)
            ttl=aws.dynamodb.TableTtlArgs(attribute_name=TTL_ATTRIBUTE, enabled=True),
            point_in_time_recovery=aws.dynamodb.TablePointInTimeRecoveryArgs(enabled=True),
            **warm,
            opts=pulumi.ResourceOptions(parent=self),
        )

    def _channels(self, name: str, args: SchedulerArgs) -> dict[str, pulumi.Output[str]]:
        """Channel -> target ARN, each stored as an INVOKER item the API looks up. A state
        machine given by its ARN is read (its type is not in the ARN): an EXPRESS one fails
        the preview with the reason (`_standard_only`); one given as an Output is checked
        by the slot function before its first start."""
        targets = {
            channel: pulumi.Output.from_input(target) for channel, target in args.channels.items()
        }
        for channel, arn in targets.items():
            redeliver = channel in args.redeliver
            item = arn.apply(functools.partial(_invoker_item, channel, redeliver))
            given = args.channels[channel]
            if isinstance(given, str) and kind_of(given) == TargetKind.STATES:
                machine = aws.sfn.StateMachine.get(
                    f"{name}-channel-{channel}-machine",
                    machine_of(given),
                    opts=pulumi.ResourceOptions(parent=self),
                )
                checked = machine.type.apply(functools.partial(_standard_only, channel, given))
                item = pulumi.Output.all(item, checked).apply(lambda both: str(both[0]))
            aws.dynamodb.TableItem(
                f"{name}-channel-{channel}",
                table_name=self.table.name,
                hash_key="pk",
                item=item,
                opts=pulumi.ResourceOptions(parent=self),
            )
        return targets

    def _slots(
        self, name: str, args: SchedulerArgs, targets: dict[str, pulumi.Output[str]]
    ) -> tuple[aws.lambda_.Function, aws.sfn.StateMachine]:
        """The slot clock: its function, which reads the status index, claims and records
        messages and delivers to the channels' targets (each kind with its own action), and
        fans a large second out to its workers function; and its state machine, which may
        only invoke the slot function."""
        table = self.table

        def statement(arn: str, target: str) -> Any:
            kind = kind_of(arn, target)
            if kind != TargetKind.STATES:
                return allow([ACTIONS[kind]], [arn])
            # a state machine's type is read first (an EXPRESS one is never sent to): of the
            # machine itself, for a version's or an alias's ARN
            actions = [ACTIONS[kind], "states:DescribeStateMachine"]
            return allow(actions, sorted({arn, machine_of(arn)}))

        def grant(channel: str, arn: pulumi.Output[str]) -> Any:  # once the ARN is known
            target = f"channel {channel!r}'s target"
            return arn.apply(lambda a: statement(a, target))

        statements = [
            allow(["dynamodb:Query"], [status_index_arn(table)]),
            allow(["dynamodb:UpdateItem"], [table.arn]),
            *[grant(channel, arn) for channel, arn in targets.items()],
        ]
        environment = metrics_environment(name, args.monitoring)
        # A large second's shares: the same code with a whole vCPU (1,769 MB), as each
        # message costs three AWS calls of CPU; only a second past CHUNK messages uses it.
        workers = handler_function(
            f"{name}-slot-workers",
            handler="exactly_once.handlers.scheduler_slots.handler",
            statements=statements,
            environment=SlotSettings.environment(table=table.name, workers_function="")
            | environment,
            timeout=WORKERS_TIMEOUT_SECONDS,
            memory_size=1769,
            parent=self,
            platform=self._platform,
        ).function
        function = handler_function(
            f"{name}-slots",
            handler="exactly_once.handlers.scheduler_slots.handler",
            statements=[*statements, allow(["lambda:InvokeFunction"], [workers.arn])],
            environment=SlotSettings.environment(table=table.name, workers_function=workers.arn)
            | environment,
            timeout=SLOT_TIMEOUT_SECONDS,
            memory_size=SLOT_MEMORY_MB,
            parent=self,
            platform=self._platform,
        ).function
        machine = state_machine(
            f"{name}-slot-clock",
            function.arn.apply(lambda arn: json.dumps(slot_definition(arn))),
            self,
            [allow(["lambda:InvokeFunction"], [function.arn])],
            self._platform,
        )
        return function, machine

    def _api(
        self, name: str, args: SchedulerArgs, environment: Mapping[str, pulumi.Input[str]]
    ) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """The register API: its function and REST API; (url, api key)."""
        table, machine = self.table, self.state_machine
        function = handler_function(
            f"{name}-api",
            handler="exactly_once.handlers.scheduler_api.handler",
            statements=[
                allow(
                    ["dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"],
                    [table.arn],
                ),
                allow(["states:StopExecution"], [executions_of(machine.arn)]),
                # A message due within the window is started at registration (no stream lag),
                # and a dense second warmed ahead, its count estimated from one lane.
                allow(["states:StartExecution"], [machine.arn]),
                allow(["dynamodb:Query"], [status_index_arn(table)]),
            ],
            environment=environment,
            parent=self,
            platform=self._platform,
        ).function
        return self._rest_api(name, args, function)

    def _sweep(
        self, name: str, args: SchedulerArgs, environment: Mapping[str, pulumi.Input[str]]
    ) -> aws.lambda_.Function:
        """Moves due RESERVED messages to STANDBY and starts STANDBY ones the stream missed."""
        table, machine = self.table, self.state_machine
        function = handler_function(
            f"{name}-sweep",
            handler="exactly_once.handlers.scheduler_sweep.handler",
            statements=[
                allow(["dynamodb:Query"], [status_index_arn(table)]),
                allow(["dynamodb:GetItem", "dynamodb:UpdateItem"], [table.arn]),
                # STANDBY messages whose stream record never started them, stopped again
                # should a cancel have come meanwhile; an overdue one's ended execution is
                # described before its next attempt starts; a slot restarted for a claim
                # whose claimant died (unless its execution failed StatusNotRecorded:
                # described first)
                allow(["states:StartExecution"], [machine.arn]),
                allow(
                    ["states:DescribeExecution", "states:StopExecution"],
                    [executions_of(machine.arn)],
                ),
            ],
            environment=environment,
            timeout=SWEEP_TIMEOUT_SECONDS,
            memory_size=SWEEP_MEMORY_MB,
            parent=self,
            platform=self._platform,
        ).function
        on_schedule(f"{name}-sweep", args.sweep_period_minutes, function, self)
        return function

    def _stream_starter(
        self, name: str, environment: Mapping[str, pulumi.Input[str]]
    ) -> aws.lambda_.Function:
        """Starts the slot clock of each STANDBY message (or its own execution)."""
        table, machine, dlq = self.table, self.state_machine, self.dlq
        starter = handler_function(
            f"{name}-starter",
            handler="exactly_once.handlers.scheduler.stream_handler",
            statements=[
                allow(["states:StartExecution"], [machine.arn]),
                # A start that raced a cancel reads the status and stops the execution.
                allow(["dynamodb:GetItem"], [table.arn]),
                allow(["states:StopExecution"], [executions_of(machine.arn)]),
                # A dense second's count, estimated from one lane (warm_ahead_from).
                allow(["dynamodb:Query"], [status_index_arn(table)]),
                # What the event source mapping reads the stream with (the function's role).
                allow(
                    ["dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"],
                    [table.stream_arn],
                ),
                # ListStreams has no resource-level permissions: only "*" grants it.
                allow(["dynamodb:ListStreams"], ["*"]),
            ],
            environment=environment,
            dead_letter_arn=dlq.arn,
            parent=self,
            platform=self._platform,
        )
        aws.lambda_.EventSourceMapping(
            f"{name}-stream",
            event_source_arn=table.stream_arn,
            function_name=starter.function.arn,
            # From the stream's start: a message registered before the mapping polls is
            # still started. Replays (a re-created mapping) are harmless: same names.
            starting_position="TRIM_HORIZON",
            batch_size=25,
            bisect_batch_on_function_error=True,
            maximum_retry_attempts=5,
            # STANDBY images to start, nothing else: a claim's, an end's, an expiry's
            # records are discarded before any invocation (Lambda developer guide,
            # "Control which events Lambda sends to your function").
            filter_criteria=aws.lambda_.EventSourceMappingFilterCriteriaArgs(
                filters=[
                    aws.lambda_.EventSourceMappingFilterCriteriaFilterArgs(
                        pattern=json.dumps(pattern)
                    )
                    for pattern in STREAM_FILTERS
                ]
            ),
            destination_config=aws.lambda_.EventSourceMappingDestinationConfigArgs(
                on_failure=aws.lambda_.EventSourceMappingDestinationConfigOnFailureArgs(
                    destination_arn=dlq.arn
                )
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        return starter.function

    def _rest_api(
        self, name: str, args: SchedulerArgs, function: aws.lambda_.Function
    ) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """POST /messages and /messages/batch, GET and DELETE /messages/{id}, behind an
        API key; (url, key)."""
        child = pulumi.ResourceOptions(parent=self)
        api = aws.apigateway.RestApi(
            f"{name}-api", description="Register scheduled messages", opts=child
        )

        def path(label: str, parent_id: pulumi.Input[str], part: str) -> Any:
            return aws.apigateway.Resource(
                f"{name}-{label}-resource",
                rest_api=api.id,
                parent_id=parent_id,
                path_part=part,
                opts=child,
            )

        messages = path("messages", api.root_resource_id, "messages")
        one = path("message", messages.id, "{id}")
        # POST /messages/batch: a literal beside {id}, which API Gateway matches first (no
        # message id is "batch": ids are UUIDs or key hashes). Not /messages:batch: a REST
        # API's path part takes letters, digits, ".", "_", "-" and braces only.
        batch = path("batch", messages.id, "batch")
        pieces: list[pulumi.Resource] = []
        for label, resource, verb in (
            ("post", messages, "POST"),
            ("get", one, "GET"),
            ("delete", one, "DELETE"),
            ("batch", batch, "POST"),
        ):
            method = aws.apigateway.Method(
                f"{name}-{label}",
                rest_api=api.id,
                resource_id=resource.id,
                http_method=verb,
                authorization="NONE",
                api_key_required=True,
                opts=child,
            )
            pieces += [
                method,
                aws.apigateway.Integration(
                    f"{name}-{label}-integration",
                    rest_api=api.id,
                    resource_id=resource.id,
                    http_method=method.http_method,
                    type="AWS_PROXY",
                    integration_http_method="POST",
                    uri=function.invoke_arn,
                    opts=child,
                ),
            ]
        aws.lambda_.Permission(
            f"{name}-api-invoke",
            action="lambda:InvokeFunction",
            function=function.name,
            principal="apigateway.amazonaws.com",
            source_arn=api.execution_arn.apply(lambda a: f"{a}/*/*"),
            opts=child,
        )
        deployment = aws.apigateway.Deployment(
            f"{name}-deployment",
            rest_api=api.id,
            triggers={"fingerprint": fingerprint(pieces)},
            opts=pulumi.ResourceOptions(parent=self, depends_on=pieces),
        )
        stage = aws.apigateway.Stage(
            f"{name}-stage",
            rest_api=api.id,
            deployment=deployment.id,
            stage_name=args.stage_name,
            xray_tracing_enabled=self._platform.options.tracing,
            opts=child,
        )
        url = stage.invoke_url.apply(lambda url: f"{url.rstrip('/')}/messages")
        return url, api_key(name, api, stage, self)
