"""The monthly partitions of the history (migrations 0010 and 0012): kept created ahead of
time, and the months an archiver may detach.

A write dated in a month with no partition is refused by PostgreSQL and rolls back, so the
months ahead must exist before anything is written in them: `ensure_months` creates this
month's and the next `MONTHS_AHEAD` months' partitions; the reconciler calls it at start and
once a day (`MonthlyUpkeep`), so a year of missed calls passes before a write is refused.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down

# Partitioned by month (on `occurred_at`; the inbox on `received_month`, the month of its
# `received_at`), in the order an archive detaches them.
HISTORY_TABLES = ("settlement_transitions", "postings", "operator_actions", "inbox_events")
MONTHS_AHEAD = 12
UPKEEP_EVERY = timedelta(days=1)
# Attaching a month's partition briefly locks the tables its foreign keys point at (settlements,
# accounts, journal_entries); bounded, so it never queues the settlement writes behind a long
# transaction. Not granted in time, it is tried again on the next round.
LOCK_TIMEOUT = "2s"
OPEN_MONTHS_SINCE = """
SELECT count(*) FILTER (WHERE settle_month_partition(t, m))
  FROM unnest($1::text[]) AS t,
       generate_series(date_trunc('month', $2::timestamp),
                       date_trunc('month', now() AT TIME ZONE 'UTC'), interval '1 month') AS m
"""


def month_start(at: datetime) -> datetime:
    """The first instant (UTC) of the calendar month in UTC that `at` (aware) falls in: the
    lower bound of its month's partition."""
    return at.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


async def ensure_months(pool: asyncpg.Pool, ahead: int = MONTHS_AHEAD) -> int:
    """Create the partitions of this month and the next `ahead` months that are missing; how
    many were created. Idempotent, and callers at once take turns."""
    with unavailable_when_down("creating the history's monthly partitions"):
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            created = await conn.fetchval("SELECT settle_ensure_month_partitions($1)", ahead)
    return int(created)


async def open_months_since(conn: asyncpg.Connection, since: datetime) -> int:
    """Create the missing partitions of every month from `since`'s (naive UTC) to this one, for
    history written back-dated (a bench's pre-filled past, a test's fixed clock); how many."""
    return int(await conn.fetchval(OPEN_MONTHS_SINCE, list(HISTORY_TABLES), since))


class MonthlyUpkeep:
    """When the partitions are next due to be ensured: at once, then every `UPKEEP_EVERY`
    after the last success."""

    def __init__(self, every: timedelta = UPKEEP_EVERY) -> None:
        self._every = every
        self._next: datetime | None = None

    def due(self, now: datetime) -> bool:
        """Whether ensuring the partitions is due at `now`."""
        return self._next is None or now >= self._next

    def done(self, now: datetime) -> None:
        """Note a success at `now`; the next is due `every` later."""
        self._next = now + self._every
