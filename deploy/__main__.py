"""`python -m deploy up|destroy|outputs --stack NAME`: deploy a stack and print its outputs.

With the Pulumi CLI (and its AWS plugin) on PATH this drives `pulumi up` through the
Automation API; without it, it runs the same program through the LocalStack engine
(deploy/localstack_engine.py). Either way the outputs land in
.pulumi-local/<stack>.outputs.json, where the e2e tests read them.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from deploy import outputs_path, pulumi_cli_available
from deploy.stack_config import load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["up", "destroy", "outputs"])
    parser.add_argument("--stack", default="local")
    parser.add_argument(
        "--engine",
        choices=["auto", "pulumi", "localstack"],
        default="auto",
        help="auto: the Pulumi CLI when installed, else the LocalStack engine",
    )
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(message)s"
    )

    config = load(args.stack)
    path = outputs_path(args.stack)
    if args.command == "outputs":
        if not path.exists():
            print(f"stack {args.stack!r} is not deployed ({path} is missing)", file=sys.stderr)
            return 1
        print(path.read_text())
        return 0

    engine = args.engine
    if engine == "auto":
        engine = "pulumi" if pulumi_cli_available() else "localstack"
    backend: Any
    if engine == "pulumi":
        from deploy import automation as backend
    else:
        from deploy import localstack_engine as backend

    if args.command == "up":
        outputs = backend.up(config)
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(outputs, indent=2, sort_keys=True))
        print(json.dumps(outputs, indent=2, sort_keys=True))
    else:
        count = backend.destroy(config.stack, config.endpoint, config.region)
        path.unlink(missing_ok=True)
        print(f"destroyed stack {args.stack!r} ({count} resources)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
