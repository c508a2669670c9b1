"""Function logs go where AWS sends them: the function's LoggingConfig log group; and
their embedded-metric-format lines become CloudWatch metrics, as AWS makes them.

LocalStack writes every function's logs to `/aws/lambda/<name>` whatever its
LoggingConfig says, and when the stream is missing calls CreateLogGroup before
CreateLogStream. AWS Lambda writes to the configured group with the execution role,
needing only logs:CreateLogStream and logs:PutLogEvents on an existing group
(https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-advanced.html).
With IAM enforced (`iam.py`), LocalStack's way would be refused for our least-privilege
roles and the logs lost; this hook makes it AWS's way, as an on_infra_start hook.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from localstack.runtime import hooks

from host_executor.emf import emf_metric_data

LOG = logging.getLogger(__name__)


def _put(logs: Any, group: str, stream: str, events: list[dict[str, Any]]) -> None:
    def put() -> None:
        logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events)

    try:
        put()
        return
    except logs.exceptions.ResourceNotFoundException:
        pass
    try:  # the stream first, in the group that exists; the group only when it is missing
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    except logs.exceptions.ResourceNotFoundException:
        logs.create_log_group(logGroupName=group)
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
    put()


def _put_metrics(region: str, text: str) -> None:
    from localstack.aws.connect import connect_to

    for line in text.split("\n"):
        for namespace, data in emf_metric_data(line):
            connect_to(region_name=region).cloudwatch.put_metric_data(
                Namespace=namespace, MetricData=data
            )


def run_log_loop(self: Any, *args: Any, **kwargs: Any) -> None:
    """LocalStack's LogHandler.run_log_loop, with `_put` for its put-or-create."""
    from localstack.aws.connect import connect_to
    from localstack.services.lambda_.invocation.logs import QUEUE_SHUTDOWN
    from localstack.utils.aws.client_types import ServicePrincipal

    logs = connect_to.with_assumed_role(
        region_name=self.region, role_arn=self.role_arn, service_principal=ServicePrincipal.lambda_
    ).logs
    while not self._shutdown_event.is_set():
        item = self.log_queue.get()
        if item is QUEUE_SHUTDOWN:
            return
        now = int(time.time() * 1000)
        events = [
            {"timestamp": now, "message": line + "\n"} for line in item.logs.split("\n") if line
        ]
        try:
            _put(logs, item.log_group, item.log_stream, events)
        except Exception as exc:
            LOG.warning("Error saving logs to group %s: %s", item.log_group, exc)
        try:  # as CloudWatch Logs does on ingestion
            _put_metrics(self.region, item.logs)
        except Exception as exc:
            LOG.warning("Error extracting embedded metrics of %s: %s", item.log_group, exc)


@hooks.on_infra_start()
def honour_logging_config() -> None:
    from localstack.services.lambda_.invocation import logs
    from localstack.services.lambda_.invocation.execution_environment import (
        ExecutionEnvironment,
    )

    original = ExecutionEnvironment.get_log_group_name
    if getattr(original, "honours_logging_config", False):
        return

    def get_log_group_name(self: Any) -> str:
        configured = (self.function_version.config.logging_config or {}).get("LogGroup")
        return configured or original(self)

    get_log_group_name.honours_logging_config = True  # type: ignore[attr-defined]
    ExecutionEnvironment.get_log_group_name = get_log_group_name
    logs.LogHandler.run_log_loop = run_log_loop
