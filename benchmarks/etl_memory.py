"""One ETL run in a fresh process, printing its peak memory growth as JSON (for run.py).

    python benchmarks/etl_memory.py streaming|in-memory IN_BUCKET KEY VERSION OUT_BUCKET

`streaming` is the library (`transform_once`, conditional-write); `in-memory` reads the
whole object, builds the whole output, then PUTs it (what the ETL did before streaming).
"""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "examples" / "etl")]

from etl_transforms.csv_jsonl import json_lines  # noqa: E402

from exactly_once.handlers import etl, runtime  # noqa: E402
from tooling.events import notification  # noqa: E402


def peak_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited from
    the parent that forked it)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("no VmHWM in /proc/self/status")


def main() -> None:
    way, bucket, key, version, out = sys.argv[1:6]
    s3 = runtime.client("s3")
    s3.list_buckets()  # clients and their models loaded before the baseline
    runtime.client("sqs")
    before = peak_mb()
    started = time.perf_counter()
    sys_stdout, sys.stdout = sys.stdout, io.StringIO()
    try:
        if way == "streaming":
            config = etl.EtlSettings(output_bucket=out, output_prefix=f"{way}/")

            def transform(source: Any, obj: Any) -> Any:
                return json_lines(source)

            event = notification(bucket, key, version)
            [result] = etl.transform_once(event, transform, config)["results"]
            assert result["status"] in ("WRITTEN", "DUPLICATE"), result
        else:
            data = s3.get_object(Bucket=bucket, Key=key, VersionId=version)["Body"].read()
            output = b"".join(json_lines(io.BytesIO(data)))
            s3.put_object(Bucket=out, Key=f"{way}/{key}", Body=output)
    finally:
        sys.stdout = sys_stdout
    print(json.dumps({"peak_mb": peak_mb() - before, "seconds": time.perf_counter() - started}))


if __name__ == "__main__":
    main()
