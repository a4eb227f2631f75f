"""SQL of the `inbox_events` table, which the inbox owns: store first, claim, record outcomes.

Every write is guarded by the status it expects, and the claim takes rows with
`FOR UPDATE SKIP LOCKED`, so any number of inbox replicas can work the same table.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import NamedTuple

import asyncpg

from services.inbox.decision import InboxStatus, ignore_reason, signal_of
from services.inbox.errors import ClaimedEventChanged
from services.inbox.events import RailEvent

RAIL = "stripe"

INSERT_EVENT = """
INSERT INTO inbox_events (rail, rail_event_id, event_type, object_id, change_key, settlement_id,
                          payload, status, reason, received_at, next_attempt_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
ON CONFLICT DO NOTHING
RETURNING id
"""
INSERT_REJECTED = """
INSERT INTO inbox_events (rail, payload, status, reason, received_at)
VALUES ($1, $2, 'rejected', $3, $4)
RETURNING id
"""
# One due row, oldest first; a row another replica holds is skipped, not waited for.
CLAIM_DUE = """
SELECT id, status, rail_event_id, event_type, object_id, settlement_id, attempts, received_at
  FROM inbox_events
 WHERE status IN ('received', 'parked') AND next_attempt_at <= $1
 ORDER BY next_attempt_at
 LIMIT 1
   FOR UPDATE SKIP LOCKED
"""
# The same for a batch: up to $2 due rows, oldest first.
CLAIM_DUE_MANY = """
SELECT id, status, rail_event_id, event_type, object_id, settlement_id, attempts, received_at
  FROM inbox_events
 WHERE status IN ('received', 'parked') AND next_attempt_at <= $1
 ORDER BY next_attempt_at, id
 LIMIT $2
   FOR UPDATE SKIP LOCKED
"""
RECORD = """
UPDATE inbox_events
   SET status = $3::text, attempts = attempts + 1, reason = $4,
       settlement_id = coalesce($5, settlement_id),
       applied_at = CASE WHEN $3 = 'applied' THEN $6::timestamptz END, next_attempt_at = $7
 WHERE id = $1 AND status = $2
"""
RECORD_MANY = """
UPDATE inbox_events AS e
   SET status = u.status, attempts = e.attempts + 1, reason = u.reason,
       settlement_id = coalesce(u.settlement_id, e.settlement_id),
       applied_at = CASE WHEN u.status = 'applied' THEN $1::timestamptz END,
       next_attempt_at = u.due
  FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[], $6::uuid[], $7::timestamptz[])
       AS u(id, claimed, status, reason, settlement_id, due)
 WHERE e.id = u.id AND e.status = u.claimed
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


async def store_event(
    conn: asyncpg.Connection | asyncpg.Pool, event: RailEvent, payload: bytes, now: datetime
) -> tuple[int | None, InboxStatus]:
    """Insert `event` unless its id or its change is stored already; (row id or None, status)."""
    if signal_of(event.event_type) is None:
        status, reason = InboxStatus.IGNORED, ignore_reason(event.event_type)
    else:
        status, reason = InboxStatus.RECEIVED, None
    row_id = await conn.fetchval(
        INSERT_EVENT, RAIL, event.event_id, event.event_type, event.object_id, event.change_key,
        event.settlement_id, payload, status, reason, now,
    )  # fmt: skip
    return row_id, status


async def store_rejected(
    conn: asyncpg.Connection | asyncpg.Pool, payload: bytes, reason: str, now: datetime
) -> int:
    """Keep a signed body that is not an event, with the reason, for an operator to read."""
    return int(await conn.fetchval(INSERT_REJECTED, RAIL, payload, reason, now))


def _stored(row: asyncpg.Record) -> StoredEvent:
    return StoredEvent(
        row["id"], row["rail_event_id"], row["event_type"], row["object_id"],
        row["settlement_id"], row["attempts"], InboxStatus(row["status"]), row["received_at"],
    )  # fmt: skip


async def claim_due(conn: asyncpg.Connection, now: datetime) -> StoredEvent | None:
    """Lock the oldest received or due parked row in the caller's transaction, if any."""
    row = await conn.fetchrow(CLAIM_DUE, now)
    return None if row is None else _stored(row)


async def claim_due_many(conn: asyncpg.Connection, now: datetime, limit: int) -> list[StoredEvent]:
    """Lock up to `limit` of the oldest received or due parked rows, oldest first."""
    return [_stored(row) for row in await conn.fetch(CLAIM_DUE_MANY, now, limit)]


async def record(
    conn: asyncpg.Connection,
    event: StoredEvent,
    status: InboxStatus,
    *,
    reason: str | None,
    now: datetime,
    settlement_id: uuid.UUID | None = None,
    next_attempt_at: datetime | None = None,
) -> None:
    """Write the outcome of one attempt on a claimed row (guarded by its claimed status)."""
    done = await conn.execute(
        RECORD, event.id, event.status, status, reason, settlement_id, now, next_attempt_at
    )
    if done != "UPDATE 1":
        raise ClaimedEventChanged(f"inbox event {event.id} changed while claimed")


class Recorded(NamedTuple):
    """The outcome of one attempt on a claimed row, for `record_many`."""

    event: StoredEvent
    status: InboxStatus
    reason: str | None
    settlement_id: uuid.UUID | None
    next_attempt_at: datetime | None


async def record_many(conn: asyncpg.Connection, outcomes: list[Recorded], now: datetime) -> None:
    """`record` for many claimed rows in one statement."""
    done = await conn.execute(
        RECORD_MANY, now, [o.event.id for o in outcomes], [o.event.status for o in outcomes],
        [o.status for o in outcomes], [o.reason for o in outcomes],
        [o.settlement_id for o in outcomes], [o.next_attempt_at for o in outcomes],
    )  # fmt: skip
    if done != f"UPDATE {len(outcomes)}":
        raise ClaimedEventChanged(f"inbox events changed while claimed ({done} of {len(outcomes)})")


async def oldest_parked(conn: asyncpg.Connection | asyncpg.Pool) -> datetime | None:
    """When the oldest parked event was received, or None if none is parked."""
    value: datetime | None = await conn.fetchval(OLDEST_PARKED)
    return value
