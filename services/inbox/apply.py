"""Applying stored rail events to their settlements, inside the caller's transaction.

A settlement is found by rail reference (the relay recorded the rail's answer) or, when
the webhook came first, by our settlement id in the object's metadata. Its row is locked,
the event's object is matched against what the settlement sent (`webhook_match`: an event
that differs is a `mismatch`, never applied), `plan` decides the moves from its status now,
and the moves go through a `TransitionBatch`
(guarded update, postings, audit row, outbox event). The caller records the inbox rows'
outcomes in the same transaction, so a change is applied and marked together or not at all.
One event is a batch of one.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import NamedTuple

import asyncpg

from services.domain.rail_event import (
    InboxStatus,
    Reversal,
    Signal,
    ignore_reason,
    plan,
    signal_for,
)
from services.domain.settlement import SettlementStatus
from services.domain.webhook_match import (
    Difference,
    Reported,
    Sent,
    describe,
    differences,
)
from services.inbox.store import StoredEvent
from services.settlement.transition_rows import LockedSettlement
from services.settlement.transitions import TransitionBatch, TransitionConflict

ACTOR = "inbox"

# Every settlement any of the events may be about, unlocked: by the rail reference, or by
# metadata for a webhook that beat the relay's record.
FIND_SETTLEMENTS = """
SELECT id FROM settlements WHERE rail_reference = ANY($1::text[])
UNION
SELECT id FROM settlements WHERE id = ANY($2::uuid[])
"""
# What a row whose body no longer reads as an event reports: nothing, so it matches nothing.
UNREADABLE = Reported(None, None, None, None, None)


class Outcome(NamedTuple):
    """What one attempt did, for the inbox row and the metrics."""

    status: InboxStatus  # applied, ignored, parked (retry later), dead or mismatch (operator)
    reason: str | None  # why, for anything but a plain apply
    settlement_id: uuid.UUID | None = None
    moves: tuple[SettlementStatus, ...] = ()  # transitions made; () when already there
    mismatch: tuple[Difference, ...] = ()  # for a mismatch: each field with both sides
    settlement: LockedSettlement | None = None  # as locked, for log lines about it

    @property
    def accepted_at(self) -> datetime | None:
        """For a move to paid: when the settlement was accepted; None otherwise."""
        if self.settlement is None or SettlementStatus.PAID not in self.moves:
            return None
        return self.settlement.accepted_at


async def apply_events(
    conn: asyncpg.Connection,
    events: Sequence[StoredEvent],
    now: datetime,
    shard: int | None = None,
    settlements: Collection[uuid.UUID] | None = None,
) -> list[Outcome]:
    """Bring each event's settlement to what the rail reported, in the caller's transaction;
    one outcome per event. `settlements`: every one the events may be about, when the caller
    found them already (`intake.INSERT_EVENTS`); else they are looked up here.

    Every settlement the events may be about is locked at once, in id order (batches sharing
    settlements queue rather than deadlock); each event is then decided in the order given,
    on its settlement as the earlier events of the batch left it, exactly as applying them
    one after another would; and all moves are written together at the end.
    """
    signals = [signal_for(e.event_type, e.amount_reversed) for e in events]
    wanted = [e for e, signal in zip(events, signals, strict=True) if signal is not None]
    if settlements is None:
        found = await conn.fetch(
            FIND_SETTLEMENTS,
            sorted({e.object_id for e in wanted if e.object_id}),
            sorted({e.settlement_id for e in wanted if e.settlement_id}),
        )
        settlements = [r["id"] for r in found]
    batch = await TransitionBatch.lock(conn, settlements)
    by_reference = {
        s.rail_reference: sid for sid, s in batch.settlements.items() if s.rail_reference
    }
    outcomes = [
        _apply_one(batch, by_reference, event, signal)
        if signal is not None
        else Outcome(InboxStatus.IGNORED, ignore_reason(event.event_type))
        for event, signal in zip(events, signals, strict=True)
    ]
    await batch.write(conn, now, shard)
    return outcomes


def _apply_one(
    batch: TransitionBatch, by_reference: dict[str, uuid.UUID], event: StoredEvent, signal: Signal
) -> Outcome:
    """Plan one event's moves on its locked settlement, as the earlier events left it."""
    sid = by_reference.get(event.object_id) if event.object_id else None
    if sid is None and event.settlement_id in batch.settlements:
        sid = event.settlement_id
    if sid is None:
        return Outcome(
            InboxStatus.PARKED,
            f"no settlement has rail reference {event.object_id} or id "
            f"{event.settlement_id or '(none in metadata)'} yet",
        )
    s = batch.settlements[sid]
    sent = Sent(s.amount, s.currency, s.destination or "", s.rail_reference)
    found = differences(sent, event.reported or UNREADABLE)
    if found:
        return Outcome(InboxStatus.MISMATCH, describe(found), sid, mismatch=found, settlement=s)
    reported = event.amount_reversed
    current, before = s.status, s.amount_reversed
    moves = plan(
        current, signal, None if reported is None else Reversal(s.amount, before, reported)
    )
    for target in moves:
        moved = batch.move(
            sid,
            target,
            actor=ACTOR,
            reason=f"{event.event_type} {event.rail_event_id}",
            rail_reference=event.object_id,
            amount_reversed=reported,
            effective_at=rail_time(event.created),
        )
        if moved is None:  # plan only answers legal moves
            raise TransitionConflict(f"settlement {sid} refused {target} under its row lock")
    if s.rail_reference:
        by_reference.setdefault(s.rail_reference, sid)
    where = f"{current} ({before} back)" if before else str(current)
    note = None if moves else f"settlement already {where}; nothing to change"
    return Outcome(InboxStatus.APPLIED, note, sid, moves, settlement=s)


def rail_time(created: int | None) -> datetime | None:
    """When the rail says it moved the money (an event's `created`), as the entry's date."""
    return None if created is None else datetime.fromtimestamp(created, UTC)
