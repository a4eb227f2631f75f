"""Applying one stored rail event to its settlement, inside the caller's transaction.

The settlement is found by rail reference (the relay recorded the rail's answer) or, when
the webhook came first, by our settlement id in the object's metadata. Its row is locked,
`plan` decides the moves from its status now, and each move goes through `apply_transition`
(guarded update, postings, audit row, outbox event). The caller records the inbox row's
outcome in the same transaction, so a change is applied and marked together or not at all.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import NamedTuple

import asyncpg

from services.inbox.decision import InboxStatus, ignore_reason, plan, signal_of
from services.inbox.store import StoredEvent
from services.shared.domain.settlement import SettlementStatus
from services.shared.transitions import TransitionConflict, apply_transition

ACTOR = "inbox"

# The rail reference wins; metadata covers a webhook that beat the relay's record.
FIND_SETTLEMENT = """
SELECT id FROM settlements WHERE rail_reference = $1
UNION ALL
SELECT id FROM settlements WHERE id = $2
LIMIT 1
"""
LOCK_SETTLEMENT = "SELECT status, rail_reference FROM settlements WHERE id = $1 FOR UPDATE"


class Outcome(NamedTuple):
    """What one attempt did, for the inbox row and the metrics."""

    status: InboxStatus  # applied, ignored, parked (retry later) or dead (operator)
    reason: str | None  # why, for anything but a plain apply
    settlement_id: uuid.UUID | None = None
    moves: tuple[SettlementStatus, ...] = ()  # transitions made; () when already there


async def apply_event(conn: asyncpg.Connection, event: StoredEvent, now: datetime) -> Outcome:
    """Bring the event's settlement to what the rail reported, in the caller's transaction."""
    signal = signal_of(event.event_type)
    if signal is None:
        return Outcome(InboxStatus.IGNORED, ignore_reason(event.event_type))
    sid = await conn.fetchval(FIND_SETTLEMENT, event.object_id, event.settlement_id)
    if sid is None:
        return Outcome(
            InboxStatus.PARKED,
            f"no settlement has rail reference {event.object_id} or id "
            f"{event.settlement_id or '(none in metadata)'} yet",
        )
    row = await conn.fetchrow(LOCK_SETTLEMENT, sid)
    if row["rail_reference"] not in (None, event.object_id):
        # A second object at the rail for one settlement: never booked over the first.
        return Outcome(
            InboxStatus.DEAD,
            f"settlement {sid} went out as {row['rail_reference']}, not {event.object_id}",
            sid,
        )
    current = SettlementStatus(row["status"])
    moves = plan(current, signal)
    for target in moves:
        moved = await apply_transition(
            conn, str(sid), target, actor=ACTOR, now=now,
            reason=f"{event.event_type} {event.rail_event_id}", rail_reference=event.object_id,
        )  # fmt: skip
        if moved is None:  # impossible under the row lock unless someone edits by hand
            raise TransitionConflict(f"settlement {sid} refused {target} under its row lock")
    note = None if moves else f"settlement already {current}; nothing to change"
    return Outcome(InboxStatus.APPLIED, note, sid, moves)
