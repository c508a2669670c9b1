"""The demo scheduler target keeps one effect per message id, whatever the retries."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from demo.functions import demo_target
from exactly_once.handlers import runtime

CONFIG = demo_target.TargetSettings(fires_table="fires")


@pytest.fixture
def table() -> Iterator[str]:
    with mock_aws():
        runtime.client.cache_clear()  # clients made inside the mock
        boto3.client("dynamodb").create_table(
            TableName="fires",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield "fires"


def test_a_repeated_invoke_keeps_one_effect_and_is_counted(table: str) -> None:
    event = {"id": "m1", "publishTime": 1.0, "parameters": {}}
    assert demo_target.fire(CONFIG, event, 2.0)["firedAt"] == 2.0  # (when the send arrived)
    assert demo_target.fire(CONFIG, event, 3.0) == {"id": "m1", "repeat": True}
    item = boto3.client("dynamodb").get_item(TableName=table, Key={"pk": {"S": "fired#m1"}})
    assert (item["Item"]["fires"]["N"], item["Item"]["repeats"]["N"]) == ("1", "1")
