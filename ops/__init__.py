"""Operator commands for the resumable workflow: `python -m ops --help`."""
