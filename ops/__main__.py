"""`exactly-once` (or `python -m exactly_once.ops`): operate a resumable workflow (pattern
4); redrive any DLQ; give a scheduler's pending messages their lanes.

    python -m exactly_once.ops show    --key K              a key's checkpoint
    python -m exactly_once.ops mark    --key K --step S     mark a step done by hand
    python -m exactly_once.ops unmark  --key K --step S     make a step run again
    python -m exactly_once.ops clear   --key K              forget the key's checkpoint
    python -m exactly_once.ops rerun   --key K --input J    re-run from the top
    python -m exactly_once.ops redrive --execution ARN      Step Functions' RedriveExecution
    python -m exactly_once.ops redrive-dlq --queue URL --function NAME   (any component)
                                           [--dry-run]  send dead letters back, once
    python -m exactly_once.ops scheduler-lanes --table T  pending messages into the
                                           status index's lanes (once, upgrading 0.2 -> 0.3)

The workflow comes from --table and --state-machine (the component's outputs; `redrive`
reads the machine from the execution's ARN), or from a stack's outputs as JSON (--outputs
FILE: `pulumi stack output --json > FILE`): the component's `table` and `stateMachineArn`
at the top, or in the one output holding them, or in --component's.
AWS credentials and region come from the standard chain (AWS_PROFILE, AWS_REGION,
~/.aws/config), or --profile and --region; --endpoint-url keeps them (LocalStack's test
keys only when there are none).
`python -m exactly_once.ops COMMAND --help` shows each command with an example.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from exactly_once.ops.checkpoints import Checkpoints, RedriveRefused
from exactly_once.ops.dead_letters import DeadLetters
from exactly_once.ops.session import clients

PROG = "python -m exactly_once.ops"
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
        "fails again returns to the queue with every reason. --dry-run lists them.",
        "--outputs outputs.json --component nameDedup --dry-run",
    ),
    "scheduler-lanes": (
        "Once, after upgrading a scheduler deployed before 0.3: give every pending message "
        "its lane in the status index (the sweep and the slot clock read lanes). Safe to "
        "run again.",
        "--table my-scheduler-messages-1234567",
    ),
}
DEAD_LETTERS = (
    "--queue https://sqs.REGION.amazonaws.com/ACCOUNT/orders-dlq --function orders-starter"
)


class CommandError(Exception):
    """What the operator asked cannot be done: one line, exit 2."""


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc.msg}") from None


def _version() -> str:
    import exactly_once

    return str(exactly_once.__version__)


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog=PROG,
        # the docstring's first paragraph (none under python -OO)
        description=" ".join((__doc__ or PROG).split("\n\n")[0].split()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"example: {PROG} show --key order-7 {WORKFLOW}",
    )
    root.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (summary, example) in COMMANDS.items():
        if name == "redrive-dlq":
            _dead_letters_parser(commands, name, summary, example)
            continue
        if name == "scheduler-lanes":
            _lanes_parser(commands, name, summary, example)
            continue
        command = commands.add_parser(
            name,
            help=summary,
            description=summary,
            epilog=f"example: {PROG} {name} {example} {WORKFLOW}",
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
        where.add_argument("--region", help="AWS region (default: the standard chain)")
        where.add_argument("--profile", help="AWS profile (default: the standard chain)")
        where.add_argument("--endpoint-url", help="e.g. http://127.0.0.1:4566 (LocalStack)")
    return root


def _outputs(path: str, component: str | None, wanted: set[str]) -> dict[str, Any]:
    """The component's outputs in a stack's outputs file: the file itself when it is one
    component's outputs, else the output named `component`, else the one output holding
    `wanted` (this repository's stacks name the workflow's `resumable`)."""
    try:
        outputs = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CommandError(f"cannot read stack outputs from {path}: {exc}") from None
    if not isinstance(outputs, dict):
        raise CommandError(f"{path} is not a JSON object of stack outputs")
    if component is not None:
        found = outputs.get(component)
        if not isinstance(found, dict) or not wanted <= found.keys():
            raise CommandError(f"{path}: output {component!r} has no {', '.join(sorted(wanted))}")
        return found
    if wanted <= outputs.keys():
        return outputs
    holding = {k: v for k, v in outputs.items() if isinstance(v, dict) and wanted <= v.keys()}
    if len(holding) == 1:
        return next(iter(holding.values()))
    which = f"one of {', '.join(sorted(holding))}" if holding else "the output holding them"
    raise CommandError(f"{path}: give --component ({which}): it needs {', '.join(sorted(wanted))}")


def _dead_letters_parser(commands: Any, name: str, summary: str, example: str) -> None:
    command = commands.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=f"example: {PROG} {name} {DEAD_LETTERS}\nexample: {PROG} {name} {example}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    command.add_argument("--dry-run", action="store_true", help="list, send nothing")
    where = command.add_argument_group("which queue and function, where")
    where.add_argument("--queue", help="the DLQ's URL (a component's `dlqUrl`)")
    where.add_argument(
        "--function",
        help="the function that took the events (the starter's or transform's "
        "`functionName`, the scheduler's `starterFunction`)",
    )
    where.add_argument("--outputs", help="a stack's outputs as JSON (`pulumi stack output --json`)")
    where.add_argument("--component", help="with --outputs: the output holding dlqUrl")
    where.add_argument("--region", help="AWS region (default: the standard chain)")
    where.add_argument("--profile", help="AWS profile (default: the standard chain)")
    where.add_argument("--endpoint-url", help="e.g. http://127.0.0.1:4566 (LocalStack)")


def _lanes_parser(commands: Any, name: str, summary: str, example: str) -> None:
    command = commands.add_parser(
        name, help=summary, description=summary, epilog=f"example: {PROG} {name} {example}"
    )
    where = command.add_argument_group("which scheduler, where")
    where.add_argument("--table", help="the scheduler's messages table (its `table` output)")
    where.add_argument("--outputs", help="a stack's outputs as JSON (`pulumi stack output --json`)")
    where.add_argument("--component", help="with --outputs: the output holding the scheduler's")
    where.add_argument("--region", help="AWS region (default: the standard chain)")
    where.add_argument("--profile", help="AWS profile (default: the standard chain)")
    where.add_argument("--endpoint-url", help="e.g. http://127.0.0.1:4566 (LocalStack)")


def _lanes(args: argparse.Namespace) -> dict[str, int]:
    from exactly_once.ops.scheduler_lanes import add_lanes

    table = args.table
    if not table and args.outputs:
        table = _outputs(args.outputs, args.component, {"table", "stateMachineArn"})["table"]
    if not table:
        raise CommandError("give --table, or --outputs (a stack's outputs) and --component")
    _checked("--table", table, TABLE, "a DynamoDB table name")
    return add_lanes(clients(args.endpoint_url, args.region, args.profile), table)


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
        found = _outputs(args.outputs, args.component, {"dlqUrl"})
        queue = queue or found["dlqUrl"]
        function = function or found.get("functionName") or found.get("starterFunction")
    if not (queue and function):
        raise CommandError(
            "give --queue and --function, or --outputs and --component (an ApiGatewayStarter's "
            "DLQ has no function: its events went to the API; send them with `aws events "
            "put-events` once its cause is fixed, the mapping template dedups them)"
        )
    _checked(
        "--queue",
        queue,
        QUEUE_URL,
        "an SQS queue URL (https://sqs.REGION.amazonaws.com/ACCOUNT/NAME)",
    )
    _checked("--function", function, FUNCTION, "a Lambda function's name or ARN")
    return DeadLetters(queue, function, clients(args.endpoint_url, args.region, args.profile))


def _workflow(args: argparse.Namespace) -> Checkpoints:
    table, machine = args.table, args.state_machine
    if args.command == "redrive" and not machine:  # the execution names its machine
        machine = _machine_of(args.execution)
    if not (table and machine) and args.outputs:
        workflow = _outputs(args.outputs, args.component, {"table", "stateMachineArn"})
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
    try:
        return workflow.steps()
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _known_step(workflow: Checkpoints, step: str) -> str:
    steps = _steps(workflow)
    if step not in steps:
        raise CommandError(f"unknown step {step!r}; the workflow's steps: {', '.join(steps)}")
    return step


def run(args: argparse.Namespace) -> Any:
    if args.command == "redrive-dlq":
        return _dead_letters(args).redrive(dry_run=args.dry_run)
    if args.command == "scheduler-lanes":
        return _lanes(args)
    if args.command == "redrive":
        return _workflow(args).redrive(args.execution)
    workflow = _workflow(args)
    if args.command == "show":
        return workflow.show(args.key) or {"key": args.key, "steps": None}
    if args.command in ("mark", "unmark"):
        step = _known_step(workflow, args.step)
        try:
            if args.command == "mark":
                workflow.mark_done(args.key, step, args.output)
            else:
                workflow.mark_not_done(args.key, step)
        except workflow.ddb.exceptions.ConditionalCheckFailedException:
            raise CommandError(
                f"{args.key!r} is no checkpoint of this workflow's table ({workflow.table}): "
                "nothing written (is --component, or --table, a ResumableWorkflow's?)"
            ) from None
        return workflow.show(args.key)
    if args.command == "clear":
        _steps(workflow)  # (a resumable workflow's, or nothing is deleted)
        cleared = workflow.clear(args.key)
        if cleared == "refused":
            raise CommandError(
                f"{args.key!r} is no checkpoint of this workflow's table ({workflow.table}): "
                "nothing deleted (is --component, or --table, a ResumableWorkflow's?)"
            )
        return {"key": args.key, "cleared": cleared == "cleared"}  # (absent: nothing to do)
    _steps(workflow)  # (a resumable workflow's, or nothing is started)
    return workflow.rerun(args.key, args.input).as_dict()


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 done, 1 AWS refused or failed (one line with its reason), 2 a bad
    command (argparse's usage errors too)."""
    from botocore.exceptions import BotoCoreError, ClientError

    args = parser().parse_args(argv)
    try:
        result = run(args)
    except (CommandError, RedriveRefused) as exc:
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        error = exc.response.get("Error", {})
        reason = f"{error.get('Code', 'Error')}: {error.get('Message', '')}".rstrip(": ")
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        who = f"{args.endpoint_url} (HTTP {status})" if args.endpoint_url else "AWS"
        print(f"{PROG} {args.command}: {who} refused it: {reason}", file=sys.stderr)
        return 1
    except BotoCoreError as exc:  # no credentials, no region, no connection
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, default=str))
    return 0


def console() -> None:
    """The `exactly-once` command (the wheel's console script): the same as `python -m
    exactly_once.ops`."""
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())
