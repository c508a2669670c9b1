"""Pulumi components for exactly-once effects on at-least-once AWS event sources."""

from exactly_once.components.name_dedup import NameDedupStarter, NameDedupStarterArgs
from exactly_once.components.provider import aws_provider

__all__ = ["NameDedupStarter", "NameDedupStarterArgs", "aws_provider"]
