"""The test tier's order: the heaviest tests first (`heavy(seconds)`), the rest as
collected. pytest-xdist's worksteal hands each worker a contiguous share and lets an idle
one take the end of another's: with the long explorer parts at the front, the tier ends on
short tests, both workers busy to the end, not one waiting on the other's last long part."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def weight(item: pytest.Item) -> float:
        marker = item.get_closest_marker("heavy")
        return float(marker.args[0]) if marker else 0.0

    items.sort(key=weight, reverse=True)  # (stable: the rest keep their order)
