"""The Docker path is labelled for what it is; the supported path is host mode."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_compose_file_needs_an_auth_token_and_says_it_is_not_the_supported_path() -> None:
    text = (ROOT / "localstack" / "docker-compose.yml").read_text()
    [service] = yaml.safe_load(text)["services"].values()
    assert any(
        e.startswith("LOCALSTACK_AUTH_TOKEN=${LOCALSTACK_AUTH_TOKEN:?")
        for e in service["environment"]
    )
    assert "NOT the supported path" in text and "IAM is NOT enforced" in text
    assert "The supported path is host mode" in (ROOT / "README.md").read_text()
