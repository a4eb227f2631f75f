"""SQL of the `inbox_events` table, which the inbox owns: store first, claim, record outcomes.

Every write is guarded by the status it expects, and the claim takes rows with
`FOR UPDATE SKIP LOCKED`, so any number of inbox replicas can work the same table.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import NamedTuple

import asyncpg

from services.adapters.postgres.history_months import month_start
from services.domain.rail_event import InboxStatus
from services.domain.webhook_match import Difference, Reported
from services.inbox.errors import ClaimedEventChanged
from services.inbox.events import stored_event_facts
from services.inbox.kept_body import kept, received

RAIL = "stripe"

# How long after an event was first received the rail may still deliver it, or a twin of its
# change, again. Stripe retries an undelivered event for up to three days and keeps events 30
# days, within which one can be fetched and sent again; a day more for clocks. Each month's
# partition dedupes by constraint; an arrival also looks in the months since this long ago.
REDELIVERY_HORIZON = timedelta(days=31)
# How far apart the clocks that stamp arrivals may be: within this of the turn of a month, a
# row stamped by a clock ahead of ours may be in the next month already, so it is looked in.
CLOCKS_APART = timedelta(minutes=10)

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
# A row that will never apply its change gives up its change key: a mismatch (the change was
# not this event's to make) and a dead row (no settlement ever took it); the next event with the
# key is stored and applied. A parked row keeps its key, so two event ids of one change still
# apply once, but an event of another id arriving for that change meanwhile is refused for now
# (`held_by_parked`, `ChangePending`), not answered as a duplicate: a signed but wrong event
# parked for an object id must not make the rail's own event for the change a duplicate that
# is never applied. A row still `received` keeps its key too: the rail's event arriving before
# it is judged (a moment, as stored rows are applied in the storing transaction) is answered
# as its twin and not stored; the settlement then drifts from the rail, and reconciliation
# heals it.
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
       change_key = CASE WHEN u.status IN ('mismatch', 'dead') THEN NULL
                         ELSE e.change_key END
  FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[], $7::uuid[], $8::timestamptz[],
              $9::text[])
       AS u(id, claimed, status, reason, settlement_id, due, mismatch)
 WHERE e.received_month = $2 AND e.id = u.id AND e.status = u.claimed
"""
OLDEST_PARKED = "SELECT min(received_at) FROM inbox_events WHERE status = 'parked'"
# What the worker's watch samples each second: both read an index of their rows alone (the
# pending one, and the dead one of migration 0028), never the table.
WATCHED = f"""
SELECT ({OLDEST_PARKED}) AS oldest_parked,
       (SELECT count(*) FROM inbox_events WHERE status = 'dead') AS dead
"""
# Of events not stored as duplicates ($2 change keys, $3 their event ids), those whose change
# a parked row of another event id holds, in the months from $4 to before $5.
HELD_BY_PARKED = """
SELECT k.e FROM unnest($2::text[], $3::text[]) AS k(c, e)
 WHERE EXISTS (SELECT 1 FROM inbox_events x
                WHERE x.rail = $1 AND x.change_key = k.c AND x.status = 'parked'
                  AND x.rail_event_id <> k.e
                  AND x.received_month >= $4 AND x.received_month < $5)
"""


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
    stored = kept(payload)
    return int(await conn.fetchval(INSERT_REJECTED, RAIL, stored, reason, now, month_start(now)))


def _stored(row: asyncpg.Record) -> StoredEvent:
    reported, created = stored_event_facts(received(row["payload"]))
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


async def held_by_parked(
    conn: asyncpg.Connection | asyncpg.Pool,
    changes: Sequence[tuple[str, str]],
    earliest: datetime,
    latest: datetime,
) -> set[str]:
    """Of `changes` ((change key, event id) of events received from `earliest` to `latest`
    and not stored), the event ids whose change a parked row of another event id holds, in
    the months since the redelivery horizon, their own included."""
    if not changes:
        return set()
    keys, ids = [c for c, _ in changes], [e for _, e in changes]
    since = month_start(earliest - REDELIVERY_HORIZON)
    before = month_start(month_start(latest + CLOCKS_APART) + timedelta(days=32))
    return {r["e"] for r in await conn.fetch(HELD_BY_PARKED, RAIL, keys, ids, since, before)}


async def watched(conn: asyncpg.Connection | asyncpg.Pool) -> tuple[datetime | None, int]:
    """When the oldest parked event was received (None if none is parked), and how many
    events are dead now."""
    row = await conn.fetchrow(WATCHED)  # always one row: a SELECT without FROM
    return (row["oldest_parked"], int(row["dead"])) if row else (None, 0)


def months_looked_in(earliest: datetime, latest: datetime) -> tuple[datetime, datetime]:
    """The months (from, before) in which arrivals from `earliest` to `latest` look for their
    event or change beyond their own month's keys: back to the redelivery horizon, and up to
    their own month, or through the next one near its turn (clocks apart)."""
    since = month_start(earliest - REDELIVERY_HORIZON)
    own, ahead = month_start(latest), month_start(latest + CLOCKS_APART)
    return since, own if ahead == own else month_start(ahead + timedelta(days=32))
