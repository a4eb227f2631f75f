"""SQL of the `inbox_events` table, which the inbox owns: store first, claim, record outcomes.

Every write is guarded by the status it expects, and the claim takes rows with
`FOR UPDATE SKIP LOCKED`, so any number of inbox replicas can work the same table.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import asyncpg

from services.adapters.postgres.history_months import month_start
from services.domain.rail_event import InboxStatus
from services.domain.webhook_match import Difference, Reported
from services.inbox.errors import ClaimedEventChanged
from services.inbox.events import stored_event_facts

RAIL = "stripe"

INSERT_REJECTED = """
INSERT INTO inbox_events (rail, payload, status, reason, received_at, received_month)
VALUES ($1, $2, 'rejected', $3, $4, $5)
RETURNING id
"""
# What a claim reads of a row: the fields of StoredEvent, and the body, read again for what
# it reports and when (`events.stored_event_facts`): the row keeps no copy of it.
_CLAIMED = """
SELECT id, status, rail_event_id, event_type, object_id, settlement_id, attempts, received_at,
       amount_reversed, payload
  FROM inbox_events
"""
# Up to $2 due rows, oldest first; a row another replica holds is skipped, not waited for.
CLAIM_DUE_MANY = (
    _CLAIMED
    + """ WHERE status IN ('received', 'parked') AND next_attempt_at <= $1
 ORDER BY next_attempt_at, id
 LIMIT $2
   FOR UPDATE SKIP LOCKED
"""
)
# One row just stored by this transaction, locked for applying (reconciliation's heal).
CLAIM_STORED = (
    _CLAIMED
    + """ WHERE rail = $1 AND rail_event_id = $2 AND status = 'received'
   FOR UPDATE
"""
)
# A mismatch gives up its change key: the change it claimed was not this event's to make, and
# the rail's own event for it (or reconciliation's proof) must still be stored and applied.
# The rail's event arriving while the mismatch is still `received` is answered as its twin and
# not stored; the settlement then drifts from the rail, and reconciliation heals it.
# The rows of one month, found in that month's partition alone: with the month a single
# parameter, PostgreSQL prunes the other months before it plans the join, so the update is an
# index probe per row; with each row's month in the unnest instead, the planner costs a probe
# of every month and, on a young partition, prefers scanning them all.
RECORD_MONTH = """
UPDATE inbox_events AS e
   SET status = u.status, attempts = e.attempts + 1, reason = u.reason,
       settlement_id = coalesce(u.settlement_id, e.settlement_id),
       applied_at = CASE WHEN u.status = 'applied' THEN $1::timestamptz END,
       next_attempt_at = u.due, mismatch = u.mismatch::jsonb,
       change_key = CASE WHEN u.status = 'mismatch' THEN NULL ELSE e.change_key END
  FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::uuid[], $8::timestamptz[],
              $9::text[])
       AS u(id, claimed, status, reason, settlement_id, due, mismatch)
 WHERE e.received_month = $2 AND e.id = u.id AND e.status = u.claimed
"""
OLDEST_PARKED = "SELECT min(received_at) FROM inbox_events WHERE status = 'parked'"


class StoredEvent(NamedTuple):
    """An inbox row claimed for applying."""

    id: int  # inbox_events.id
    rail_event_id: str
    event_type: str
    object_id: str | None
    settlement_id: uuid.UUID | None  # from metadata until applied, then the matched settlement
    attempts: int  # attempts so far, before this one
    status: InboxStatus  # the status it was claimed in: received or parked
    received_at: datetime
    amount_reversed: int | None = None  # what a reversal reported as back in all (RailEvent)
    reported: Reported | None = None  # what the event says of its object (RailEvent)
    created: int | None = None  # Unix seconds the rail created the event, if it says


async def store_rejected(
    conn: asyncpg.Connection | asyncpg.Pool, payload: bytes, reason: str, now: datetime
) -> int:
    """Keep a signed body that is not an event, with the reason, for an operator to read."""
    return int(await conn.fetchval(INSERT_REJECTED, RAIL, payload, reason, now, month_start(now)))


def _stored(row: asyncpg.Record) -> StoredEvent:
    reported, created = stored_event_facts(row["payload"])
    return StoredEvent(
        row["id"],
        row["rail_event_id"],
        row["event_type"],
        row["object_id"],
        row["settlement_id"],
        row["attempts"],
        InboxStatus(row["status"]),
        row["received_at"],
        row["amount_reversed"],
        reported,
        created,
    )


async def claim_due_many(conn: asyncpg.Connection, now: datetime, limit: int) -> list[StoredEvent]:
    """Lock up to `limit` of the oldest received or due parked rows in the caller's
    transaction, oldest first."""
    return [_stored(row) for row in await conn.fetch(CLAIM_DUE_MANY, now, limit)]


async def claim_stored(conn: asyncpg.Connection, rail_event_id: str) -> StoredEvent | None:
    """Lock the received row of `rail_event_id` in the caller's transaction; None if there is
    no such row awaiting its first attempt."""
    row = await conn.fetchrow(CLAIM_STORED, RAIL, rail_event_id)
    return _stored(row) if row is not None else None


class Recorded(NamedTuple):
    """The outcome of one attempt on a claimed row, for `record_many`."""

    event: StoredEvent
    status: InboxStatus
    reason: str | None
    settlement_id: uuid.UUID | None
    next_attempt_at: datetime | None
    mismatch: Sequence[Difference] = ()  # for a `mismatch`: each field with both sides


def mismatch_json(found: Sequence[Difference]) -> str | None:
    """The `mismatch` column of a row: [{"field", "expected", "received"}, ...], or None."""
    return json.dumps([d._asdict() for d in found]) if found else None


async def record_many(conn: asyncpg.Connection, outcomes: list[Recorded], now: datetime) -> None:
    """Write the outcome of one attempt on each claimed row, one statement per month the rows
    were received in (nearly always one), each row guarded by the status it was claimed in."""
    months: dict[datetime, list[Recorded]] = {}
    for o in outcomes:
        months.setdefault(month_start(o.event.received_at), []).append(o)
    for month, rows in months.items():
        done = await conn.execute(
            RECORD_MONTH,
            now,
            month,
            [o.event.id for o in rows],
            [o.event.status for o in rows],
            [o.status for o in rows],
            [o.reason for o in rows],
            [o.settlement_id for o in rows],
            [o.next_attempt_at for o in rows],
            [mismatch_json(o.mismatch) for o in rows],
        )
        if done != f"UPDATE {len(rows)}":
            raise ClaimedEventChanged(f"inbox events changed while claimed ({done} of {len(rows)})")


async def oldest_parked(conn: asyncpg.Connection | asyncpg.Pool) -> datetime | None:
    """When the oldest parked event was received, or None if none is parked."""
    value: datetime | None = await conn.fetchval(OLDEST_PARKED)
    return value
