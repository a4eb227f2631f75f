"""A window cut into stretches listed side by side: every second in exactly one stretch."""

from __future__ import annotations

import itertools

import pytest

from services.adapters.stripe.source import slices


@pytest.mark.parametrize(
    ("start", "end", "count"), [(0, 2400, 4), (10, 13, 4), (5, 6, 4), (7, 1000, 3)]
)
def test_the_stretches_adjoin_and_cover_the_window_once(start: int, end: int, count: int) -> None:
    cut = slices(start, end, count)
    assert cut[0][0] == start and cut[-1][1] == end
    assert all(a < b for a, b in cut) and len(cut) <= count
    assert all(prev[1] == nxt[0] for prev, nxt in itertools.pairwise(cut))


def test_an_empty_window_has_no_stretch() -> None:
    assert slices(5, 5, 4) == []
