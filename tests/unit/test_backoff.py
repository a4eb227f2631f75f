"""The one retry delay: exponential, capped, fully jittered; and the callers' use of it."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.inbox.worker import RetryPolicy
from services.platform.backoff import backoff


@given(st.integers(0, 2_000), st.integers(0, 2**32))
def test_a_delay_never_exceeds_the_doubling_ceiling_nor_the_cap(attempt: int, seed: int) -> None:
    delay = backoff(attempt, 0.5, 60.0, random.Random(seed))
    assert 0.0 <= delay <= min(60.0, 0.5 * 2 ** min(attempt, 10))


def test_full_jitter_spreads_over_the_whole_range_below_the_ceiling() -> None:
    rng = random.Random(7)
    delays = [backoff(3, 1.0, 60.0, rng) for _ in range(2_000)]  # ceiling 8 s
    assert max(delays) <= 8.0
    assert min(delays) < 0.5  # not spaced by a floor: callers that failed together spread
    assert max(delays) > 7.5
    assert 3.5 < sum(delays) / len(delays) < 4.5


def test_the_ceiling_doubles_per_attempt_until_the_cap() -> None:
    class Top(random.Random):
        def uniform(self, a: float, b: float) -> float:
            return b

    assert [backoff(n, 0.5, 5.0, Top()) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_a_floor_keeps_retries_spaced() -> None:
    rng = random.Random(3)
    delays = [backoff(2, 1.0, 60.0, rng, least=0.5) for _ in range(500)]
    assert all(2.0 <= d <= 4.0 for d in delays)


@pytest.mark.parametrize(
    ("attempt", "base", "cap", "least"),
    [(-1, 1.0, 1.0, 0.0), (0, -1.0, 1.0, 0.0), (0, 1.0, -1.0, 0.0), (0, 1.0, 1.0, 1.5)],
)
def test_nonsense_arguments_are_refused(
    attempt: int, base: float, cap: float, least: float
) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. backoff"):
        backoff(attempt, base, cap, random.Random(), least=least)


def test_a_parked_inbox_event_waits_doubling_up_to_the_cap_with_jitter() -> None:
    rng = random.Random(1)
    policy = RetryPolicy(attempts=10, base_seconds=1.0, max_seconds=8.0)
    delays = [policy.delay(n, rng) for n in range(1, 7)]
    ceilings = [1, 2, 4, 8, 8, 8]
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))
