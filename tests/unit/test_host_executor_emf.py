"""Our LocalStack plugin makes the handlers' embedded-metric lines CloudWatch metrics, as
CloudWatch Logs does (localstack/host_executor: emf.py), a member holding one number or
an array of them ("Specification: Embedded metric format", CloudWatch user guide)."""

from __future__ import annotations

import contextlib
import io

from host_executor.emf import emf_metric_data

from exactly_once.handlers import metrics


def test_a_slots_line_with_its_latenesses_is_every_metric_it_names() -> None:
    # GIVEN the line a slot writes: counts and an array of latenesses
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        metrics.emit("scheduler", {"slot": 5}, Fired=3, Failed=1, LatenessMs=[4, 8, 15])
    # WHEN it is read as CloudWatch Logs reads it
    [(namespace, data)] = emf_metric_data(out.getvalue().strip())
    # THEN each member is a datum: a number as a Value, an array as its Values
    by_name = {datum["MetricName"]: datum for datum in data}
    assert namespace and set(by_name) == {"Fired", "Failed", "LatenessMs"}
    assert by_name["Fired"]["Value"] == 3.0 and "Values" not in by_name["Fired"]
    assert by_name["LatenessMs"]["Values"] == [4.0, 8.0, 15.0]
    assert "Value" not in by_name["LatenessMs"]


def test_a_line_that_is_no_metric_document_is_none() -> None:
    assert emf_metric_data('{"level": "INFO", "message": "slot fired"}') == []
    assert emf_metric_data('{"_aws": "not a metadata object"}') == []
