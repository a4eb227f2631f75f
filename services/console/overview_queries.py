"""The overview's figures, each read at a cost that does not grow with the settlements table.

- settlements per status: PostgreSQL's own statistics (`pg_stats` frequencies times
  `pg_class.reltuples`), an estimate as of the last ANALYZE: counting would read the table,
  and an index on status would make every status move a non-HOT update (migration 0008);
- rail instructions pending and processing: exact, through `rail_instructions_due`, which
  holds those rows only; settlements under review: exact, through the transitions into
  review (`settlement_transitions_into_review`, migration 0015), as the review queue reads;
- throughput: the last hour's transitions, counted through
  `settlement_transitions_occurred_at`; accepted->paid latency: the first LATENCY_SAMPLE paid
  of each five minutes, each joined to its settlement by key;
- the oldest settlement still `submitted` among those submitted in the last hour (older ones
  are reconciliation's: its re-checks and status-drift breaks);
- outbox lag: `outbox_unpublished` holds unpublished rows only;
- inbox parked, dead and mismatch: `inbox_events_unsettled` (migration 0015);
- open breaks by type: `reconciliation_breaks_open_by_type`;
- the last reconciliation run: the newest row by id.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.settlement import SettlementStatus

WINDOW = timedelta(hours=1)
LATENCY_BUCKET = timedelta(minutes=5)
LATENCY_SAMPLE = 1000  # settlements paid per bucket whose latency is measured

STATUS_STATISTICS = """
SELECT c.reltuples::bigint AS total, s.most_common_vals::text::text[] AS vals,
       s.most_common_freqs AS freqs
  FROM pg_class c
  LEFT JOIN pg_stats s
    ON s.schemaname = current_schema() AND s.tablename = 'settlements' AND s.attname = 'status'
 WHERE c.oid = 'settlements'::regclass
"""
OPEN_INSTRUCTIONS = """
SELECT status, count(*) AS n FROM rail_instructions
 WHERE status IN ('pending', 'processing') GROUP BY status
"""
UNDER_REVIEW = """
SELECT count(*) FROM (SELECT DISTINCT settlement_id FROM settlement_transitions
                       WHERE to_status = 'needs_review') AS referred
 CROSS JOIN LATERAL (SELECT 1 FROM settlements
                      WHERE id = referred.settlement_id AND status = 'needs_review' LIMIT 1) still
"""
THROUGHPUT = """
SELECT date_bin('1 minute', occurred_at, $1) AS minute, to_status, count(*) AS n
  FROM settlement_transitions
 WHERE occurred_at >= $1 AND occurred_at < $2 AND to_status IN ('accepted', 'paid')
 GROUP BY 1, 2
"""
# The first LATENCY_SAMPLE settlements paid in each bucket, each looked up by key (LATERAL ...
# LIMIT keeps the planner from reading the settlements table whole when its statistics say
# few match), so the chart costs the same at 1 or 1,000 settlements a second.
LATENCY = """
SELECT b.bucket, count(*) AS n,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY p.occurred_at - s.created_at) AS p50,
       percentile_cont(0.99) WITHIN GROUP (ORDER BY p.occurred_at - s.created_at) AS p99
  FROM generate_series($1::timestamptz, $2::timestamptz - $3::interval, $3::interval) AS b(bucket)
 CROSS JOIN LATERAL (SELECT settlement_id, occurred_at FROM settlement_transitions
                      WHERE occurred_at >= b.bucket AND occurred_at < b.bucket + $3::interval
                        AND occurred_at < $2 AND to_status = 'paid'
                      ORDER BY occurred_at LIMIT $4) p
 CROSS JOIN LATERAL (SELECT created_at FROM settlements WHERE id = p.settlement_id LIMIT 1) s
 GROUP BY b.bucket
"""
OLDEST_SUBMITTED = """
SELECT t.settlement_id, t.occurred_at
  FROM settlement_transitions t
 CROSS JOIN LATERAL (SELECT 1 FROM settlements
                      WHERE id = t.settlement_id AND status = 'submitted' LIMIT 1) still
 WHERE t.occurred_at >= $1 AND t.to_status = 'submitted'
 ORDER BY t.occurred_at LIMIT 1
"""
OUTBOX = """
SELECT count(*) AS unpublished,
       (SELECT created_at FROM outbox WHERE published_at IS NULL ORDER BY id LIMIT 1) AS oldest
  FROM outbox WHERE published_at IS NULL
"""
INBOX = """
SELECT status, count(*) AS n FROM inbox_events
 WHERE status IN ('parked', 'dead', 'mismatch') GROUP BY status
"""
OPEN_BREAKS = """
SELECT break_type, count(*) AS n FROM reconciliation_breaks WHERE status = 'open'
 GROUP BY break_type ORDER BY break_type
"""
LAST_RUN = """
SELECT id, kind, status, started_at, finished_at, error FROM reconciliation_runs
 ORDER BY id DESC LIMIT 1
"""


class Overview(NamedTuple):
    """What the overview page shows, read at `now`."""

    now: datetime
    total: int | None  # settlements, as the statistics estimate them; None before ANALYZE
    by_status: dict[str, int | None]  # estimated; None: too few to show in the statistics
    instructions: dict[str, int]  # pending and processing, exact
    under_review: int  # settlements in needs_review, exact
    throughput: dict[datetime, dict[str, int]]  # minute -> {"accepted": n, "paid": n}
    latency: dict[datetime, tuple[int, float, float]]  # bucket -> (measured, p50 s, p99 s)
    oldest_submitted: asyncpg.Record | None  # settlement_id, occurred_at
    outbox_unpublished: int
    outbox_oldest: datetime | None
    inbox: dict[str, int]  # parked, dead, mismatch
    open_breaks: dict[str, int]  # break type -> open
    last_run: asyncpg.Record | None


def estimates(row: asyncpg.Record | None) -> tuple[int | None, dict[str, int | None]]:
    """The settlements' estimated total and count per status from the statistics' row."""
    total = row["total"] if row is not None and row["total"] >= 0 else None
    by_status: dict[str, int | None] = {str(s): None for s in SettlementStatus}
    if row is not None and total is not None and row["vals"] is not None:
        for value, freq in zip(row["vals"], row["freqs"], strict=True):
            by_status[value] = round(freq * total)
    return total, by_status


async def read_overview(pool: asyncpg.Pool, now: datetime) -> Overview:
    """Every figure of the overview as of `now`."""
    start = now - WINDOW
    with unavailable_when_down("PostgreSQL is unreachable; the overview could not be read"):
        async with pool.acquire() as conn, conn.transaction(readonly=True):
            # Every query here reads a few index pages; compiling one (JIT, which the
            # planner's estimate of the latency's twelve lateral reads would ask for) costs
            # far more than it runs.
            await conn.execute("SET LOCAL jit = off")
            total, by_status = estimates(await conn.fetchrow(STATUS_STATISTICS))
            counts = await _counts(conn)
            throughput: dict[datetime, dict[str, int]] = {}
            for r in await conn.fetch(THROUGHPUT, start, now):
                throughput.setdefault(r["minute"], {})[r["to_status"]] = r["n"]
            latency = {
                r["bucket"]: (r["n"], r["p50"].total_seconds(), r["p99"].total_seconds())
                for r in await conn.fetch(LATENCY, start, now, LATENCY_BUCKET, LATENCY_SAMPLE)
            }
            oldest = await conn.fetchrow(OLDEST_SUBMITTED, start)
            outbox = await conn.fetchrow(OUTBOX)
            last_run = await conn.fetchrow(LAST_RUN)
    return Overview(
        now,
        total,
        by_status,
        counts["instructions"],
        counts["under_review"],
        throughput,
        latency,
        oldest,
        outbox["unpublished"],
        outbox["oldest"],
        counts["inbox"],
        counts["breaks"],
        last_run,
    )


async def _counts(conn: asyncpg.Connection) -> dict[str, Any]:
    return {
        "instructions": {r["status"]: r["n"] for r in await conn.fetch(OPEN_INSTRUCTIONS)},
        "inbox": {r["status"]: r["n"] for r in await conn.fetch(INBOX)},
        "breaks": {r["break_type"]: r["n"] for r in await conn.fetch(OPEN_BREAKS)},
        "under_review": await conn.fetchval(UNDER_REVIEW),
    }
