"""The demo's latency split: the whole batch, the settlements that met no fault, each fault."""

from __future__ import annotations

import pytest

from tools.run.latency import latency, percentile, split


def test_percentiles_interpolate_as_postgresql_does() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([5.0], 0.99) == 5.0
    figures = latency([float(n) for n in range(100, 0, -1)])
    assert figures is not None
    assert (figures.count, figures.p50, figures.worst) == (100, 50.5, 100.0)
    assert figures.p99 == pytest.approx(99.01)
    assert latency([]) is None


def test_settlements_that_met_a_fault_are_kept_out_of_the_no_fault_figures() -> None:
    paid = {"a": 0.2, "b": 0.3, "c": 0.4, "slow": 15.0, "retried": 3.0}
    met = {
        "slow": ["webhook_drop"],
        "retried": ["fail_before", "webhook_twin"],
        "refused": ["refuse"],
    }
    figures = split(paid, met)
    assert figures.whole is not None and figures.no_fault is not None
    assert figures.whole.count == 5 and figures.whole.p50 == 0.4
    assert figures.no_fault.count == 3 and figures.no_fault.p50 == 0.3
    assert figures.no_fault.worst == 0.4
    assert {name: f.count for name, f in figures.by_fault.items()} == {
        "fail_before": 1,
        "webhook_drop": 1,
        "webhook_twin": 1,
    }
    assert figures.by_fault["webhook_drop"].p50 == 15.0
    assert figures.met_fault == 3  # the refused one never reached paid, yet it met a fault
