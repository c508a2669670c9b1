"""The audit: did every input take effect exactly once? Per component, what came in is read
against what took effect, read-only, and each disagreement is a finding:

- `lost`: an input past its grace with no effect and nothing at work on it (an ETL input
  version with neither output nor FAILED record; a resumable key completed with a step
  not recorded, or held past the workflow's timeout; a scheduler message DONE that its
  receiver never recorded);
- `doubled`: one input with more than one effect (an ETL version with two outputs);
- `pending`: an input past its grace whose effect is not there yet while something still
  holds it (an ETL version under a live lock; a scheduler message past its time that has
  not ended).

    from exactly_once.handlers.audit import audit
    report = audit(outputs, client, grace_seconds=900)  # outputs: the component's exports()
    report.findings, report.counts

The component's scheduled audit (`AuditOptions`) runs this every period and writes the
counts as the `Lost`, `Doubled` and `Pending` metrics, each alarmed; `exactly-once audit`
runs it from a terminal (docs/operations.md). What it reads and what it costs:
docs/cost.md. Memory stays bounded whatever the inputs' number: the listings go through a
temporary SQLite file, and at most `MAX_LISTED` findings are kept (every one counted).
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal

from exactly_once.handlers import metrics
from exactly_once.handlers.runtime import client, lambda_handler, log, remaining_seconds
from exactly_once.handlers.settings import Settings

Kind = Literal["lost", "doubled", "pending"]
KINDS: tuple[Kind, ...] = ("lost", "doubled", "pending")
MAX_LISTED = 1000  # findings kept with their reasons; every one is counted
BATCH = 100  # keys per BatchGetItem (its most)
Clients = Callable[[str], Any]


@dataclasses.dataclass(frozen=True)
class Finding:
    kind: Kind
    item: str  # what it is about: an object version, a message id, a business key
    reason: str


@dataclasses.dataclass
class Report:
    """One component's audit: what was read, what was found, what could not be read."""

    component: str  # its kind
    since: float | None  # epoch seconds: inputs from then (None: all)
    until: float  # inputs older than this (now minus the grace) are judged
    deadline: float | None = None  # (epoch seconds) a long read stops here, and says so
    audited: int = 0  # inputs judged
    counts: dict[str, int] = dataclasses.field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    findings: list[Finding] = dataclasses.field(default_factory=list)
    accounted: dict[str, int] = dataclasses.field(default_factory=dict)  # no finding: why
    limits: list[str] = dataclasses.field(default_factory=list)  # what it cannot tell

    def add(self, kind: Kind, item: str, reason: str) -> None:
        self.counts[kind] += 1
        if len(self.findings) < MAX_LISTED:
            self.findings.append(Finding(kind, item, reason))

    def judged(self, when: float) -> bool:
        """Whether an input of `when` (its upload, its due time) is judged: inside the
        window, and past its grace (one in its grace is accounted for, not judged)."""
        if self.since is not None and when < self.since:
            return False
        if when >= self.until:
            self.account("in its grace")
            return False
        self.audited += 1
        return True

    def account(self, why: str) -> None:
        self.accounted[why] = self.accounted.get(why, 0) + 1

    @property
    def clean(self) -> bool:
        return not any(self.counts.values())

    def as_dict(self) -> dict[str, Any]:
        return {
            "component": self.component,
            "since": _iso(self.since),
            "judgedBefore": _iso(self.until),
            "audited": self.audited,
            "counts": self.counts,
            "findings": [dataclasses.asdict(f) for f in self.findings],
            "listed": len(self.findings),
            "accounted": self.accounted,
            "limits": self.limits,
        }


def _iso(epoch: float | None) -> str | None:
    from exactly_once.handlers import timestamps

    return None if epoch is None else timestamps.iso_ms(epoch)


# What each audit reads of its component's outputs (the component passes its scheduled
# audit these, and `exactly-once audit` reads them from the stack's outputs).
READS: dict[str, tuple[str, ...]] = {
    "IdempotentEtl": (
        "inputBucket",
        "inputPrefix",
        "inputSuffix",
        "outputBucket",
        "outputPrefix",
        "outputSuffix",
        "controlTable",
        "recordTtlSeconds",  # how long a FAILED record is kept: older, nothing tells
    ),
    # receipts: channel -> the table its target's receiver records messages in, kept
    # receiptDays; redeliver: the channels sent again by design after a lost answer
    "Scheduler": ("table", "receipts", "receiptDays", "redeliver"),
    "ResumableWorkflow": ("table", "timeoutSeconds"),
    # bucket: the one it starts for (None: its own event pattern, which no listing covers)
    "NameDedupStarter": ("bucket", "stateMachineArn", "keyStrategy", "hideKey", "backend"),
}


class NotAudited(ValueError):
    """The outputs name no component this audit knows, or lack what it reads."""


def audit(
    outputs: Mapping[str, Any],
    client: Clients,
    grace_seconds: float,
    since: float | None = None,
    now: float | None = None,
    deadline: float | None = None,
) -> Report:
    """The component's audit (`outputs`: its exports(), `kind` first): inputs from `since`
    to `grace_seconds` ago judged; a scan that reaches `deadline` stops there, saying so
    in the report's limits."""
    now = time.time() if now is None else now
    kind = str(outputs.get("kind", ""))
    auditors = {
        "IdempotentEtl": _etl,
        "Scheduler": _scheduler,
        "ResumableWorkflow": _resumable,
        "NameDedupStarter": _starter,
    }
    if kind not in auditors:
        raise NotAudited(
            f"no audit for {kind or 'outputs without a kind'}: the audit reads "
            f"{', '.join(sorted(auditors))} components"
        )
    missing = [name for name in READS[kind] if name not in outputs]
    if missing:
        raise NotAudited(f"the {kind} outputs lack {', '.join(missing)}")
    report = Report(kind, since, now - grace_seconds, deadline)
    auditors[kind](outputs, client, report, now)
    return report


# -- pattern 5: one output per input object version ----------------------------------------
def _etl(outputs: Mapping[str, Any], client: Clients, report: Report, now: float) -> None:
    """Every input version under the input prefix (and suffix) against its output key
    (`<outputPrefix><key>.<version or ETag><outputSuffix>`, handlers/etl.py): none past
    the grace is lost, unless a FAILED record (rejected, with its reason) or a live lock
    (pending) accounts for it; two or more outputs of one version (another suffix: the
    settings changed) are doubled."""
    inputs, in_prefix, in_suffix, out_bucket, out_prefix, out_suffix, table, kept = (
        outputs[name] for name in READS["IdempotentEtl"]
    )
    table = table or ""
    # A version older than its FAILED record would be kept has lost that record (TTL):
    # without output, nothing tells a rejected one from a lost one.
    remembered = report.until - float(kept)
    # In the input bucket itself, outputs are what the ETL writes: under the output prefix,
    # with the output suffix (neither given: nothing tells them apart from inputs).
    shared = inputs == out_bucket and bool(out_prefix or out_suffix)
    skipped = forgotten = 0
    s3 = client("s3")
    unpublished: list[tuple[str, str]] = []  # (item, expected output): judged 50 at a time
    with _keys(s3, out_bucket, out_prefix) as published:
        for key, revisions in _versions(s3, inputs, in_prefix):
            if not key.endswith(in_suffix):
                continue
            if shared and key.startswith(out_prefix) and key.endswith(out_suffix):
                skipped += 1
                continue
            stem = f"{out_prefix}{key}."
            for revision, modified in revisions:
                if not report.judged(modified):
                    continue
                found = _outputs_of(published, stem, revision, out_suffix, revisions)
                item = f"s3://{inputs}/{key}#{revision}"
                if len(found) > 1:
                    report.add("doubled", item, f"{len(found)} outputs: {', '.join(found)}")
                elif found:
                    report.account("one output")
                elif modified < remembered:
                    forgotten += 1
                    report.account("no output, older than its FAILED record would be kept")
                else:
                    unpublished.append((item, stem + revision + out_suffix))
                    if len(unpublished) == BATCH // 2:
                        _unpublished(client, table, report, unpublished)
                        unpublished.clear()
    _unpublished(client, table, report, unpublished)
    if skipped:
        report.limits.append(
            f"{skipped} keys of the input bucket under the output prefix and suffix taken "
            "for outputs, not judged as inputs"
        )
    if forgotten:
        report.limits.append(
            f"{forgotten} versions without output are older than a FAILED record is kept "
            "(record_ttl_days): rejected or lost, nothing tells; judge them by --since"
        )
    if not table:
        report.limits.append(
            "no control table: an input rejected as malformed is only in the DLQ (its "
            "message names the object), so it counts lost here"
        )


def _outputs_of(
    published: _Published, stem: str, revision: str, suffix: str, revisions: list[Any]
) -> list[str]:
    """The outputs of one version: its own key, and its stem's under another suffix (the
    settings changed), less another version's whose id starts with this one's. (An input
    key `<key>.<this id>...` would share the stem: ids are opaque, so rare.)"""
    expected = stem + revision + suffix
    found = published.starting(stem + revision)
    if all(k == expected for k in found):  # (the common case: no other version looked at)
        return found
    longer = [stem + r for r, _ in revisions if r != revision and r.startswith(revision)]
    return [k for k in found if k == expected or not any(map(k.startswith, longer))]


def _unpublished(
    client: Clients, table: str, report: Report, versions: list[tuple[str, str]]
) -> None:
    """Versions past their grace with no output (item, expected output): each accounted for
    by a FAILED record, pending under a live lock, else lost. Their control records are
    read (two keys each, BatchGetItem) only for these: the few, not every input."""
    from exactly_once.handlers.etl import COMPLETE, IN_PROGRESS

    identities = [item.removeprefix("s3://") for item, _ in versions]
    records: dict[str, dict[str, Any]] = {}
    if table and identities:
        keys = [{"id": {"S": f"{p}{i}"}} for i in identities for p in ("", "failed#")]
        records = _get_all(client("dynamodb"), table, keys, "id")
    for (item, expected), identity in zip(versions, identities, strict=True):
        record = records.get(identity, {})
        status = record.get("status", {}).get("S")
        lock = float(record.get("lock_expires", {}).get("N", 0))
        if f"failed#{identity}" in records:
            report.account("rejected (a FAILED record says why)")
        elif status == IN_PROGRESS and lock > time.time():
            report.add("pending", item, "no output yet: a run holds its lock")
        elif status == COMPLETE:
            report.add("lost", item, f"its control record is COMPLETE, and {expected} is gone")
        else:
            report.add("lost", item, f"no output {expected}, no FAILED record")


def _versions(s3: Any, bucket: str, prefix: str) -> Iterator[tuple[str, list[tuple[str, float]]]]:
    """Each key under `prefix` with its versions' revisions (the version id; the ETag in
    an unversioned bucket, or for a version written before versioning, whose events carry
    none) and their times, a key at a time, in key order (ListObjectVersions lists a key's
    versions together)."""
    versioned = s3.get_bucket_versioning(Bucket=bucket).get("Status") in ("Enabled", "Suspended")
    if not versioned:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                yield obj["Key"], [(obj["ETag"].strip('"'), obj["LastModified"].timestamp())]
        return
    current: str | None = None
    revisions: list[tuple[str, float]] = []
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for version in page.get("Versions", []):  # (delete markers are no input)
            if version["Key"] != current:
                if current is not None:
                    yield current, revisions
                current, revisions = version["Key"], []
            version_id = version.get("VersionId") or "null"
            revision = version_id if version_id != "null" else version["ETag"].strip('"')
            revisions.append((revision, version["LastModified"].timestamp()))
    if current is not None:
        yield current, revisions


class _Published:
    """The output keys, in a temporary SQLite file: looked up by key or by stem, in memory
    bounded whatever their number."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def has(self, key: str) -> bool:
        return self.db.execute("SELECT 1 FROM k WHERE key = ?", (key,)).fetchone() is not None

    def starting(self, stem: str) -> list[str]:
        rows = self.db.execute(
            "SELECT key FROM k WHERE key >= ? AND key < ? LIMIT 100", (stem, stem + "\U0010ffff")
        )
        return [row[0] for row in rows]


@contextlib.contextmanager
def _keys(s3: Any, bucket: str, prefix: str) -> Iterator[_Published]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    with _listed(obj["Key"] for page in pages for obj in page.get("Contents", [])) as found:
        yield found


@contextlib.contextmanager
def _listed(names: Iterable[str]) -> Iterator[_Published]:
    """`names` in a temporary SQLite file, looked up in memory bounded whatever their
    number."""
    with tempfile.NamedTemporaryFile(suffix=".sqlite") as file:
        db = sqlite3.connect(file.name)
        try:
            db.execute("CREATE TABLE k (key TEXT PRIMARY KEY) WITHOUT ROWID")
            batch: list[tuple[str]] = []
            for name in names:
                batch.append((name,))
                if len(batch) == 1000:
                    db.executemany("INSERT OR IGNORE INTO k VALUES (?)", batch)
                    batch.clear()
            db.executemany("INSERT OR IGNORE INTO k VALUES (?)", batch)
            db.commit()
            yield _Published(db)
        finally:
            db.close()


# -- pattern 3: every message past its time has ended ----------------------------------------
def _scheduler(outputs: Mapping[str, Any], client: Clients, report: Report, now: float) -> None:
    """Every message past its time plus the grace has ended (DONE, FAILED, UNKNOWN,
    CANCELLED): one still RESERVED, STANDBY or FIRING is pending (the status index, one
    Query per lane). Of a channel whose target records receipts (`receipts`: channel ->
    its receiver's table), every DONE message of the window has its receipt: one without
    is lost (the target was sent it and never recorded it); one its receiver dropped a
    redelivery of is doubled, unless its channel is resent by design (`redeliver`)."""
    from exactly_once.handlers.scheduler_index import Status, due, lanes

    table, receipts = outputs["table"], dict(outputs["receipts"] or {})
    ddb = client("dynamodb")
    # (each lane once: a FIRING message is listed in its STANDBY lane, scheduler_index)
    listed = (lanes(status) for status in (Status.RESERVED, Status.STANDBY, Status.FIRING))
    for status_lane in dict.fromkeys(lane for each in listed for lane in each):
        status = status_lane.split("#")[0]
        status = "STANDBY or FIRING" if status == Status.STANDBY else status
        for message_id, publish_at in due(ddb, table, status_lane, report.until, report.since):
            report.audited += 1
            late = int(now - publish_at)
            report.add("pending", message_id, f"{status} {late} s past its time")
    if not receipts:
        report.limits.append(
            "no channel keeps receipts: a DONE message is its target's answer, not a "
            "receipt (AuditOptions.receipts, receipt_channels)"
        )
        return
    # Receipts expire (the receiver's ttl_days): an older message's is gone, not missing.
    kept = now - float(outputs["receiptDays"]) * 86400
    if report.since is None or report.since < kept:
        report.limits.append(
            f"DONE messages published before {_iso(kept)} not checked against receipts: "
            f"the receivers keep them {outputs['receiptDays']} days"
        )
    # So do the messages (retention_days past their end; outputs of 0.4 name none)
    retention = float(outputs.get("retentionDays") or 0)
    if retention and (report.since is None or report.since < now - retention * 86400):
        report.limits.append(
            f"messages ended before {_iso(now - retention * 86400)} may be gone (the table "
            f"keeps them {retention:g} days): those are not checked"
        )
    resent = set(outputs["redeliver"] or ())
    _received(ddb, table, receipts, resent, report, max(report.since or kept, kept))


def _received(
    ddb: Any,
    table: str,
    receipts: dict[str, str],
    resent: set[str],
    report: Report,
    since: float,
) -> None:
    """Each DONE message published from `since` (its receipt still kept) to the grace,
    against its receiver's record of it (a channel without receipts: its target's answer
    is all there is). A scan of the messages
    table: ended messages leave the status index, and the table keeps them for its
    retention (`retentionDays`), so each run reads all it keeps (docs/cost.md)."""
    from exactly_once.handlers.scheduler_index import KEY_PREFIX, Status

    values: dict[str, Any] = {
        ":done": {"S": str(Status.DONE)},
        ":until": {"N": f"{report.until}"},
        ":since": {"N": f"{since}"},
    }
    pages = ddb.get_paginator("scan").paginate(
        TableName=table,
        FilterExpression="#s = :done AND publish_at >= :since AND publish_at < :until",
        ProjectionExpression="pk, #c",
        ExpressionAttributeNames={"#s": "status", "#c": "channel"},
        ExpressionAttributeValues=values,
    )
    for page in pages:
        if report.deadline is not None and time.time() > report.deadline:
            report.limits.append(
                "the scan of the messages table stopped at the run's deadline: the DONE "
                "messages not yet read are not checked (a table this large needs a shorter "
                "window, or its ended messages removed: docs/cost.md)"
            )
            return
        by_table: dict[str, list[tuple[str, bool]]] = {}
        for item in page.get("Items", []):
            channel = item.get("channel", {}).get("S", "")
            if channel not in receipts:
                report.account("DONE (its channel keeps no receipts)")
                continue
            message_id = item["pk"]["S"].removeprefix(KEY_PREFIX)
            by_table.setdefault(receipts[channel], []).append((message_id, channel in resent))
        for receiver, messages in by_table.items():
            for batch in (messages[i : i + BATCH] for i in range(0, len(messages), BATCH)):
                keys = [{"pk": {"S": f"RECEIVED#{i}"}} for i, _ in batch]
                found = _get_all(ddb, receiver, keys, projection=RECEIPT)
                for message_id, by_design in batch:
                    receipt = found.get(f"RECEIVED#{message_id}", {})
                    _judge_receipt(report, message_id, receipt, by_design)


RECEIPT = ("pk", "status", "redelivered")  # what the audit reads of a receipt (not its result)


def _judge_receipt(
    report: Report, message_id: str, receipt: dict[str, Any], by_design: bool
) -> None:
    from exactly_once.handlers.receiver import COMPLETE, REDELIVERED
    from exactly_once.handlers.receiver import IN_PROGRESS as RUNNING

    report.audited += 1
    status = receipt.get("status", {}).get("S")
    again = int(receipt.get(REDELIVERED, {}).get("N", 0))
    if status == COMPLETE and again and by_design:
        report.account("DONE, redelivered after a lost answer (its channel's design), applied once")
    elif status == COMPLETE and again:
        report.add(
            "doubled",
            message_id,
            f"delivered at least {again + 1} times on a channel sent at most once: its "
            f"receiver applied it once (without one, {again + 1} effects)",
        )
    elif status == COMPLETE:
        report.account("DONE and received")
    elif status == RUNNING:  # applied; its COMPLETE write failed (its log says)
        report.account("DONE, received, its receipt not completed")
    else:
        report.add("lost", message_id, "DONE, and its receiver has no record of it")


def _get_all(
    ddb: Any,
    table: str,
    keys: list[dict[str, Any]],
    key: str = "pk",
    projection: tuple[str, ...] = (),
) -> dict[str, dict[str, Any]]:
    """The items of `keys` (at most BATCH) by their `key`, every unprocessed key asked
    again. Eventually consistent (half the read units): what is judged is past its grace,
    its records written minutes before."""
    found: dict[str, dict[str, Any]] = {}
    read: dict[str, Any] = {"Keys": keys}
    if projection:  # (the read units are the whole items' still: less to carry back)
        names = {f"#a{n}": name for n, name in enumerate(projection)}
        read |= {"ProjectionExpression": ", ".join(names), "ExpressionAttributeNames": names}
    request: dict[str, Any] = {table: read}
    for attempt in range(8):
        answer = ddb.batch_get_item(RequestItems=request)
        for item in answer.get("Responses", {}).get(table, []):
            found[item[key]["S"]] = item
        request = answer.get("UnprocessedKeys") or {}
        if not request:
            return found
        time.sleep(min(2.0, 0.05 * 2**attempt))  # (throttled: back off, as the SDK would)
    raise RuntimeError(f"{table}: keys still unprocessed after 8 BatchGetItem calls")


# -- pattern 4: every key completed with every step, none held past the timeout -------------
def _resumable(outputs: Mapping[str, Any], client: Clients, report: Report, now: float) -> None:
    """Each checkpoint: one completed with a step not recorded is lost; one whose lease
    was last written longer ago than the workflow's timeout plus the grace is lost too
    (its run ended without finishing and nobody re-ran the key: a rerun finishes it)."""
    from exactly_once.handlers import timestamps
    from exactly_once.handlers.checkpoints import EMPTY, SAVED_AT

    table, timeout = outputs["table"], float(outputs["timeoutSeconds"])
    # (eventually consistent: half the read units; a lease hours old is long settled)
    pages = client("dynamodb").get_paginator("scan").paginate(TableName=table)
    for page in pages:
        for item in page.get("Items", []):
            steps = {name[4:]: v.get("S") for name, v in item.items() if name.startswith("out_")}
            if not steps:
                continue  # (not a checkpoint)
            key = item["pk"]["S"]
            completed = item.get("completed_at", {}).get("N")
            saved = item.get(SAVED_AT, {}).get("S")
            last = _epoch(saved, timestamps)
            # when it is judged: its completion, or when its run should have ended
            when = float(completed) if completed else None if last is None else last + timeout
            if when is None:
                report.account("no time to judge it by (no saved_at)")
                continue
            if not report.judged(when):
                continue
            missing = [step for step, entry in steps.items() if entry in (None, EMPTY)]
            if completed and missing:
                report.add("lost", key, f"completed with step {', '.join(missing)} not recorded")
            elif completed:
                report.account("completed")
            elif "lease" in item:
                report.add(
                    "lost",
                    key,
                    f"held by {item['lease']['S']} since {saved}, past the workflow's "
                    f"timeout ({int(timeout)} s): rerun the key (`exactly-once rerun`)",
                )
            else:
                report.account("not held, not completed")


def _epoch(text: str | None, timestamps: Any) -> float | None:
    try:
        return None if not text else float(timestamps.epoch(text))
    except ValueError:
        return None


# -- pattern 1: every object version of the bucket started its execution ------------------
STARTER_STRATEGIES = ("object-key", "bucket-key-version")  # what a listing can derive


def starter_refusal(outputs: Mapping[str, Any]) -> str | None:
    """Why a NameDedupStarter cannot be audited (its events are not a bucket's objects, or
    its key not one a listing derives), or None."""
    if not outputs.get("bucket"):
        return "its events come from its own event pattern: no listing holds them"
    if outputs.get("backend") != "step-functions":
        return "its durable executions are not listed by name (backend 'durable-function')"
    if outputs.get("keyStrategy") not in STARTER_STRATEGIES:
        return (
            f"its key strategy {outputs.get('keyStrategy')!r} reads the event (a listing "
            f"derives {' and '.join(STARTER_STRATEGIES)} only)"
        )
    return None


def _starter(outputs: Mapping[str, Any], client: Clients, report: Report, now: float) -> None:
    """Each object version uploaded to the bucket (each key, with the object-key strategy)
    started its execution: the name the starter derives from its key (handlers/names.py),
    or a later attempt's (`-r1`, ...), among the machine's executions (ListExecutions: up
    to 90 days after they end). None is lost: its event never reached the starter (a rule
    that did not match, a notification off), or it waits in the starter's DLQ. Two runs
    of one key are its attempts, by design: no double is possible by name."""
    from exactly_once.handlers.names import execution_name

    refused = starter_refusal(outputs)
    if refused is not None:
        raise NotAudited(f"this NameDedupStarter cannot be audited: {refused}")
    bucket, machine, strategy, hide = (outputs[n] for n in READS["NameDedupStarter"][:4])
    s3, sfn = client("s3"), client("stepfunctions")
    with _names(sfn, machine) as started:
        for key, revisions in _versions(s3, bucket, ""):
            if strategy == "object-key":  # the key's newest write stands for it
                revisions = revisions[:1]
            for revision, modified in revisions:
                if not report.judged(modified):
                    continue
                event_key = (
                    f"{bucket}/{key}" if strategy == "object-key" else f"{bucket}/{key}#{revision}"
                )
                name = execution_name(event_key, 0, hide)
                attempts = (
                    n for n in started.starting(f"{name}-r") if n[len(name) + 2 :].isdigit()
                )
                if started.has(name) or any(attempts):
                    report.account("started")
                else:
                    report.add(
                        "lost",
                        f"s3://{bucket}/{key}#{revision}",
                        f"no execution {name} (nor a later attempt): its event never reached "
                        "the starter, or waits in its DLQ",
                    )


@contextlib.contextmanager
def _names(sfn: Any, machine: str) -> Iterator[_Published]:
    """The machine's execution names, in a temporary SQLite file (as the ETL's outputs)."""
    # (ListExecutions: 100 a page by default, at most 1,000; every status, 90 days after
    # each ended)
    listing = sfn.get_paginator("list_executions")
    pages = listing.paginate(stateMachineArn=machine, PaginationConfig={"PageSize": 1000})
    with _listed(e["name"] for page in pages for e in page.get("executions", [])) as found:
        yield found


# -- the component's scheduled audit ---------------------------------------------------------
PATTERN = "audit"  # its metrics' Pattern dimension
LOGGED = 100  # findings logged per run, one line each (every one counted in the metrics)


@dataclasses.dataclass(frozen=True)
class AuditSettings(Settings):
    """The scheduled audit's function (components/audit.py sets them)."""

    audited: dict[str, Any]  # the component's outputs the audit reads, `kind` first
    grace_seconds: int
    window_seconds: int  # each run judges the inputs of this long before the grace


@lambda_handler
def handler(event: Any, context: Any) -> dict[str, Any]:
    """One audit run: the findings logged (WARNING, one line each, the first LOGGED), the
    counts written as metrics every run (0 included: the alarms see each run)."""
    config = AuditSettings.current()
    now = time.time()
    since = now - config.grace_seconds - config.window_seconds
    # what it has not read a minute before its timeout, it says it has not
    deadline = now + remaining_seconds(context) - 60
    report = audit(config.audited, client, config.grace_seconds, since, now, deadline)
    for finding in report.findings[:LOGGED]:
        log("WARNING", "audit finding", **dataclasses.asdict(finding))
    counts = {kind.capitalize(): float(n) for kind, n in report.counts.items()}
    metrics.emit(PATTERN, {"audited": report.audited}, **counts)
    summary = {k: v for k, v in report.as_dict().items() if k != "findings"}
    log("INFO", "audit", **summary)
    return summary
