"""Pulumi components for exactly-once effects on at-least-once AWS event sources: the five
patterns, each with its args, and the options every component takes."""

from exactly_once.components.api_starter import ApiGatewayStarter, ApiGatewayStarterArgs
from exactly_once.components.aws_provider import aws_provider
from exactly_once.components.etl import IdempotentEtl, IdempotentEtlArgs
from exactly_once.components.monitoring import MonitoringOptions
from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs
from exactly_once.components.resumable import (
    ResumableWorkflow,
    ResumableWorkflowArgs,
    WorkflowStep,
)
from exactly_once.components.roles import IamStatement, RoleOptions
from exactly_once.components.scheduler import Scheduler, SchedulerArgs

__all__ = [
    "ApiGatewayStarter",
    "ApiGatewayStarterArgs",
    "IamStatement",
    "IdempotentEtl",
    "IdempotentEtlArgs",
    "MonitoringOptions",
    "NameDedupStarter",
    "NameDedupStarterArgs",
    "ResumableWorkflow",
    "ResumableWorkflowArgs",
    "RoleOptions",
    "Scheduler",
    "SchedulerArgs",
    "WorkflowStep",
    "aws_provider",
]
