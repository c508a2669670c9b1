"""`exactly-once` (or `python -m exactly_once.ops`): operate a resumable workflow (pattern
4); redrive any DLQ; end a scheduler's message by hand, give its pending messages their
lanes. Each command checks it was pointed at what it works on; each that writes has
--dry-run, and asks first on a terminal (--yes for scripts).

    show     --key K                 a key's checkpoint
    mark     --key K --step S        mark a step done by hand                    writes
    unmark   --key K --step S        make a step run again                       writes
    clear    --key K                 forget the key's checkpoint                 writes
    rerun    --key K --input J       re-run from the top                         writes
    redrive  --execution ARN         Step Functions' RedriveExecution            writes
    redrive-dlq --queue URL --function NAME   send dead letters back, once       writes
             (any component with a function; --list shows them, receiving them)
    scheduler-set-status --id ID --status DONE   a delivered message whose       writes
             status was never written, ended by hand (the runbook's step)
    scheduler-lanes --table T        pending messages into the status index's    writes
             lanes (once, upgrading 0.2 -> 0.3)
    audit    --outputs F --component C   did every input take effect exactly once?
             (an ETL's, a scheduler's, a workflow's, a bucket's starter's; exit 3 on a finding)

What each works on, checked before anything is written (refused, exit 2, naming what it
was pointed at): the workflow commands a ResumableWorkflow's state machine and its own
checkpoint table, and only items shaped as checkpoints (never a scheduler's message);
redrive-dlq a starter's, an ETL's or a scheduler's function whose DLQ the queue is; the
scheduler commands a Scheduler's messages. With --outputs, a component of another kind
(its outputs' `kind`) is refused by name.

Commands that write: --dry-run reads what they would change and writes nothing (redrive-dlq's
receives nothing either: SQS shows a message only by receiving it, which hides it and
counts a receive, so it reports the queue's counts). On a terminal they ask first, naming
what they will change; --yes answers for scripts, and without a terminal it is needed.

The workflow comes from --table and --state-machine (the component's outputs; `redrive`
reads the machine from the execution's ARN), or from a stack's outputs as JSON (--outputs
FILE: `pulumi stack output --json > FILE`): the component's outputs at the top, or in the
one output holding them, or in --component's.
AWS credentials and region come from the standard chain (AWS_PROFILE, AWS_REGION,
~/.aws/config), or --profile and --region; --endpoint-url keeps them (LocalStack's test
keys only when there are none).
COMMAND --help shows each command with an example. Exit codes: 0 done (or a dry run),
1 AWS refused or failed, 2 refused here (a bad command, the wrong target, not confirmed),
3 the audit found an input lost, doubled or pending.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from exactly_once.handlers.scheduler_index import KEY_PREFIX, Status
from exactly_once.handlers.scheduler_store import SETTLED
from exactly_once.ops.checkpoints import Checkpoints, NotACheckpoint, RedriveRefused
from exactly_once.ops.dead_letters import REDRIVABLE, DeadLetters, WrongTarget
from exactly_once.ops.scheduler_lanes import MessageRefused
from exactly_once.ops.session import clients

PROG = "python -m exactly_once.ops"
CONSOLE = "exactly-once"  # the wheel's console script (pyproject.toml)
WORKFLOW = (
    "--table orders-checkpoints --state-machine arn:aws:states:REGION:ACCOUNT:stateMachine:orders"
)
# command -> (what it does, an example)
COMMANDS = {
    "show": (
        "Print a key's checkpoint: each step's entry, the lease, completion.",
        "--key order-7",
    ),
    "mark": (
        "Mark a step done by hand (with the output later steps should see): the next run skips it.",
        "--key order-7 --step charge --output '{\"paid\": true}'",
    ),
    "unmark": ("Make a step run again on the next run.", "--key order-7 --step ship"),
    "clear": (
        "Forget a key's checkpoint (also a completed key's): the next run starts afresh.",
        "--key order-7",
    ),
    "rerun": (
        "Start the workflow again from the top under the next attempt name "
        "(key-r1, key-r2, ...); the steps done are skipped.",
        '--key order-7 --input \'{"orderId": "order-7"}\'',
    ),
    "redrive": (
        "Step Functions' RedriveExecution: resume a failed execution from the failed state "
        "(within 14 days); refused once another run took the key over or completed it.",
        "--execution arn:aws:states:REGION:ACCOUNT:execution:orders:order-7",
    ),
    "redrive-dlq": (
        "Send a component's dead-lettered events back through the function that first took "
        "them: its dedup makes an event whose work succeeded meanwhile a duplicate; one that "
        "fails again returns to the queue with every reason. --list shows each message and "
        "its reasons (receiving them: SQS has no other way); --dry-run only counts them.",
        "--outputs outputs.json --component nameDedup --list",
    ),
    "scheduler-set-status": (
        "End by hand a message that was delivered and whose status could not be written "
        "(FIRING, marked unrecorded by the sweep; docs/runbook.md): DONE if its target has "
        "it, FAILED or UNKNOWN otherwise. It leaves the status index; nothing is sent.",
        "--outputs outputs.json --component reminders --id 0b9c... --status DONE",
    ),
    "scheduler-lanes": (
        "Once, after upgrading a scheduler deployed before 0.3: give every pending message "
        "its lane in the status index (the sweep and the slot clock read lanes). Safe to "
        "run again.",
        "--table my-scheduler-messages-1234567",
    ),
    "audit": (
        "Reconcile a component's inputs with their effects, reading only: each input past "
        "its grace must have taken effect once (an ETL's object versions against their "
        "outputs, a scheduler's messages against their end and their receipts, a resumable "
        "workflow's keys against their steps, a bucket's uploads against the executions "
        "its name-dedup starter started). Findings: lost, doubled, pending "
        "(docs/runbook.md says what to do with each); exit 3 if any.",
        "--outputs outputs.json --component thumbnails --since 2026-12-01T00:00:00Z",
    ),
}
WRITES = frozenset(set(COMMANDS) - {"show", "audit"})
AUDITED = ("IdempotentEtl", "NameDedupStarter", "ResumableWorkflow", "Scheduler")
FOUND = 3  # the audit's exit status when it found anything
# The component kinds each command works on (a component's `kind` output)
WORKFLOW_KIND = ("ResumableWorkflow",)
KINDS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("show", "mark", "unmark", "clear", "rerun", "redrive"), WORKFLOW_KIND),
    "redrive-dlq": tuple(sorted(set(REDRIVABLE.values()))),
    "scheduler-set-status": ("Scheduler",),
    "scheduler-lanes": ("Scheduler",),
    "audit": AUDITED,
}
DEAD_LETTERS = (
    "--queue https://sqs.REGION.amazonaws.com/ACCOUNT/orders-dlq --function orders-starter"
)
API_STARTER = (
    "an ApiGatewayStarter's DLQ has no function: its events went to the API; send them "
    "with `aws events put-events` once its cause is fixed, the mapping template dedups them"
)
NO_PEEK = (
    "SQS shows a message only by receiving it (hidden for its visibility timeout, its "
    "receive count raised), so a dry run lists none: --list receives each to show it and "
    "its reasons; these counts are approximate (GetQueueAttributes: consistent at least a "
    "minute after sends stop)"
)
# RedriveExecution takes "failed, aborted, or timed out executions" of a STANDARD workflow
# "that didn't complete successfully in the last 14 days" (Step Functions API reference);
# DescribeExecution's redriveStatus says whether it would (an execution described without
# it, as by an emulator, is judged by these).
REDRIVABLE_STATUSES = frozenset({"FAILED", "TIMED_OUT", "ABORTED"})
REDRIVE_PERIOD = datetime.timedelta(days=14)


class CommandError(Exception):
    """What the operator asked cannot be done: one line, exit 2."""


@dataclasses.dataclass
class Change:
    """What a writing command will change, found by reads only: `what` names it (in the
    confirmation, and as a dry run's answer with `preview`); `apply` makes it. No `apply`:
    nothing to change, `preview` is the answer."""

    what: str
    preview: dict[str, Any]
    apply: Callable[[], Any] | None = None


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc.msg}") from None


def _instant(text: str) -> str:
    """An ISO 8601 time with its offset, as the scheduler writes `fired_at`."""
    from exactly_once.handlers import timestamps

    try:
        return timestamps.iso_ms(timestamps.epoch(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time with its offset: {exc}") from None


def _version() -> str:
    import exactly_once

    return str(exactly_once.__version__)


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    paragraphs = (__doc__ or prog).split("\n\n")
    root = argparse.ArgumentParser(
        prog=prog,
        # the docstring's first paragraph, then the rest as written (none under python -OO)
        description=" ".join(paragraphs[0].split()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join([*paragraphs[1:], f"example: {prog} show --key order-7 {WORKFLOW}"]),
    )
    root.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (summary, example) in COMMANDS.items():
        if name == "redrive-dlq":
            _dead_letters_parser(commands, prog, name, summary, example)
        elif name.startswith("scheduler-"):
            _scheduler_parser(commands, prog, name, summary, example)
        elif name == "audit":
            _audit_parser(commands, prog, name, summary, example)
        else:
            _workflow_parser(commands, prog, name, summary, example)
    return root


def _command(commands: Any, prog: str, name: str, summary: str, epilog: str) -> Any:
    """A command's parser; one that writes says so, with --dry-run and --yes."""
    writes = name in WRITES
    description = summary
    if writes:
        description += (
            " Writes: --dry-run shows what it would change and changes nothing; on a "
            "terminal it asks first, naming the change (--yes for scripts: needed where "
            "there is no terminal)."
        )
    command = commands.add_parser(
        name,
        help=f"{summary} (writes)" if writes else summary,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if writes:
        command.add_argument(
            "--dry-run", action="store_true", help="read what would change; change nothing"
        )
        command.add_argument(
            "--yes", action="store_true", help="go ahead without asking (scripts, CI)"
        )
    return command


def _aws(group: Any) -> None:
    group.add_argument("--region", help="AWS region (default: the standard chain)")
    group.add_argument("--profile", help="AWS profile (default: the standard chain)")
    group.add_argument("--endpoint-url", help="e.g. http://127.0.0.1:4566 (LocalStack)")


def _workflow_parser(commands: Any, prog: str, name: str, summary: str, example: str) -> None:
    command = _command(
        commands, prog, name, summary, f"example: {prog} {name} {example} {WORKFLOW}"
    )
    if name == "redrive":
        command.add_argument("--execution", required=True, help="the failed execution's ARN")
    else:
        command.add_argument("--key", required=True, help="the business key")
    if name in ("mark", "unmark"):
        command.add_argument("--step", required=True, help="a step of the workflow")
    if name == "mark":
        command.add_argument(
            "--output", type=_json, default=None, help="JSON: the output to record"
        )
    if name == "rerun":
        command.add_argument(
            "--input", type=_json, default={}, help="JSON: the workflow input (default {})"
        )
    where = command.add_argument_group("which workflow, where")
    where.add_argument("--table", help="the checkpoint table (the component's `table`)")
    where.add_argument("--state-machine", help="the workflow's state machine ARN")
    where.add_argument(
        "--outputs",
        help="a stack's outputs as JSON (`pulumi stack output --json`): the workflow's "
        "table and stateMachineArn, at the top or in one output",
    )
    where.add_argument("--component", help="with --outputs: the output holding them")
    _aws(where)


def _dead_letters_parser(commands: Any, prog: str, name: str, summary: str, example: str) -> None:
    command = _command(
        commands,
        prog,
        name,
        summary,
        f"example: {prog} {name} {DEAD_LETTERS} --dry-run\nexample: {prog} {name} {example}",
    )
    command.add_argument(
        "--list",
        action="store_true",
        help="show each message and its reasons, send nothing: each is received (its "
        "receive count rises; hidden at most a minute) and put back; `complete` says "
        "whether the whole queue was listed",
    )
    where = command.add_argument_group("which queue and function, where")
    where.add_argument("--queue", help="the DLQ's URL (a component's `dlqUrl`)")
    where.add_argument(
        "--function",
        help="the function that took the events (the starter's or transform's "
        "`functionName`, the scheduler's `starterFunction`)",
    )
    where.add_argument("--outputs", help="a stack's outputs as JSON (`pulumi stack output --json`)")
    where.add_argument("--component", help="with --outputs: the output holding dlqUrl")
    _aws(where)


def _scheduler_parser(commands: Any, prog: str, name: str, summary: str, example: str) -> None:
    command = _command(commands, prog, name, summary, f"example: {prog} {name} {example}")
    if name == "scheduler-set-status":
        command.add_argument("--id", required=True, help="the message's id")
        command.add_argument(
            "--status",
            required=True,
            choices=[str(status) for status in SETTLED],
            help="DONE: its target has it; FAILED: it refused it; UNKNOWN: nobody can tell",
        )
        command.add_argument("--error", help="FAILED or UNKNOWN: why (shown by GET /messages)")
        command.add_argument(
            "--fired-at",
            type=_instant,
            help="DONE: when the target took it (ISO 8601 with its offset), if known",
        )
    where = command.add_argument_group("which scheduler, where")
    where.add_argument("--table", help="the scheduler's messages table (its `table` output)")
    where.add_argument("--outputs", help="a stack's outputs as JSON (`pulumi stack output --json`)")
    where.add_argument("--component", help="with --outputs: the output holding the scheduler's")
    _aws(where)


def _audit_parser(commands: Any, prog: str, name: str, summary: str, example: str) -> None:
    command = _command(commands, prog, name, summary, f"example: {prog} {name} {example}")
    command.add_argument(
        "--since",
        type=_instant,
        help="judge the inputs from this time (ISO 8601 with its offset; default: all)",
    )
    command.add_argument(
        "--grace-minutes",
        type=float,
        default=15.0,
        help="an input younger than this is not judged yet (default 15)",
    )
    command.add_argument(
        "--format", choices=["json", "table"], default="json", help="the report's form"
    )
    where = command.add_argument_group("which component, where")
    where.add_argument(
        "--outputs", required=True, help="a stack's outputs as JSON (`pulumi stack output --json`)"
    )
    where.add_argument("--component", help="the output holding the component's (its exports())")
    _aws(where)


def _audit(args: argparse.Namespace) -> Any:
    from exactly_once.handlers import timestamps
    from exactly_once.handlers.audit import NotAudited, audit

    outputs = _outputs(args.outputs, args.component, {"kind"}, args.command)
    since = timestamps.epoch(args.since) if args.since else None
    client = clients(args.endpoint_url, args.region, args.profile)
    try:
        return audit(outputs, client, args.grace_minutes * 60, since)
    except NotAudited as exc:
        raise CommandError(str(exc)) from None


def _table(report: Any) -> str:
    """The report for a terminal: the counts, then one line per finding listed."""
    counts = ", ".join(f"{n} {kind}" for kind, n in report.counts.items())
    lines = [f"{report.component}: {report.audited} inputs judged; {counts}"]
    lines += [f"  {f.kind:<8} {f.item}  {f.reason}" for f in report.findings]
    if len(report.findings) < sum(report.counts.values()):
        lines.append(f"  (the first {len(report.findings)} listed)")
    lines += [f"  accounted: {n} {why}" for why, n in report.accounted.items()]
    lines += [f"  cannot tell: {limit}" for limit in report.limits]
    return "\n".join(lines)


def _a(kind: str) -> str:
    return f"{'an' if kind[0] in 'AEIOU' else 'a'} {kind}"


def _kinds(kinds: tuple[str, ...]) -> str:
    named = [_a(kind) for kind in kinds]
    return named[0] if len(named) == 1 else f"{', '.join(named[:-1])} or {named[-1]}"


def _of_kind(outputs: dict[str, Any], who: str, command: str | None) -> None:
    """Refuse a component of another kind than the command works on, by name (outputs
    exported before components carried `kind` pass: the checks on what they name hold)."""
    kinds = KINDS.get(command or "")
    kind = outputs.get("kind")
    if kinds and isinstance(kind, str) and kind not in kinds:
        hint = (
            f" ({API_STARTER})" if kind == "ApiGatewayStarter" and command == "redrive-dlq" else ""
        )
        raise CommandError(f"{who} is {_a(kind)}; {command} works on {_kinds(kinds)}{hint}")


def _outputs(
    path: str, component: str | None, wanted: set[str], command: str | None = None
) -> dict[str, Any]:
    """The component's outputs in a stack's outputs file: the file itself when it is one
    component's outputs, else the output named `component`, else the one output holding
    `wanted` (this repository's stacks name the workflow's `resumable`) of a kind
    `command` works on; a component of another kind refused by name."""
    try:
        outputs = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CommandError(f"cannot read stack outputs from {path}: {exc}") from None
    if not isinstance(outputs, dict):
        raise CommandError(f"{path} is not a JSON object of stack outputs")
    if component is not None:
        found = outputs.get(component)
        if isinstance(found, dict):
            _of_kind(found, f"component {component!r}", command)
        if not isinstance(found, dict) or not wanted <= found.keys():
            raise CommandError(f"{path}: output {component!r} has no {', '.join(sorted(wanted))}")
        return found
    if wanted <= outputs.keys():
        _of_kind(outputs, path, command)
        return outputs
    holding = {k: v for k, v in outputs.items() if isinstance(v, dict) and wanted <= v.keys()}
    kinds = KINDS.get(command or "", ())
    fitting = {k: v for k, v in holding.items() if v.get("kind") in (None, *kinds) or not kinds}
    if len(fitting) == 1:
        return next(iter(fitting.values()))
    if holding and not fitting:
        others = ", ".join(f"{k!r} is {_a(str(v['kind']))}" for k, v in sorted(holding.items()))
        raise CommandError(f"{path}: {command} works on {_kinds(kinds)}; {others}")
    which = f"one of {', '.join(sorted(fitting))}" if fitting else "the output holding them"
    raise CommandError(f"{path}: give --component ({which}): it needs {', '.join(sorted(wanted))}")


# What AWS accepts, checked before any call: a typo is one clear line (exit 2), not an
# AWS error about something else. An SQS queue URL is <endpoint>/<account>/<queue name>
# (SQS developer guide, "Amazon SQS queue and message identifiers": a name of up to 80
# alphanumerics, - and _, .fifo for a FIFO queue); a function is a name, a partial or a
# full ARN, with an optional version or alias (Lambda API reference, Invoke: FunctionName).
QUEUE_URL = re.compile(  # (and an emulator's: LocalStack's path style, ElasticMQ's)
    r"https?://[^/\s]+(/[^/\s]+)*/[A-Za-z0-9_-]{1,75}(\.fifo|[A-Za-z0-9_-]{0,5})"
)
FUNCTION = re.compile(
    r"(arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:\d{12}:function:|\d{12}:function:)?"
    r"[a-zA-Z0-9_-]{1,64}(:(\$LATEST(\.PUBLISHED)?|[a-zA-Z0-9_-]{1,128}))?"
)
# DynamoDB's table names, or a table's ARN (which its API takes as TableName too)
TABLE = re.compile(
    r"[a-zA-Z0-9_.-]{3,255}|arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table/[a-zA-Z0-9_.-]{3,255}"
)


def _checked(what: str, value: str, pattern: re.Pattern[str], shape: str) -> str:
    if not pattern.fullmatch(value):
        raise CommandError(f"{what} {value!r} is not {shape}")
    return value


def _dead_letters(args: argparse.Namespace) -> DeadLetters:
    queue, function = args.queue, args.function
    if not (queue and function) and args.outputs:
        found = _outputs(args.outputs, args.component, {"dlqUrl"}, args.command)
        queue = queue or found["dlqUrl"]
        function = function or found.get("functionName") or found.get("starterFunction")
    if not (queue and function):
        raise CommandError(
            f"give --queue and --function, or --outputs and --component ({API_STARTER})"
        )
    _checked(
        "--queue",
        queue,
        QUEUE_URL,
        "an SQS queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)",
    )
    _checked("--function", function, FUNCTION, "a Lambda function's name or ARN")
    return DeadLetters(queue, function, clients(args.endpoint_url, args.region, args.profile))


def _scheduler_table(args: argparse.Namespace, client: Callable[..., Any]) -> str:
    """The Scheduler's messages table: one with its status index (a checkpoint table, a
    receiver's, has none), else refused."""
    from exactly_once.handlers.scheduler_index import STATUS_INDEX

    table = args.table
    if not table and args.outputs:
        table = _outputs(args.outputs, args.component, {"table"}, args.command)["table"]
    if not table:
        raise CommandError("give --table, or --outputs (a stack's outputs) and --component")
    _checked("--table", table, TABLE, "a DynamoDB table name")
    described = client("dynamodb").describe_table(TableName=table)["Table"]
    indexes = [index["IndexName"] for index in described.get("GlobalSecondaryIndexes", [])]
    if STATUS_INDEX not in indexes:
        raise CommandError(
            f"table {table!r} is not a Scheduler's messages table (it has no {STATUS_INDEX} "
            f"index; its indexes: {', '.join(indexes) or 'none'})"
        )
    return str(table)


def _workflow(args: argparse.Namespace) -> Checkpoints:
    table, machine = args.table, args.state_machine
    if args.command == "redrive" and not machine:  # the execution names its machine
        machine = _machine_of(args.execution)
    if not (table and machine) and args.outputs:
        workflow = _outputs(
            args.outputs, args.component, {"table", "stateMachineArn"}, args.command
        )
        table, machine = table or workflow["table"], machine or workflow["stateMachineArn"]
    if not (table and machine):
        raise CommandError("give --table and --state-machine, or --outputs (a stack's outputs)")
    _checked("--table", table, TABLE, "a DynamoDB table name")
    try:
        return Checkpoints(table, machine, args.endpoint_url, args.region, args.profile)
    except ValueError as exc:
        raise CommandError(f"--state-machine: {exc}") from None


def _machine_of(execution_arn: str) -> str:
    """arn:aws:states:R:A:execution:MACHINE:NAME -> arn:aws:states:R:A:stateMachine:MACHINE"""
    parts = execution_arn.split(":")
    if len(parts) != 8 or parts[2] != "states" or parts[5] != "execution":
        raise CommandError(
            f"--execution {execution_arn!r} is not an execution ARN "
            "(arn:aws:states:REGION:ACCOUNT:execution:MACHINE:NAME)"
        )
    return ":".join([*parts[:5], "stateMachine", parts[6]])


def _steps(workflow: Checkpoints) -> list[str]:
    """The workflow's steps: the machine a ResumableWorkflow's, the table its own."""
    try:
        return workflow.steps()
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _known_step(workflow: Checkpoints, step: str) -> str:
    steps = _steps(workflow)
    if step not in steps:
        raise CommandError(f"unknown step {step!r}; the workflow's steps: {', '.join(steps)}")
    return step


def _not_a_checkpoint(args: argparse.Namespace, workflow: Checkpoints, done: str) -> CommandError:
    return CommandError(
        f"{args.key!r} is no checkpoint of this workflow's table ({workflow.table}): "
        f"nothing {done} (is --component, or --table, a ResumableWorkflow's?)"
    )


def _marking(args: argparse.Namespace, workflow: Checkpoints) -> Change:
    step = _known_step(workflow, args.step)
    preview = {"key": args.key, "step": step, "checkpoint": workflow.show(args.key)}
    if args.command == "mark":
        what = (
            f"mark step {step!r} of key {args.key!r} done in table {workflow.table} (output "
            f"{json.dumps(args.output)}): its next run skips it"
        )
    else:
        what = f"make step {step!r} of key {args.key!r} run again (table {workflow.table})"

    def apply() -> Any:
        try:
            if args.command == "mark":
                workflow.mark_done(args.key, step, args.output)
            else:
                workflow.mark_not_done(args.key, step)
        except workflow.ddb.exceptions.ConditionalCheckFailedException:
            raise _not_a_checkpoint(args, workflow, "written") from None
        return workflow.show(args.key)

    return Change(what, preview, apply)


def _clearing(args: argparse.Namespace, workflow: Checkpoints) -> Change:
    steps = _steps(workflow)  # (a resumable workflow's, or nothing is deleted)
    shown = workflow.show(args.key)
    if shown is None:
        return Change("", {"key": args.key, "cleared": False})  # (nothing to forget)
    done = [name for name in steps if shown["steps"].get(name, {}).get("done")]
    completed = ", completed" if shown["completed_at"] is not None else ""
    what = (
        f"delete key {args.key!r}'s checkpoint from table {workflow.table} ({len(done)} of "
        f"{len(steps)} steps done{completed}): its next run runs every step again"
    )

    def apply() -> Any:
        cleared = workflow.clear(args.key)
        if cleared == "refused":
            raise _not_a_checkpoint(args, workflow, "deleted")
        return {"key": args.key, "cleared": cleared == "cleared"}  # (absent: nothing to do)

    return Change(what, {"key": args.key, "checkpoint": shown}, apply)


def _rerunning(args: argparse.Namespace, workflow: Checkpoints) -> Change:
    from exactly_once.handlers.executions import DUPLICATE, execution_arn
    from exactly_once.handlers.names import execution_name

    _steps(workflow)  # (a resumable workflow's, or nothing is started)
    attempt, status = workflow.next_attempt(args.key)
    name = execution_name(args.key, attempt)
    found = {
        "name": name,
        "execution_arn": execution_arn(workflow.state_machine_arn, name),
        "attempt": attempt,
    }
    if status is not None:  # running or succeeded: a rerun starts nothing
        return Change("", {"status": DUPLICATE, **found, "existing_status": status})
    what = (
        f"start {workflow.state_machine_arn} for key {args.key!r} as {name} (input "
        f"{json.dumps(args.input)}): the steps done are skipped"
    )
    return Change(what, found, lambda: workflow.rerun(args.key, args.input).as_dict())


def _redriving(args: argparse.Namespace, workflow: Checkpoints) -> Change:
    _steps(workflow)  # (the execution's machine a resumable workflow's, the table its own)
    key = workflow.still_owns(args.execution)
    described = workflow.sfn.describe_execution(executionArn=args.execution)
    refused = not_redrivable(described)
    if refused is not None:
        raise CommandError(f"{args.execution} cannot be redriven: {refused}")
    what = f"redrive {args.execution} (key {key!r}) from the state that failed"
    return Change(
        what, {"execution": args.execution, "key": key}, lambda: workflow.redrive(args.execution)
    )


def not_redrivable(described: dict[str, Any], now: datetime.datetime | None = None) -> str | None:
    """Why Step Functions would not redrive the execution (DescribeExecution's answer),
    and what to do instead; None if it would. The advice follows the reason: a rerun of a
    running execution's key finds it running and starts nothing."""
    status = str(described.get("status", ""))
    redrive_status = described.get("redriveStatus")
    reason = str(described.get("redriveStatusReason") or f"it is {status or 'of no status'}")
    reason = reason.rstrip(".")  # (AWS's ends a sentence; the advice follows it)
    if redrive_status is None and status in REDRIVABLE_STATUSES:
        ended = described.get("stopDate")
        now = now or datetime.datetime.now(datetime.UTC)
        if not isinstance(ended, datetime.datetime) or now - ended <= REDRIVE_PERIOD:
            return None
        reason = f"it ended {ended.isoformat()}, over 14 days ago (its redrivable period)"
    elif redrive_status == "REDRIVABLE":
        return None
    if status in ("RUNNING", "PENDING_REDRIVE"):
        advice = (
            "it is still running: wait for it to end, or stop it (StopExecution: then it "
            "can be redriven); a rerun now would find it running and start nothing"
        )
    elif status == "SUCCEEDED":
        advice = "it succeeded: nothing to redrive"
    else:
        advice = "rerun the key instead (the next attempt skips the steps done)"
    return f"{reason}; {advice}"


def _sending(dead_letters: DeadLetters, counts: dict[str, int]) -> Change:
    # Only visible messages are received: one in flight (received by someone else, a
    # listing) or delayed is sent only if it shows while the redrive still receives.
    what = (
        f"send the visible messages of {dead_letters.queue_url} (about "
        f"{counts['ApproximateNumberOfMessages']}) back through {dead_letters.function}, "
        "each deleted once its event is through (not received now: about "
        f"{counts['ApproximateNumberOfMessagesNotVisible']} in flight, "
        f"{counts['ApproximateNumberOfMessagesDelayed']} delayed)"
    )
    preview = {
        "queue": dead_letters.queue_url,
        "function": dead_letters.function,
        "approximateCounts": counts,
        "messages": NO_PEEK,
    }
    return Change(what, preview, dead_letters.redrive)


def _laning(args: argparse.Namespace) -> Change:
    from exactly_once.ops.scheduler_lanes import add_lanes, count_lanes

    client = clients(args.endpoint_url, args.region, args.profile)
    table = _scheduler_table(args, client)
    counts = count_lanes(client, table)
    if not counts["to_lane"]:
        return Change("", {"laned": 0, "ended": counts["ended"], "moved_on": 0})
    what = f"give {counts['to_lane']} pending messages of table {table} their status index lane"
    return Change(what, {"table": table, **counts}, lambda: add_lanes(client, table))


def _settling(args: argparse.Namespace) -> Change:
    from exactly_once.ops.scheduler_lanes import settle, settleable

    status = Status(args.status)
    if args.fired_at and status != Status.DONE:
        raise CommandError("--fired-at is for DONE: a FAILED or UNKNOWN message never fired")
    if args.error and status == Status.DONE:
        raise CommandError("--error is for FAILED or UNKNOWN: a DONE message has none")
    client = clients(args.endpoint_url, args.region, args.profile)
    table = _scheduler_table(args, client)
    message_id = args.id.removeprefix(KEY_PREFIX)
    found = settleable(client, table, message_id)
    told = f", error {args.error!r}" if args.error else ""
    what = (
        f"set message {message_id!r} of table {table} FIRING -> {status}{told}: it leaves "
        "the status index, nothing is sent"
    )

    def apply() -> Any:
        keep_for, publish_at = found["keepForSeconds"], found["publishAt"]
        return settle(
            client, table, message_id, status, args.error, args.fired_at, keep_for, publish_at
        )

    return Change(what, {"table": table, "message": found, "to": str(status)}, apply)


def _change(args: argparse.Namespace) -> Change:
    """The writing command's change, by reads only."""
    if args.command == "scheduler-lanes":
        return _laning(args)
    if args.command == "scheduler-set-status":
        return _settling(args)
    workflow = _workflow(args)
    if args.command in ("mark", "unmark"):
        return _marking(args, workflow)
    if args.command == "clear":
        return _clearing(args, workflow)
    if args.command == "rerun":
        return _rerunning(args, workflow)
    return _redriving(args, workflow)


def _confirm(args: argparse.Namespace, prog: str, what: str) -> None:
    """Asked on a terminal; refused without one unless --yes. As `pulumi up` and `pulumi
    destroy` do ("--yes must be passed in to proceed when running in non-interactive
    mode"): a script that did not say --yes stops before changing anything, rather than
    change what nobody confirmed (a forgotten flag costs a rerun; a wrong target, an
    operator's checkpoint or a redriven event, costs more). Both stdin and stderr must be
    a terminal: the question goes to stderr, the answer comes from stdin, stdout keeps
    the JSON."""
    if args.yes:
        return
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise CommandError(
            f"this would {what}. Not on a terminal, so nothing was asked and nothing "
            "changed: add --yes to go ahead (--dry-run shows it without writing)"
        )
    sys.stderr.write(f"{prog} {args.command} will {what}.\nGo ahead? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise CommandError("not confirmed: nothing changed")


def run(args: argparse.Namespace, prog: str = PROG) -> Any:
    if args.command == "show":
        workflow = _workflow(args)
        _steps(workflow)  # (a resumable workflow's, its own table)
        return workflow.show(args.key) or {"key": args.key, "steps": None}
    if args.command == "audit":
        return _audit(args)
    if args.command == "redrive-dlq":
        if args.list and args.dry_run:
            raise CommandError("--list receives the messages, --dry-run receives nothing: not both")
        dead_letters = _dead_letters(args)
        counts = dead_letters.check()  # (the function's DLQ, nothing received)
        if args.list:  # receives, writes nothing: what the operator asked to see
            return dead_letters.list_letters()
        change = _sending(dead_letters, counts)
    else:
        change = _change(args)
    if change.apply is None:  # (nothing to change: nothing asked)
        return (
            {"dryRun": True, "wouldChange": None, **change.preview}
            if args.dry_run
            else (change.preview)
        )
    if args.dry_run:
        return {"dryRun": True, "wouldChange": change.what, **change.preview}
    _confirm(args, prog, change.what)
    return change.apply()


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    """Exit codes: 0 done, 1 AWS refused or failed (one line with its reason), 2 refused
    here: a bad command (argparse's usage errors too), the wrong target, not confirmed;
    3 the audit found something."""
    from botocore.exceptions import BotoCoreError, ClientError

    args = parser(prog).parse_args(argv)
    try:
        result = run(args, prog)
    except (CommandError, RedriveRefused, NotACheckpoint, MessageRefused, WrongTarget) as exc:
        print(f"{prog} {args.command}: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        error = exc.response.get("Error", {})
        reason = f"{error.get('Code', 'Error')}: {error.get('Message', '')}".rstrip(": ")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        who = f"{args.endpoint_url} (HTTP {status})" if args.endpoint_url else "AWS"
        print(f"{prog} {args.command}: {who} refused it: {reason}", file=sys.stderr)
        return 1
    except BotoCoreError as exc:  # no credentials, no region, no connection
        print(f"{prog} {args.command}: {exc}", file=sys.stderr)
        return 1
    if args.command == "audit":
        print(_table(result) if args.format == "table" else json.dumps(result.as_dict(), indent=2))
        return 0 if result.clean else FOUND
    print(json.dumps(result, indent=2, default=str))
    return 0


def console() -> None:
    """The `exactly-once` command (the wheel's console script): the same as `python -m
    exactly_once.ops`, under its own name in help and errors."""
    sys.exit(main(prog=CONSOLE))


if __name__ == "__main__":
    sys.exit(main())
