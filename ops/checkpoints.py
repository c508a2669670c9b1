"""Read and change a resumable workflow's checkpoints; start re-runs and redrives.

When to use which re-run:
- `rerun`: start the workflow again from the top under the next attempt name; the
  steps recorded in the checkpoint are skipped. Works at any time, after any change
  (new input, a step marked done by hand, a fixed bug in a step).
- `redrive`: Step Functions' native RedriveExecution restarts a FAILED, TIMED_OUT or
  ABORTED execution from the state that failed, with the same input and definition,
  within 14 days of its end. No checkpoint involved, so no extra state transitions;
  but a step that failed after its side effect is repeated, and it cannot skip
  steps you fixed by hand. Refused (`RedriveRefused`) once the key is no longer the
  execution's: another run took its lease over, or completed it. A redriven run that
  lost its lease would run its failed step again and then fail `LeaseLost` at its Save
  (components/resumable_asl.py); `rerun` is the way then.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from typing import Any

from exactly_once.handlers import executions
from exactly_once.handlers.checkpoints import EMPTY, attribute
from exactly_once.handlers.executions import Outcome, ReusePolicy, start_once
from exactly_once.handlers.names import execution_name
from exactly_once.ops.session import clients


class RedriveRefused(Exception):
    """The execution no longer owns its key: a redrive would repeat work another run did."""


class NotACheckpoint(ValueError):
    """The key's item is another component's (a scheduler's message, a receiver's record):
    nothing of it is read as a checkpoint, nor written."""


# The Load state's key: States.Format('{}', $.path) (components/resumable_asl.py)
_KEY_PATH = re.compile(r"States\.Format\('\{\}', (\$[^)]*)\)")


def _number(value: Mapping[str, Any] | None) -> int | None:
    return int(float(value["N"])) if value else None


STATE_MACHINE_ARN = re.compile(r"^arn:aws[\w-]*:states:([a-z0-9-]+):\d{12}:stateMachine:[\w-]+$")


# What a checkpoint item is, as a condition: never another component's item (a scheduler's
# message or a receiver's record has a `status`; a scheduler's channel record neither a
# run's `first_execution` nor an operator's `expires_at`).
CHECKPOINT = (
    "attribute_exists(pk) AND attribute_not_exists(#s) AND "
    "(attribute_exists(first_execution) OR attribute_exists(expires_at))"
)


def is_checkpoint(item: Mapping[str, Any]) -> bool:
    """CHECKPOINT, of an item read (the reads' and dry runs' check; the writes are
    conditional on CHECKPOINT itself)."""
    return (
        "pk" in item
        and "status" not in item
        and bool({"first_execution", "expires_at"} & item.keys())
    )


class Checkpoints:
    """One workflow's checkpoints. AWS credentials come from the standard chain (or
    `profile`: ops/session.py); the region is `region`, else the state machine ARN's (the
    table lives beside it)."""

    def __init__(
        self,
        table: str,
        state_machine_arn: str,
        endpoint_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
    ) -> None:
        found = STATE_MACHINE_ARN.match(state_machine_arn)
        if found is None:
            raise ValueError(
                f"{state_machine_arn!r} is not a state machine ARN "
                "(arn:aws:states:REGION:ACCOUNT:stateMachine:NAME)"
            )
        self.table = table
        self.state_machine_arn = state_machine_arn
        client = clients(endpoint_url, region or found.group(1), profile)
        self.ddb = client("dynamodb")
        self.sfn = client("stepfunctions")

    def steps(self) -> list[str]:
        """The workflow's steps, in order, read from its definition (the Resume state's
        choices: components/resumable_asl.py); refused (ValueError) when the machine is no
        ResumableWorkflow's, or its checkpoints are not in this table (its Save states
        write them: a table named by mistake is never read as the workflow's)."""
        described = self.sfn.describe_state_machine(stateMachineArn=self.state_machine_arn)
        states = json.loads(described["definition"])["States"]
        resume = states.get("Resume")
        if resume is None:
            raise ValueError(
                f"{self.state_machine_arn} is not a ResumableWorkflow's state machine (it has "
                "no Resume state): these commands change a resumable workflow's checkpoints"
            )
        written = {
            state["Parameters"]["TableName"]
            for state in states.values()
            if isinstance(state.get("Parameters"), dict) and "TableName" in state["Parameters"]
        }
        given = self.table.rsplit(":table/", 1)[-1]  # (a table's ARN names it too)
        if written and given not in written:
            raise ValueError(
                f"table {self.table!r} is not this workflow's checkpoint table: "
                f"{self.state_machine_arn} keeps its checkpoints in {', '.join(sorted(written))}"
            )
        return [choice["Next"] for choice in resume["Choices"]]

    def show(self, key: str) -> dict[str, Any] | None:
        """Each step's entry ({} = not done), or None when the key has no checkpoint;
        NotACheckpoint when its item is another kind's."""
        item = self.ddb.get_item(
            TableName=self.table, Key={"pk": {"S": key}}, ConsistentRead=True
        ).get("Item")
        if item is None:
            return None
        if not is_checkpoint(item):
            raise NotACheckpoint(
                f"{key!r} is no checkpoint of this workflow's table ({self.table}): "
                f"its item has {', '.join(sorted(item))} (is --component, or --table, "
                "a ResumableWorkflow's?)"
            )
        steps = {
            name.removeprefix("out_"): json.loads(value["S"])
            for name, value in item.items()
            if name.startswith("out_")
        }
        return {
            "key": key,
            "steps": steps,
            "first_execution": item.get("first_execution", {}).get("S"),
            # The running execution that holds the key, if any; when it completed; when
            # DynamoDB's TTL may drop the item (epoch seconds).
            "lease": item.get("lease", {}).get("S"),
            "completed_at": _number(item.get("completed_at")),
            "expires_at": _number(item.get("expires_at")),
        }

    def mark_done(self, key: str, step: str, output: Any = None, ttl_days: int = 30) -> None:
        """Record `step` as done (by an operator) so the next run skips it (on a checkpoint,
        or a key with none yet; never on another kind of item: ConditionalCheckFailed)."""
        entry = json.dumps({"done": True, "output": output, "by": "operator"})
        self.ddb.update_item(
            TableName=self.table,
            Key={"pk": {"S": key}},
            UpdateExpression=f"SET {attribute(step)} = :entry, expires_at = :ttl",
            ConditionExpression=f"attribute_not_exists(pk) OR ({CHECKPOINT})",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={
                ":entry": {"S": entry},
                ":ttl": {"N": str(int(time.time()) + ttl_days * 86400)},
            },
        )

    def mark_not_done(self, key: str, step: str) -> None:
        self.ddb.update_item(
            TableName=self.table,
            Key={"pk": {"S": key}},
            UpdateExpression=f"SET {attribute(step)} = :empty",
            ConditionExpression=f"attribute_not_exists(pk) OR ({CHECKPOINT})",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":empty": {"S": EMPTY}},
        )

    def clear(self, key: str) -> str:
        """Forget every step of `key`: the next run starts from scratch. Only a checkpoint
        is deleted (CHECKPOINT: no `status`, which a scheduler's message and a receiver's
        record carry; a run's `first_execution` or an operator's `expires_at`, which a
        scheduler's channel record lacks): "cleared", "absent" (nothing to forget), or
        "refused" (another kind of item: a table given by mistake keeps what it holds)."""
        try:
            self.ddb.delete_item(
                TableName=self.table,
                Key={"pk": {"S": key}},
                ConditionExpression=CHECKPOINT,
                ExpressionAttributeNames={"#s": "status"},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.ddb.exceptions.ConditionalCheckFailedException as exc:
            return "refused" if exc.response.get("Item") else "absent"
        return "cleared"

    def rerun(self, key: str, document: dict[str, Any]) -> Outcome:
        """Start from the top under a new, deterministic attempt name (key, key-r1, ...)."""
        return start_once(
            self.state_machine_arn,
            key,
            document,
            str(uuid.uuid4()),
            ReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
            sfn=self.sfn,
        )

    def next_attempt(self, key: str) -> tuple[int, str | None]:
        """What `rerun` would do, read only (DescribeExecution, as start_once decides): (the
        attempt it would start, None), or (the attempt it would find, that execution's
        status) when that one runs or succeeded: then nothing starts."""
        attempt = 0
        while True:
            arn = executions.execution_arn(self.state_machine_arn, execution_name(key, attempt))
            try:
                found = self.sfn.describe_execution(executionArn=arn)
            except self.sfn.exceptions.ExecutionDoesNotExist:
                return attempt, None
            if found["status"] not in executions.RETRYABLE_STATUSES:
                return attempt, str(found["status"])
            attempt += 1

    def key_of(self, execution_arn: str) -> str:
        """The business key an execution runs: its input at the workflow's key path."""
        described = self.sfn.describe_execution(executionArn=execution_arn)
        if described.get("stateMachineArn", self.state_machine_arn) != self.state_machine_arn:
            raise RedriveRefused(
                f"{execution_arn} is an execution of {described['stateMachineArn']}, not of "
                f"{self.state_machine_arn}"
            )
        definition = self.sfn.describe_state_machine(stateMachineArn=self.state_machine_arn)
        payload = json.loads(definition["definition"])["States"]["Load"]["Parameters"]["Payload"]
        found = _KEY_PATH.fullmatch(payload["key.$"])
        if found is None:
            raise RedriveRefused(f"{self.state_machine_arn} is not a resumable workflow")
        value: Any = json.loads(described.get("input") or "{}")
        for field in found.group(1).removeprefix("$.").split("."):
            if not isinstance(value, dict) or field not in value:
                raise RedriveRefused(f"the execution's input has no {found.group(1)}")
            value = value[field]
        return str(value)

    def redrive(self, execution_arn: str) -> dict[str, Any]:
        """RedriveExecution, only while the key's checkpoint is still this execution's."""
        self.still_owns(execution_arn)
        return dict(self.sfn.redrive_execution(executionArn=execution_arn))

    def still_owns(self, execution_arn: str) -> str:
        """The key the execution runs, read only, if its checkpoint is still the
        execution's (its lease, not completed); RedriveRefused saying why not."""
        key = self.key_of(execution_arn)
        found = self.show(key)
        if found is None:
            raise RedriveRefused(f"key {key!r} has no checkpoint (cleared or expired): rerun it")
        if found["completed_at"] is not None:
            raise RedriveRefused(f"key {key!r} was completed since (by another run): nothing to do")
        if found["lease"] != execution_arn:
            raise RedriveRefused(
                f"key {key!r} was taken over by {found['lease']}: a redrive would repeat its "
                "work; rerun the key instead"
            )
        return key
