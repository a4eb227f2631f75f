"""What the bench database's sessions wait on while a rate is offered: `pg_stat_activity`
sampled every `INTERVAL_S` on a connection of its own, each active session counted under its
wait event (or `CPU` when it waits on nothing), averaged over the samples: the number of
sessions that were, on average, busy that way. A lock queue (`Lock:object` is the notify
queue's lock, taken by every committing transaction that notified) shows up here before it
shows up in CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator

import asyncpg

from tools.bench.e2e_pgstats import PROBE
from tools.bench.report import Figure

INTERVAL_S = 0.02
SHOWN = 8  # wait events named in the breakdown, the most sampled first
_ACTIVE = (
    PROBE
    + """
SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS waiting
  FROM pg_stat_activity
 WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
   AND NOT starts_with(query, $1)
"""
)


class Waits:
    """Samples taken so far: how often each wait event was seen, over how many samples."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.samples = 0

    def figures(self, at: str) -> list[Figure]:
        """Average sessions per wait event, the most common first."""
        if not self.samples:
            return []
        return [
            Figure(f"{at} pg sessions {event}", round(count / self.samples, 2), "sessions")
            for event, count in self.seen.most_common(SHOWN)
        ]


@contextlib.asynccontextmanager
async def sampling(dsn: str) -> AsyncIterator[Waits]:
    """Sample the database's sessions for as long as the block runs."""
    waits = Waits()
    conn = await asyncpg.connect(dsn)

    async def sample() -> None:
        while True:
            for row in await conn.fetch(_ACTIVE, PROBE):
                waits.seen[row["waiting"]] += 1
            waits.samples += 1
            await asyncio.sleep(INTERVAL_S)

    task = asyncio.create_task(sample())
    try:
        yield waits
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await conn.close()
