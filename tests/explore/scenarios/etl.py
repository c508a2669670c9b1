"""Pattern 5, the idempotent S3 ETL: exactly one output per input version, whole and
right; the output written once by the runs that succeeded (a run that failed after its
write may have written it too), the transform run once by them where a lock promises it;
a redelivery after completion transforms and writes nothing and answers DUPLICATE; never
a good input rejected.

With a lock (control-record), the newer version's first delivery then gives its lock back
while a duplicate of it may take it (`Etl.handback`): its transform fails once (a
transient error of its own: retried), a duplicate notification of it arrives then, and its
invocation starts once that delivery waits; transforms of it take their time. A release
that is sent again (its answer lost: the SDK resends it) lands after the duplicate took
the freed lock: only its owner condition keeps it from dropping the duplicate's lock,
which would let the retry transform beside it."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
from collections.abc import Iterator
from typing import IO, Any

from exactly_once.handlers import etl, runtime
from exactly_once.handlers.s3_events import ObjectRef
from tests.explore.scenarios.base import (
    ARN,
    Delivery,
    Scenario,
    Verdict,
    World,
    clocked,
    unexcused_failures,
)
from tooling import events

CSV = b"id,name,amount\n1,alpha,2.5\n2,beta,3\n"
WRITES = ("PutObject", "CompleteMultipartUpload")
TRANSFORM_SECONDS = 2.0  # a transform of the newer version, with `handback`, takes this long


class TransformFailed(Exception):
    """The transform's own transient failure (handlers/etl.py: anything but BadInput it
    raises is retried)."""


class Etl(Scenario):
    def __init__(self, strategy: str) -> None:
        self.strategy = strategy
        self.name = f"5 ETL ({strategy})"
        # the newer version's lock given back beside a duplicate (module docstring)
        self.handback = strategy == etl.Strategy.CONTROL_RECORD

    def clients(self) -> list[Any]:
        return [runtime.client(s) for s in ("s3", "dynamodb", "sqs")]

    def setup(self) -> None:
        etl._POWERTOOLS.clear()  # Powertools' persistence layer on this world's client
        s3 = runtime.client("s3")
        for bucket in ("explore-in", "explore-out"):
            s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket="explore-in", VersioningConfiguration={"Status": "Enabled"})
        runtime.client("dynamodb").create_table(
            TableName="explore-control",
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        queue = runtime.client("sqs").create_queue(QueueName="etl-dlq")["QueueUrl"]
        self.config = etl.EtlSettings(
            output_bucket="explore-out",
            strategy=self.strategy,  # type: ignore[arg-type]
            output_suffix=".jsonl",
            control_table="explore-control",
            dlq_url=queue,
        )
        from etl_transforms import csv_jsonl

        self.transform = csv_jsonl.transform
        self.expected = b"".join(csv_jsonl.transform(io.BytesIO(CSV), None))  # type: ignore[arg-type]

    @contextlib.contextmanager
    def patched(self, world: World) -> Iterator[None]:
        with clocked(world.clock, etl), powertools_clocked(world.clock):
            yield

    def run(self, world: World) -> Verdict:
        s3 = runtime.client("s3")
        key = f"in/{world.tag}.csv"
        put = world.quietly(lambda: s3.put_object(Bucket="explore-in", Key=key, Body=CSV))
        event = events.notification("explore-in", key, put["VersionId"], put["ETag"])
        transformed: collections.Counter[str] = collections.Counter()  # by process
        newer_transformed: collections.Counter[str] = collections.Counter()
        failed: list[str] = []  # the newer version's attempt whose transform failed
        duplicates: list[Delivery] = []  # the newer version's duplicate notification

        def transform(source: IO[bytes], obj: ObjectRef) -> Iterator[bytes]:
            process = world.injector.processes.me()
            name = process.name if process else ""
            if obj.version_id == put["VersionId"]:
                transformed[name] += 1
            elif self.handback:  # the newer version's
                world.clock.sleep(TRANSFORM_SECONDS)
                if not failed:
                    failed.append(name)
                    world.injector.processes.spawn("duplicate", duplicate)
                    raise TransformFailed("the newer version's first transform failed")
                newer_transformed[name] += 1
            yield from self.transform(source, obj)

        def duplicate() -> None:
            """The newer version's notification again (S3 "event notifications are
            designed to be delivered at least once", User Guide, "Amazon S3 Event
            Notifications"): another asynchronous invocation of it, a request id of its
            own, starting once the delivery it duplicates waits (its SDK's back-off
            between two sends, its source's retry delay). In every other schedule it has
            the same request id: two invocations may carry one (Lambda's retries of an
            event do; of a duplicate event, AWS does not say), and the lock's owner must
            tell them apart."""
            world.injector.processes.switch()
            request_id = "r-newer" if world.rng.random() < 0.5 else "r-duplicate"
            duplicates.append(self.deliver(world, "duplicate", function, event2, request_id))

        def handler(event: Any, context: Any) -> Any:
            [result] = etl.transform_once(event, transform, self.config, context)["results"]
            return result

        function = world.lambdas.register(ARN.format("lambda", "function:etl"), handler)
        deliveries = self.deliveries(world, function, event)
        # then a new version of the object: new work, never its predecessor's duplicate
        put2 = world.quietly(
            lambda: s3.put_object(Bucket="explore-in", Key=key, Body=CSV + b"3,gamma,4\n")
        )
        event2 = events.notification("explore-in", key, put2["VersionId"], put2["ETag"])
        newer = self.deliver(world, "newer", function, event2, "r-newer")

        def verdict() -> list[str]:
            ref2 = ObjectRef("explore-in", key, put2["VersionId"], put2["ETag"])
            second = etl.output_key(self.config, ref2)
            outputs = world.quietly(
                lambda: s3.list_objects_v2(Bucket="explore-out", Prefix=key).get("Contents", [])
            )
            listed = [o["Key"] for o in outputs if o["Key"] != second]
            bodies = [
                world.quietly(lambda k=k: s3.get_object(Bucket="explore-out", Key=k))["Body"].read()
                for k in listed
            ]
            ended = world.lambdas.ended
            writes = [
                call
                for call in world.injector.calls
                if call.operation in WRITES
                and call.params.get("Bucket") == "explore-out"
                and call.params.get("Key") != second
                and call.took_effect
            ]
            ok_writes = [c for c in writes if ended.get(c.process) == "ok"]
            ok_transforms = sum(
                n for process, n in transformed.items() if ended.get(process) == "ok"
            )
            violations = []
            delivered = any(d.ok for d in deliveries)
            if newer.ok and second not in [o["Key"] for o in outputs]:
                violations.append(f"a new version of the object got no output: {newer.answer}")
            if len(listed) > 1:
                violations.append(f"{len(listed)} outputs for one version")
            if not listed and delivered:
                violations.append("lost: no output although a delivery succeeded")
            if any(body != self.expected for body in bodies):
                violations.append("an output is not the transform's whole output")
            for delivery in deliveries:
                if delivery.ok and delivery.answer.get("status") == "REJECTED":
                    violations.append(f"a good input was rejected: {delivery.answer['reason']}")
            concurrent = self._overlapping(world, writes)
            if len(ok_writes) > 1 + concurrent:
                violations.append(
                    f"the output was written {len(ok_writes)} times by runs that succeeded"
                )
            if etl.STRATEGY_OF[self.config.strategy].locking and ok_transforms > 1:
                violations.append(f"the transform ran {ok_transforms} times in runs that succeeded")
            newer_ok = sum(n for p, n in newer_transformed.items() if ended.get(p) == "ok")
            if newer_ok > 1:
                violations.append(
                    f"the newer version's transform ran {newer_ok} times in runs that succeeded"
                )
            again = next(d for d in deliveries if d.who == "again")
            earlier_ok = any(d.ok for d in deliveries if d.who != "again")
            if earlier_ok:
                redone = sum(transformed[a] for a in again.attempts)
                rewritten = [c for c in writes if c.process in again.attempts]
                if redone or rewritten:
                    violations.append(
                        f"a redelivery after completion transformed {redone} times and wrote "
                        f"{len(rewritten)} times"
                    )
                if again.ok and again.answer.get("status") != "DUPLICATE":
                    violations.append(f"a redelivery after completion answered {again.answer}")
            violations += self.waited_for_itself(world)
            # a lock held (ours, or Powertools'), or S3's conflict: retried later
            waits = ("InProgress", "IdempotencyAlreadyInProgressError")
            # (the newer version's first transform fails by design)
            attempts = [a for a in newer.attempts if a not in failed]
            newer_checked = dataclasses.replace(newer, attempts=attempts)
            checked = [*deliveries, newer_checked, *duplicates]
            return violations + unexcused_failures(world, checked, waits)

        return verdict

    @staticmethod
    def waited_for_itself(world: World) -> list[str]:
        """No attempt fails InProgress on its own lock (a put its SDK resent after a lost
        answer finds the lock its first send took: it is the attempt's)."""
        found = []
        for name, failure in world.lambdas.failures.items():
            if failure.error_type != "InProgress":
                continue
            owners = {
                str(c.params.get("Item", {}).get("owner", {}).get("S"))
                for c in world.injector.calls
                if c.process == name and c.operation == "PutItem"
            }
            if any(f"by {owner};" in failure.message for owner in owners):
                found.append(f"the attempt {name} failed InProgress on its own lock")
        return found

    def _overlapping(self, world: World, writes: list[Any]) -> int:
        """Writes the deterministic strategy makes on purpose: a concurrent duplicate's (its
        run overlapped another run that wrote)."""
        if self.config.strategy != etl.Strategy.DETERMINISTIC:
            return 0
        spans = world.lambdas.spans
        writers = {call.process for call in writes}

        def overlaps(one: str, other: str) -> bool:
            a, b = spans.get(one, (0, 0)), spans.get(other, (0, 0))
            return a[0] < b[1] and b[0] < a[1]

        return sum(1 for w in writers if any(overlaps(w, o) for o in writers if o != w))


def powertools_clocked(clock: Any) -> Any:
    """Powertools' idempotency records (its expiry, its in-progress lock) by `clock`."""
    import contextlib
    import datetime as real

    from aws_lambda_powertools.utilities.idempotency.persistence import base, dynamodb

    @contextlib.contextmanager
    def patched() -> Iterator[None]:
        class Now(real.datetime):
            @classmethod
            def now(cls, tz: Any = None) -> Any:
                return real.datetime.fromtimestamp(clock.time(), tz)

        fake = type(
            "dt", (), {"datetime": Now, "timedelta": real.timedelta, "timezone": real.timezone}
        )
        saved = base.dt, dynamodb.dt
        base.dt = dynamodb.dt = fake  # type: ignore[assignment]
        try:
            yield
        finally:
            base.dt, dynamodb.dt = saved

    return patched()
