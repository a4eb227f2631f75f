"""The pace a demo batch is offered at: steady, as an upstream sends its payouts, or all at once.

A burst of a thousand at once measures a queue, not the pipeline: the last in line waits for
all the others. The default rate is one the pipeline sustains with room to spare
(docs/benchmarks.md, e2e at 100/s), so the figures are of settlements.
"""

from __future__ import annotations

import asyncio
import time

DEFAULT_RATE = 100  # settlements per second


class Pace:
    """When each settlement of one sender is due: the i-th at `i / per_second` seconds after
    the start; every one at once when `per_second` is None."""

    def __init__(self, per_second: float | None, start: float | None = None) -> None:
        if per_second is not None and per_second <= 0:
            raise ValueError(f"per_second must be > 0, or None to send at once; got {per_second}")
        self.per_second = per_second
        self.start = time.monotonic() if start is None else start

    async def due(self, index: int) -> None:
        """Return once the `index`-th settlement (0 first) is due."""
        if self.per_second is not None:
            wait = self.start + index / self.per_second - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)


AT_ONCE = Pace(None)
