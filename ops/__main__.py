"""`python -m ops`: operate a resumable workflow (pattern 4).

    python -m ops show   --key K            a key's checkpoint
    python -m ops mark   --key K --step S   mark a step done by hand (--output JSON)
    python -m ops unmark --key K --step S   make a step run again
    python -m ops clear  --key K            forget the key's checkpoint
    python -m ops rerun  --key K --input J  re-run from the top (next attempt name)
    python -m ops redrive --execution ARN   Step Functions' RedriveExecution instead

The workflow comes from --table and --state-machine, or, in the repository, from a
deployed stack's outputs (--stack, default local). Installed: `python -m exactly_once.ops`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from exactly_once.ops.checkpoints import Checkpoints


def _workflow(args: argparse.Namespace) -> Checkpoints:
    if args.table and args.state_machine:
        return Checkpoints(args.table, args.state_machine, args.endpoint_url)
    try:  # the repository's stacks (deploy/ is not installed)
        from deploy import outputs_path
        from deploy.stack_config import load
    except ImportError:
        raise SystemExit("outside the repository, give --table and --state-machine") from None
    path = outputs_path(args.stack)
    if not path.exists():
        raise SystemExit(f"stack {args.stack!r} is not deployed ({path} is missing)")
    outputs = json.loads(path.read_text())
    if "resumable" not in outputs:
        raise SystemExit(f"stack {args.stack!r} has no resumable workflow")
    config = load(args.stack)
    return Checkpoints(
        outputs["resumable"]["table"],
        outputs["resumable"]["stateMachineArn"],
        args.endpoint_url or config.endpoint or None,
        config.region,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["show", "mark", "unmark", "clear", "rerun", "redrive"])
    parser.add_argument("--key")
    parser.add_argument("--step")
    parser.add_argument("--output", help="JSON: the output to record for a step marked done")
    parser.add_argument("--input", default="{}", help="JSON: the workflow input for rerun")
    parser.add_argument("--execution", help="execution ARN, for redrive")
    parser.add_argument("--stack", default="local")
    parser.add_argument("--table")
    parser.add_argument("--state-machine")
    parser.add_argument("--endpoint-url")
    args = parser.parse_args(argv)
    workflow = _workflow(args)
    needs_key = args.command in ("show", "mark", "unmark", "clear", "rerun")
    if needs_key and not args.key:
        parser.error(f"{args.command} needs --key")
    if args.command in ("mark", "unmark") and not args.step:
        parser.error(f"{args.command} needs --step")
    result: Any
    if args.command == "show":
        result = workflow.show(args.key) or {"key": args.key, "steps": None}
    elif args.command == "mark":
        workflow.mark_done(args.key, args.step, json.loads(args.output) if args.output else None)
        result = workflow.show(args.key)
    elif args.command == "unmark":
        workflow.mark_not_done(args.key, args.step)
        result = workflow.show(args.key)
    elif args.command == "clear":
        workflow.clear(args.key)
        result = {"key": args.key, "cleared": True}
    elif args.command == "rerun":
        result = workflow.rerun(args.key, json.loads(args.input)).as_dict()
    else:
        if not args.execution:
            parser.error("redrive needs --execution")
        result = workflow.redrive(args.execution)
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
