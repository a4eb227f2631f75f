"""What the console benchmark adds to a pre-filled history so every page has work: settlements
in review and one left `submitted`, open breaks from a finished reconciliation run, dead and
parked webhooks, and a long audit trail; and the sample of settlements the searches look for.

Settlements are booked and moved through the ledger's and the transitions' own code, breaks
through reconciliation's store; webhooks and audit rows, which only their own services write
one at a time, go in by one INSERT ... SELECT each, as the pre-fill's history does.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

import asyncpg

from services.domain.breaks import BreakType
from services.domain.reconciliation import Break, RunKind
from services.domain.settlement import SettlementStatus
from services.platform.service_settings import Settings
from services.reconcile import store
from services.settlement.transitions import Move, apply_transitions
from tools.bench.database import book_settlements

REVIEW = 200  # settlements waiting in needs_review
BREAKS = 500  # open breaks, half status drifts, half missing at the rail
DEAD, PARKED = 300, 100  # webhooks given up on, and waiting for their settlement
AUDIT = 100_000  # operator actions, ten seconds apart
SAMPLE = 50  # settlements the searches and the story look for, one per request
TENANT = "console-bench"
REASON = "rail timed out after the payout was sent; an operator must look"

# A sample spread over the whole history (a block of the table in a thousand), not its tail.
SAMPLE_SETTLEMENTS = """
SELECT id, reference, payee, destination, rail_reference FROM settlements TABLESAMPLE SYSTEM (1)
 WHERE rail_reference IS NOT NULL LIMIT $1
"""
WEBHOOKS = """
INSERT INTO inbox_events (rail, rail_event_id, event_type, object_id, change_key, payload,
                          status, attempts, next_attempt_at, reason, received_at,
                          received_month)
SELECT 'stripe', 'evt_bench_' || $1::text || '_' || n, 'transfer.created', 'tr_bench_' || $1 || n,
       'tr_bench_' || $1 || n || ':transfer.created',
       convert_to('{"type": "transfer.created"}', 'UTF8'), $1, 5,
       CASE WHEN $1 = 'parked' THEN $3::timestamptz + interval '1 hour' END, $4, at,
       date_trunc('month', at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
  FROM generate_series(1, $2::int) AS n,
       LATERAL (SELECT $3::timestamptz - n * interval '1 minute' AS at) AS t
"""
AUDIT_ROWS = """
INSERT INTO operator_actions (actor, action, target, detail, occurred_at)
SELECT 'ops-' || n % 5, (ARRAY['review.resolve', 'break.resolve', 'webhook.replay'])[n % 3 + 1],
       s.id::text, jsonb_build_object('reason', 'checked with the rail', 'n', n),
       $2::timestamptz - n * interval '10 seconds'
  FROM (SELECT id, row_number() OVER () AS n FROM settlements LIMIT $1) AS s
 ORDER BY n DESC
"""
DEEP_AUDIT_ID = "SELECT id FROM operator_actions ORDER BY id LIMIT 1 OFFSET $1"


class Sample(NamedTuple):
    """A settlement the searches look for, by each of the fields they match."""

    id: str
    reference: str
    payee: str
    destination: str
    rail_reference: str


class Seeded(NamedTuple):
    """What the pages will find."""

    samples: list[Sample]
    deep_audit_id: int  # an action id 90% of the way down the trail: a deep keyset page


async def seed(pool: asyncpg.Pool, settings: Settings) -> Seeded:
    """Add the queues' and the audit trail's rows (see the module); what the pages will find."""
    now = datetime.now(UTC)
    ids = await book_settlements(pool, settings, TENANT, "console-bench", REVIEW + 1)
    moves = [Move(uuid.UUID(sid), SettlementStatus.DISPATCHING) for sid in ids]
    moves += [Move(uuid.UUID(sid), SettlementStatus.NEEDS_REVIEW, REASON) for sid in ids[1:]]
    # One is left submitted, for the overview's oldest submitted and the reconciler's gauge.
    moves.append(Move(uuid.UUID(ids[0]), SettlementStatus.SUBMITTED, rail_reference="tr_bench_0"))
    async with pool.acquire() as conn, conn.transaction():
        await apply_transitions(conn, moves, actor="relay-bench", now=now)
    rows = await pool.fetch(SAMPLE_SETTLEMENTS, max(SAMPLE, BREAKS))
    await _breaks(pool, [str(r["id"]) for r in rows], [str(r["rail_reference"]) for r in rows], now)
    await pool.execute(WEBHOOKS, "dead", DEAD, now, "no settlement has this rail reference")
    await pool.execute(WEBHOOKS, "parked", PARKED, now, "no settlement has this rail reference")
    await pool.execute(AUDIT_ROWS, AUDIT, now)
    await pool.execute("ANALYZE")
    deep = await pool.fetchval(DEEP_AUDIT_ID, AUDIT // 10)
    samples = [
        Sample(str(r["id"]), r["reference"], r["payee"], r["destination"], r["rail_reference"])
        for r in rows[:SAMPLE]
    ]
    return Seeded(samples, int(deep))


async def _breaks(
    pool: asyncpg.Pool, settlements: list[str], objects: list[str], now: datetime
) -> None:
    """Open breaks about the sampled settlements, stored by a finished run."""
    run_id = await store.start_run(pool, RunKind.INTRADAY, now - timedelta(hours=1), now, now)
    found = []
    for n in range(BREAKS):
        sid, obj = settlements[n % len(settlements)], objects[n % len(objects)]
        if n % 2:
            found.append(
                Break(BreakType.STATUS_DRIFT, sid, obj, "status", "submitted", "paid", None, None)
            )
        else:
            found.append(
                Break(
                    BreakType.MISSING_AT_RAIL, sid, f"{obj}_{n}", "object", 700, None, None, "USD"
                )
            )
    await store.upsert_breaks(pool, run_id, found, now)
    for source in ("ledger", "rail"):
        await store.record_source(
            pool, run_id, source, read_at=now, rows=len(found), data_expected=True, error=None
        )
    await store.finish_run(pool, run_id, now)
