"""The e2e scenario's arithmetic: percentiles read like PostgreSQL's, honest per-settlement
and per-second figures, and the rate that kept p99 accepted -> paid under a second."""

from __future__ import annotations

import pytest

from tools.bench.e2e_figures import (
    cpu_deltas,
    highest_rate_within,
    per_second,
    per_settlement,
    percentile,
)


def test_percentiles_interpolate_like_percentile_cont() -> None:
    samples = [0.4, 0.1, 0.3, 0.2]  # unordered on purpose
    assert percentile(samples, 0.0) == 0.1
    assert percentile(samples, 1.0) == 0.4
    assert percentile(samples, 0.5) == pytest.approx(0.25)
    assert percentile(samples, 0.99) == pytest.approx(0.397)
    assert percentile([7.0], 0.99) == 7.0


def test_percentile_refuses_nothing_and_fractions_outside_zero_to_one() -> None:
    with pytest.raises(ValueError):
        percentile([], 0.5)
    with pytest.raises(ValueError):
        percentile([1.0], 99)


def test_per_settlement_divides_and_is_zero_when_nothing_settled() -> None:
    assert per_settlement(300.0, 100) == 3.0
    assert per_settlement(300.0, 0) == 0.0


def test_per_second_never_reads_a_burst_as_an_infinite_rate() -> None:
    assert per_second(500, 10.0, 0.01) == 50.0
    assert per_second(3, 0.0, 0.01) == 300.0


def test_cpu_deltas_count_a_group_started_in_between_from_zero() -> None:
    before = {"ledger": 1.5, "relay": 2.0, "gone": 9.0}
    after = {"ledger": 2.0, "relay": 2.25, "inbox": 0.5}
    assert cpu_deltas(before, after) == {"ledger": 0.5, "relay": 0.25, "inbox": 0.5}


def test_highest_rate_within_the_limit() -> None:
    assert highest_rate_within({100: 0.3, 250: 0.9, 500: 1.4}) == 250
    assert highest_rate_within({100: 0.3, 250: 1.0}) == 100  # at the limit is not under it
    assert highest_rate_within({100: 2.0, 250: None}) is None
