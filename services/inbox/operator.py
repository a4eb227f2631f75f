"""What an operator may do with the inbox: list events by status, replay a dead or parked one.

A replay puts the row back to `received` with a fresh attempt budget and writes an
`operator_actions` row (who, what, the status and reason it had) in the same transaction.
A `mismatch` (an event whose object differs from what its settlement sent) is listed with
both sides of each differing field and never replayed: the rail's object would differ again,
so it is a break to settle with the rail (reconciliation, `settle breaks`), not to apply.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import asyncpg

from services.domain.rail_event import REPLAYABLE, InboxStatus
from services.inbox.errors import MismatchNotReplayable, NotFound, NotReplayable

MAX_PAGE = 200

LIST_EVENTS = """
SELECT id, rail, rail_event_id, event_type, object_id, settlement_id, status, attempts,
       next_attempt_at, reason, received_at, applied_at, mismatch
  FROM inbox_events
 WHERE status = $1 AND id > $2
 ORDER BY id
 LIMIT $3
"""
FIND_FOR_REPLAY = """
SELECT id, status, reason FROM inbox_events
 WHERE id = $1 OR (rail_event_id = $2 AND rail = 'stripe')
 LIMIT 1
   FOR UPDATE
"""
REPLAY = """
UPDATE inbox_events SET status = 'received', attempts = 0, next_attempt_at = $3, reason = NULL
 WHERE id = $1 AND status = $2
"""
AUDIT = """
INSERT INTO operator_actions (actor, action, target, detail, occurred_at, approved_by)
VALUES ($1, 'inbox.replay', $2, $3::jsonb, $4, $5)
"""


def _wire(row: asyncpg.Record) -> dict[str, Any]:
    item = dict(row)
    for key in ("next_attempt_at", "received_at", "applied_at"):
        item[key] = item[key].isoformat() if item[key] else None
    item["settlement_id"] = str(item["settlement_id"]) if item["settlement_id"] else None
    # jsonb comes as its text: [{"field", "expected", "received"}, ...] for a mismatch
    item["mismatch"] = json.loads(item["mismatch"]) if item["mismatch"] else None
    return item


async def list_events(
    conn: asyncpg.Connection | asyncpg.Pool, status: InboxStatus, cursor: int, limit: int
) -> dict[str, Any]:
    """A page of events in `status` after row id `cursor`: {"data": [...], "next_cursor"}."""
    rows = await conn.fetch(LIST_EVENTS, status, cursor, min(limit, MAX_PAGE))
    data = [_wire(r) for r in rows]
    full = len(rows) == min(limit, MAX_PAGE)
    return {"data": data, "next_cursor": str(rows[-1]["id"]) if rows and full else None}


FIND = """
SELECT id, status FROM inbox_events
 WHERE id = $1 OR (rail_event_id = $2 AND rail = 'stripe')
 LIMIT 1
"""


def _replayable(event: str, status: InboxStatus) -> InboxStatus:
    """`status` if an event in it may be replayed; the refusal otherwise."""
    if status is InboxStatus.MISMATCH:
        raise MismatchNotReplayable(
            f"inbox event {event} does not match what its settlement sent; a mismatch is "
            "a break for reconciliation, never applied"
        )
    if status not in REPLAYABLE:
        raise NotReplayable(f"inbox event {event} is {status}; only dead or parked replay")
    return status


async def replayable_id(conn: asyncpg.Connection, event: str) -> int:
    """The row id of `event` (a row id or a rail event id) if it may be replayed now; NotFound,
    NotReplayable or MismatchNotReplayable otherwise. Nothing is locked or changed."""
    row = await conn.fetchrow(FIND, int(event) if event.isdigit() else 0, event)
    if row is None:
        raise NotFound(f"no inbox event {event}")
    _replayable(event, InboxStatus(row["status"]))
    return int(row["id"])


async def replay(
    conn: asyncpg.Connection, event: str, actor: str, now: datetime, approver: str | None = None
) -> int:
    """Send a dead or parked event (row id or rail event id) back to the worker, audited (with
    `approver`, the second operator who approved `actor`'s proposal, if any); its row id."""
    row_id = int(event) if event.isdigit() else 0
    async with conn.transaction():
        row = await conn.fetchrow(FIND_FOR_REPLAY, row_id, event)
        if row is None:
            raise NotFound(f"no inbox event {event}")
        status = _replayable(event, InboxStatus(row["status"]))
        await conn.execute(REPLAY, row["id"], status, now)
        detail = {"from_status": str(status), "reason": row["reason"]}
        await conn.execute(AUDIT, actor, str(row["id"]), json.dumps(detail), now, approver)
    return int(row["id"])
