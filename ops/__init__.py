"""Operator commands for the resumable workflow: `python -m exactly_once.ops --help`."""
