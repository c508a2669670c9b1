"""The scheduler model's measured inputs, re-measured by one command on the machine at hand:

    bash scripts/bench cpu        # (python -m benchmarks.measured) writes measured.json

benchmarks/scheduler_model.py reads `measured.json`, never a constant of its own:

- `cpu_per_call`: the client CPU of one claim (`scheduler_slots.claim`: a conditional
  UpdateItem through the slot function's own client) over HTTPS on a kept-alive
  connection, against a moto server in another process (its CPU not counted) serving TLS
  with a certificate of its own, verified as AWS's is; `cpu_per_call_http` the same
  without TLS (what was measured before).
- `tls_connect_cpu`: the client CPU of opening one new verified TLS connection and making
  one call on it, less a call's: a cold slot opens one per thread.
- `init_cpu`: the slot function's cold start in a fresh interpreter (its module imported,
  its clients built, as its handler does before the first call).
- `log_bytes`: what each function writes per invocation and per message, from running
  the handlers as Lambda runs them (a context, a cold start's fields), with Lambda's own
  START, END and REPORT lines per invocation (`PLATFORM_LOG_BYTES`, their text format).

CPU is seconds of one vCPU of this machine (Lambda's is another: the figures are an
estimate of the same code's cost, re-measurable, not AWS's).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MEASURED = Path(__file__).with_name("measured.json")
# Lambda's START, END and REPORT lines of one invocation, text format: about 80, 60 and
# 200 bytes (the REPORT line with its Init Duration)
PLATFORM_LOG_BYTES = 340
CALLS = 500


@contextlib.contextmanager
def moto_server(tls: bool) -> Iterator[tuple[str, dict[str, str]]]:
    """A moto server in another process: its endpoint, and the environment a client needs
    (TLS: a self-signed certificate made here, which the client verifies)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with tempfile.TemporaryDirectory() as folder:
        env = {"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x"}
        env["AWS_SECRET_ACCESS_KEY"] = "x"
        # (connections kept alive between calls, as AWS's are: moto's own server closes each)
        command = [sys.executable, str(Path(__file__).with_name("keepalive_server.py")), str(port)]
        scheme = "http"
        if tls:
            cert, key = f"{folder}/cert.pem", f"{folder}/key.pem"
            subject = ["-subj", "/CN=localhost"]
            subject += ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
            subprocess.run(
                ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]  # noqa: RUF005
                + ["-keyout", key, "-out", cert, *subject],
                check=True,
                capture_output=True,
            )
            command += [cert, key]
            env["AWS_CA_BUNDLE"], scheme = cert, "https"
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            yield f"{scheme}://localhost:{port}", env
        finally:
            server.terminate()
            server.wait()


@contextlib.contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(values)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def claims_cpu(tls: bool, calls: int = CALLS) -> dict[str, float]:
    """CPU seconds per claim on a kept-alive connection, and per claim on a new connection
    (a new client each: its connection's setup and the call)."""
    from exactly_once.handlers import scheduler_slots

    with moto_server(tls) as (endpoint, env), environment({**env, "AWS_ENDPOINT_URL": endpoint}):
        scheduler_slots._client.cache_clear()
        try:
            ddb = scheduler_slots._client("dynamodb")
            ddb.create_table(
                TableName="t",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            keys = [str(i) for i in range(50 + calls + 50)]
            for key in keys:  # messages waiting for their slot
                ddb.put_item(
                    TableName="t", Item={"pk": {"S": f"MESSAGE#{key}"}, "status": {"S": "STANDBY"}}
                )
            lease = time.time() + 900
            for key in keys[:50]:  # warm: the connection, the models, the caches
                scheduler_slots.claim("t", key, "execution#1", lease)
            started = time.process_time()
            for key in keys[50 : 50 + calls]:
                assert scheduler_slots.claim("t", key, "execution#1", lease).item is not None
            kept = (time.process_time() - started) / calls
            # a new connection per call: the client's pool emptied before each
            fresh, started = keys[50 + calls :], time.process_time()
            for key in fresh:
                ddb._endpoint.http_session._manager.clear()  # (closes every pooled connection)
                scheduler_slots.claim("t", key, "execution#1", lease)
            connected = (time.process_time() - started) / len(fresh)
        finally:
            scheduler_slots._client.cache_clear()
    return {"per_call": kept, "per_connection": max(0.0, connected - kept)}


def init_cpu(runs: int = 3) -> float:
    """CPU seconds of the slot function's cold start in a fresh interpreter (median)."""
    script = (
        "import time; t = time.process_time(); "
        "from exactly_once.handlers import scheduler_slots; scheduler_slots.clients(); "
        "print(time.process_time() - t)"
    )
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1"}
    found = [
        float(
            subprocess.run(
                [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
            ).stdout
        )
        for _ in range(runs)
    ]
    return sorted(found)[len(found) // 2]


def log_bytes() -> dict[str, dict[str, float]]:
    """Bytes each function writes, per invocation and per message, running the handlers
    as Lambda runs them (tests/unit's moto world: a table, a state machine, a target)."""
    script = Path(__file__).with_name("log_bytes.py")
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, dict[str, float]] = json.loads(out.splitlines()[-1])
    return found


def measure() -> dict[str, Any]:
    https, http = claims_cpu(tls=True), claims_cpu(tls=False)
    return {
        "cpu_per_call": https["per_call"],
        "cpu_per_call_http": http["per_call"],
        "tls_connect_cpu": https["per_connection"],
        "init_cpu": init_cpu(),
        "log_bytes": log_bytes(),
        "platform_log_bytes": PLATFORM_LOG_BYTES,
        "measured_on": f"{os.cpu_count()} cores, {sys.platform}, Python {sys.version.split()[0]}",
    }


def load() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(MEASURED.read_text())
    return found


if __name__ == "__main__":
    figures = measure()
    MEASURED.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
