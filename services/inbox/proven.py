"""An event the rail proves but never delivered (reconciliation heals a drift with it): stored
and applied as if its webhook had just arrived, by the inbox's own intake and apply, in the
caller's transaction, so a real webhook arriving later is answered as a duplicate."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

import asyncpg

from services.domain.rail_event import InboxStatus
from services.inbox.apply import Outcome, apply_events
from services.inbox.events import RailEvent, parse_event
from services.inbox.intake import Arrival, insert_events
from services.inbox.store import Recorded, claim_stored, record_many


class Proven(NamedTuple):
    """What became of a proven event: applied (with the apply's outcome), or why not."""

    event: RailEvent
    outcome: Outcome | None  # None when it was not applied
    refusal: str | None  # why it was not applied; None when it was


async def apply_proven(conn: asyncpg.Connection, body: bytes, now: datetime) -> Proven:
    """Store the event `body` (a webhook's body) and apply it now, recorded applied; the
    caller's transaction keeps it or rolls it all back. A change the inbox holds already is
    left for the inbox to apply, and a settlement the event would not move is refused."""
    event = parse_event(body)
    if event.event_id not in await insert_events(conn, [Arrival(event, body, now)]):
        return Proven(event, None, f"the inbox holds change {event.change_key} already")
    claimed = await claim_stored(conn, event.event_id)
    if claimed is None:  # stored by this very transaction a moment ago
        return Proven(event, None, f"inbox row {event.event_id} vanished under its transaction")
    (outcome,) = await apply_events(conn, [claimed], now)
    if outcome.status is not InboxStatus.APPLIED or not outcome.moves:
        return Proven(event, None, f"the inbox would not move the settlement: {outcome.reason}")
    applied = Recorded(claimed, outcome.status, outcome.reason, outcome.settlement_id, None)
    await record_many(conn, [applied], now)
    return Proven(event, outcome, None)
