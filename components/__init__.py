"""Pulumi components for exactly-once effects on at-least-once AWS event sources."""

from components.name_dedup import NameDedupStarter, NameDedupStarterArgs
from components.provider import aws_provider

__all__ = ["NameDedupStarter", "NameDedupStarterArgs", "aws_provider"]
