"""One ETL audit of N input versions in a fresh process, printing its peak memory growth
and its calls as JSON (for run.py).

    python benchmarks/audit_memory.py sqlite|in-memory N

`sqlite` is the library (`exactly_once.handlers.audit`: the outputs listed into a
temporary SQLite file, the inputs judged a key at a time); `in-memory` holds every output
key in a set and every input version in a list, then judges them (what a script would
do). S3 and DynamoDB are stand-ins that page N synthetic versions and their outputs as
ListObjectVersions and ListObjectsV2 do (1,000 a page), one in a hundred without its
output: the memory measured is the audit's, not a service's.
"""

from __future__ import annotations

import collections
import datetime
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from exactly_once.handlers import audit  # noqa: E402

PAGE = 1000
WHEN = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
OUTPUTS = {
    "kind": "IdempotentEtl",
    "inputBucket": "inputs",
    "inputPrefix": "data/",
    "inputSuffix": "",
    "outputBucket": "outputs",
    "outputPrefix": "out/",
    "outputSuffix": ".jsonl",
    "controlTable": "control",
    "recordTtlSeconds": 30 * 24 * 3600,  # (components/etl.py: record_ttl_days)
}


def version_id(n: int) -> str:
    return f"{n:032x}"  # (an S3 version id's length)


class Stand:
    """S3 and DynamoDB as the audit calls them, counting each call."""

    def __init__(self, versions: int) -> None:
        self.versions = versions
        self.calls: collections.Counter[str] = collections.Counter()

    def __call__(self, service: str) -> Any:
        return self

    def get_bucket_versioning(self, **_: Any) -> dict[str, Any]:
        self.calls["s3:GetBucketVersioning"] += 1
        return {"Status": "Enabled"}

    def get_paginator(self, operation: str) -> Any:
        stand = self

        class Paginator:
            def paginate(self, **_: Any) -> Iterator[dict[str, Any]]:
                return stand.pages(operation)

        return Paginator()

    def pages(self, operation: str) -> Iterator[dict[str, Any]]:
        for start in range(0, self.versions, PAGE):
            self.calls[f"s3:{operation}"] += 1
            numbers = range(start, min(start + PAGE, self.versions))
            if operation == "list_object_versions":
                versions = [
                    {
                        "Key": f"data/{n // 2:08}.csv",  # two versions a key
                        "VersionId": version_id(n),
                        "ETag": '"e"',
                        "LastModified": WHEN,
                    }
                    for n in numbers
                ]
                yield {"Versions": versions}
            else:
                keys = [
                    {"Key": f"out/data/{n // 2:08}.csv.{version_id(n)}.jsonl"}
                    for n in numbers
                    if n % 100
                ]
                yield {"Contents": keys}

    def batch_get_item(self, **_: Any) -> dict[str, Any]:
        self.calls["dynamodb:BatchGetItem"] += 1
        return {"Responses": {}}


def peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("no VmHWM in /proc/self/status")


def in_memory(stand: Stand) -> dict[str, int]:
    """Every output key in a set, every input version in a list, then judged."""
    published = {o["Key"] for p in stand.pages("list_objects_v2") for o in p["Contents"]}
    inputs = [v for p in stand.pages("list_object_versions") for v in p["Versions"]]
    lost = sum(f"out/{v['Key']}.{v['VersionId']}.jsonl" not in published for v in inputs)
    return {"audited": len(inputs), "lost": lost}


def main() -> None:
    way, versions = sys.argv[1], int(sys.argv[2])
    stand = Stand(versions)
    before = peak_mb()
    started = time.perf_counter()
    if way == "sqlite":
        report = audit.audit(OUTPUTS, stand, 0, now=WHEN.timestamp() + 3600)
        found = {"audited": report.audited, "lost": report.counts["lost"]}
    else:
        found = in_memory(stand)
    print(
        json.dumps(
            {
                "peak_mb": peak_mb() - before,
                "seconds": time.perf_counter() - started,
                **found,
                "calls": dict(stand.calls),
            }
        )
    )


if __name__ == "__main__":
    main()
