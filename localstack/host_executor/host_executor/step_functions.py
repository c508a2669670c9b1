"""Two caches that keep LocalStack's Step Functions interpreter off the CPU.

LocalStack runs every execution as Python threads in one process, under the GIL, on
our 2-core machines. Profiling 200 scheduler executions due together (py-spy, `--gil`)
found two per-state costs that swamp everything else:

- JSONPath: every path of every state (`Parameters`, `ResultPath`, Choice variables)
  goes through jsonpath-ng's `parse()`, which builds a fresh PLY LALR parser per call
  (its tables are never written or cached): ~25 ms of CPU for `$.id`. A parsed path is
  an immutable expression tree (`find` and `update_or_create` change only the data they
  are given), so one per distinct path string is shared.
- Task clients: every Task calls STS AssumeRole for the state machine's role (a request
  to LocalStack itself) and builds a new botocore client from the fresh credentials,
  ~30 ms each. A throttled `lambda:invoke` pays it again on every retry, so a burst
  took seconds per attempt. One client per (service, region, role) is kept for a few
  minutes, as the SDK keeps assumed-role credentials until they near expiry.

Neither changes what an execution does; both are on_infra_start hooks (entry points in
pyproject.toml), run before the Step Functions provider loads, and also rebind the names
in any of its modules already imported.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from typing import Any

from localstack.runtime import hooks

PARSE_CACHE_SIZE = 4096
CLIENT_TTL_SECONDS = 600
CLIENT_POOL_SIZE = 64  # executions share a client: enough connections for a burst


def _rebind(name: str, old: Any, new: Any, prefix: str) -> None:
    """Point `name` at `new` in every loaded module under `prefix` that imported `old`."""
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith(prefix) and getattr(module, name, None) is old:
            setattr(module, name, new)


@hooks.on_infra_start()
def cache_jsonpath_parsers() -> None:
    import jsonpath_ng
    import jsonpath_ng.ext

    for package in (jsonpath_ng, jsonpath_ng.ext):
        original = package.parse
        if hasattr(original, "cache_info"):
            continue  # already cached (a second start in one process)
        cached = functools.lru_cache(maxsize=PARSE_CACHE_SIZE)(original)
        _rebind("parse", original, cached, "jsonpath_ng")
        _rebind("parse", original, cached, "localstack.services.stepfunctions")


@hooks.on_infra_start()
def cache_task_clients() -> None:
    from botocore.config import Config
    from localstack.services.stepfunctions.asl.utils import boto_client

    original = boto_client.boto_client_for
    if getattr(original, "cached", False):
        return
    config = boto_client._BOTO_CLIENT_CONFIG.merge(Config(max_pool_connections=CLIENT_POOL_SIZE))
    clients: dict[tuple[str, str, str], tuple[float, Any]] = {}
    lock = threading.Lock()

    def boto_client_for(service: str, region: str, state_credentials: Any) -> Any:
        key = (service, region, state_credentials.role_arn)
        now = time.monotonic()
        with lock:
            entry = clients.get(key)
            if entry is None or now - entry[0] > CLIENT_TTL_SECONDS:
                factory = boto_client.connect_to.with_assumed_role(
                    role_arn=state_credentials.role_arn,
                    service_principal=boto_client.ServicePrincipal.states,
                    region_name=region,
                    config=config,
                )
                entry = clients[key] = (now, factory.get_client(service=service))
        return entry[1]

    boto_client_for.cached = True  # type: ignore[attr-defined]
    _rebind("boto_client_for", original, boto_client_for, "localstack.services.stepfunctions")
