"""The rail's read limit: reads spaced to the rate, a burst let through at once."""

from __future__ import annotations

import asyncio

import pytest

from services.adapters.stripe.read_limit import ReadLimit


class FakeTime:
    """A clock that moves only when a reader sleeps."""

    def __init__(self) -> None:
        self.now = 1_000.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_reads_past_the_burst_go_at_the_rate() -> None:
    t = FakeTime()
    limit = ReadLimit(100.0, burst=10, clock=t.clock, sleep=t.sleep)

    async def read_many(n: int) -> None:
        for _ in range(n):
            await limit.wait()

    asyncio.run(read_many(210))
    # The first ten go at once; the other 200 take two seconds at 100 a second.
    assert t.slept[:1] == [pytest.approx(0.01)]
    assert t.now - 1_000.0 == pytest.approx(2.0)


def test_concurrent_readers_share_one_schedule() -> None:
    t = FakeTime()
    limit = ReadLimit(50.0, burst=1, clock=t.clock, sleep=t.sleep)

    async def together() -> None:
        await asyncio.gather(*(limit.wait() for _ in range(5)))

    asyncio.run(together())
    # Each reader takes its slot before it sleeps: the fifth read goes 80 ms after the first.
    assert t.now - 1_000.0 == pytest.approx(0.08)
    assert len(t.slept) == 4


def test_a_limit_that_lets_nothing_through_is_refused() -> None:
    with pytest.raises(ValueError, match="rate > 0"):
        ReadLimit(0)
