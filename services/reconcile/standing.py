"""What the reconciler reads back from reconciliation's records: the standing of the breaks,
the heartbeat, a run's evidence, and which end-of-day run completed last.

Read from the store, not remembered, so a restarted or second replica says the same as the
one that wrote them. PostgreSQL out of reach raises StoreUnavailable.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.breaks import BreakType

OPEN_BY_TYPE = """
SELECT break_type, count(*) AS open, min(first_seen) AS oldest
  FROM reconciliation_breaks WHERE status = 'open' GROUP BY break_type
"""
# A settlement's updated_at is when it became submitted: any later change leaves the status.
# One sequential read of the table per round: no index holds only open settlements, and one
# on status would make every status move a non-HOT update (migration 0008). The method is
# its rail instruction's, looked up by key for the submitted rows only (a subplan, never a
# join that would read every instruction).
OLDEST_SUBMITTED = """
SELECT rail, method, min(updated_at) AS since
  FROM (SELECT s.rail, s.updated_at,
               (SELECT i.method FROM rail_instructions i WHERE i.settlement_id = s.id) AS method
          FROM settlements s WHERE s.status = 'submitted') AS submitted
 GROUP BY rail, method
"""
LAST_SUCCESS = "SELECT max(finished_at) FROM reconciliation_runs WHERE status = 'completed'"
SOURCE_ROWS = "SELECT source, rows_returned FROM reconciliation_sources WHERE run_id = $1"
# Only a run made after its day closed counts: `settle reconcile --day` of a day still going
# on read part of it, so that day's end of day is still to come.
LAST_END_OF_DAY = """
SELECT max(window_end) FROM reconciliation_runs
 WHERE kind = 'end_of_day' AND status = 'completed' AND started_at >= window_end
"""


class Standing(NamedTuple):
    """The stored breaks and runs as the metrics show them."""

    open_by_type: dict[BreakType, int]  # every type, 0 when none is open
    oldest_open: datetime | None  # first_seen of the oldest open break
    last_success: datetime | None  # when the latest completed run finished
    # By (rail, method): when the settlement longest in `submitted` got there.
    oldest_submitted: dict[tuple[str, str], datetime]


async def standing(conn: asyncpg.Connection | asyncpg.Pool) -> Standing:
    """Open breaks by type, the oldest one's first_seen, the latest completed run's end, and
    since when the oldest `submitted` settlement of each rail and method has been so."""
    with unavailable_when_down("PostgreSQL is unreachable; the breaks were not counted"):
        rows = await conn.fetch(OPEN_BY_TYPE)
        last: datetime | None = await conn.fetchval(LAST_SUCCESS)
        submitted = await conn.fetch(OLDEST_SUBMITTED)
    counts = dict.fromkeys(BreakType, 0) | {BreakType(r["break_type"]): r["open"] for r in rows}
    oldest = min((r["oldest"] for r in rows), default=None)
    # A submitted settlement always has its instruction; "unknown" should one ever lack it.
    since = {(r["rail"], r["method"] or "unknown"): r["since"] for r in submitted}
    return Standing(counts, oldest, last, since)


async def source_rows(conn: asyncpg.Connection | asyncpg.Pool, run_id: int) -> dict[str, int]:
    """Rows each source returned to run `run_id`, as its evidence records them."""
    with unavailable_when_down("PostgreSQL is unreachable; the run's sources were not read"):
        rows = await conn.fetch(SOURCE_ROWS, run_id)
    return {r["source"]: r["rows_returned"] for r in rows}


async def last_end_of_day(conn: asyncpg.Connection | asyncpg.Pool) -> date | None:
    """The latest UTC day whose end-of-day run completed after the day closed; None if none."""
    with unavailable_when_down("PostgreSQL is unreachable; no run was read"):
        ended: datetime | None = await conn.fetchval(LAST_END_OF_DAY)
    return None if ended is None else (ended - timedelta(days=1)).date()
