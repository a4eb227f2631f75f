"""Reads spaced to the rail's read limit: Stripe allows a live account about 100 read calls a
second and answers 429 past it, so a reconciliation of a large window must not fire its list
pages and retrieves as fast as the connections allow.

`ReadLimit` is a generic cell rate: each read is due 1/rate seconds after the one before it,
and up to `burst` reads may run ahead of that schedule (the reads already in flight), so the
long-run rate never passes `rate` whatever the concurrency.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from services.domain.rail import DEFAULT_READ_RATE


class ReadLimit:
    """Waits before each read so that reads go at most `rate` a second, `burst` at once."""

    def __init__(
        self,
        rate: float = DEFAULT_READ_RATE,
        burst: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a read limit needs rate > 0 and burst >= 1, not {rate}, {burst}")
        self._interval = 1.0 / rate
        self._slack = (burst - 1) * self._interval
        self._clock, self._sleep = clock, sleep
        self._due = 0.0  # when the next read is due on the schedule

    async def wait(self) -> None:
        """Return when one more read may go."""
        now = self._clock()
        due = max(self._due, now)
        self._due = due + self._interval  # taken before sleeping: concurrent readers queue up
        early = due - now - self._slack
        if early > 0:
            await self._sleep(early)
