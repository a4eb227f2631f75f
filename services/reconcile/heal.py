"""Healing a status drift the rail proves (or a later part of a reversal), through the inbox
as if its webhook had arrived.

For each such break that is its settlement's only break (`proof.healable`), the object is read
from the rail again and, in one transaction:

    1. the stored break is locked; one healed or resolved before is left alone
    2. the event the rail would have sent for the object now (`proof.proven_event`) is stored
       in inbox_events by intake's own INSERT under the change key a real webhook carries
       (`RailEvent.change_key`); a change the inbox holds already is the inbox's to apply
    3. the row is applied by the inbox's own code (`inbox.proven.apply_proven`: the decision
       table, the guarded transitions, their postings and events) and recorded applied
    4. the break is closed as healed by `close_break`, audited in operator_actions

Whatever does not bring the settlement to agree with the rail rolls all of it back and leaves
the break open for an operator. A real webhook arriving later finds its change stored and is
answered as a duplicate, so nothing is booked twice.

A drift can also end without a heal: the rail's own webhook, only late, was applied before
the next run. Every run that is not read-only heals, audited, the open breaks of what it
compared and no longer finds (engine.py, `closing.heal_agreeing`), so a late webhook leaves
no break open behind it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple, Protocol

import asyncpg

from services.adapters.postgres.store_errors import retry_contended, unavailable_when_down
from services.domain.breaks import BreakStatus
from services.domain.rail import RailReadError
from services.domain.reconciliation import Break
from services.domain.settlement import DomainError
from services.inbox.proven import apply_proven
from services.platform.clock import Clock
from services.platform.logs import about_settlement
from services.reconcile import proof
from services.reconcile.closing import close_break
from services.reconcile.errors import ReconcileError
from services.reconcile.store import stored_key
from services.settlement.transition_rows import LockedSettlement
from services.settlement.transitions import TransitionConflict

log = logging.getLogger(__name__)

ACTOR = "reconciler"
LOCK_OPEN_BREAK = """
SELECT id FROM reconciliation_breaks WHERE break_key = $1 AND status = 'open' FOR UPDATE
"""


class RailObjects(Protocol):
    """Where the healer reads an object as the rail shows it now (`RailSource`)."""

    async def wire(self, object_id: str) -> dict[str, Any] | None:
        """The object as the rail renders it, or None if the rail does not know it."""
        ...

    async def moved_at(self, transaction_id: str) -> int | None:
        """When the balance transaction was created, or None if the rail does not know it."""
        ...


class Heal(NamedTuple):
    """What one attempt to heal a drift did."""

    healed: bool  # the settlement moved to what the rail shows and the break is healed
    reason: str  # the synthetic event applied, or why nothing was healed
    event_id: str | None = None  # the synthetic inbox row's event id, when healed
    settlement: LockedSettlement | None = None  # as healed, for the line that says so
    paid_after: float | None = None  # seconds since accepted, when the heal made it paid


class _NotHealed(Exception):
    """Rolls the heal's transaction back; the break stays as it was."""


async def heal_drift(
    conn: asyncpg.Connection,
    item: Break,
    wire: Mapping[str, Any] | None,
    now: datetime,
    changed_at: int | None = None,
    actor: str = ACTOR,
) -> Heal:
    """Apply what `wire` (the drift's object, read now; its change made at `changed_at`, if
    the rail dates it, else now) proves through the inbox and mark the stored drift healed
    (audited under `actor`), all in one transaction; nothing changes unless the settlement
    then agrees with the rail."""
    try:
        with unavailable_when_down("PostgreSQL is unreachable; no drift was healed"):
            async with conn.transaction():
                return await _heal(conn, item, wire, now, changed_at, actor)
    except _NotHealed as e:
        return Heal(False, str(e))
    except (DomainError, TransitionConflict, ReconcileError, RailReadError) as e:
        # A rule refused a step, or the break changed under its lock: an operator's to see.
        return Heal(False, f"refused: {e}")


async def _heal(
    conn: asyncpg.Connection,
    item: Break,
    wire: Mapping[str, Any] | None,
    now: datetime,
    changed_at: int | None,
    actor: str,
) -> Heal:
    break_id = await conn.fetchval(LOCK_OPEN_BREAK, stored_key(item))
    if break_id is None:
        raise _NotHealed("the break is not open (healed or resolved before)")
    if wire is None:
        raise _NotHealed(f"the rail no longer knows {item.rail_object_id}")
    event_type = proof.proven_event(wire)
    if event_type is None:
        raise _NotHealed(f"{item.rail_object_id} is still on its way; nothing is proven")
    created = changed_at if changed_at is not None else int(now.timestamp())
    body = proof.synthetic_event(wire, event_type, created)
    event, outcome, refusal = await apply_proven(conn, body, now)
    if outcome is None:
        raise _NotHealed(refusal or "the inbox did not apply it")
    if not outcome.moves:
        raise _NotHealed(f"{event_type} moved nothing: {outcome.reason}")
    final = outcome.moves[-1]
    left = outcome.settlement.amount_reversed if outcome.settlement is not None else None
    if not proof.agrees(final, wire) or left != wire.get("amount_reversed", left):
        raise _NotHealed(f"{event_type} leaves the settlement {final}, not what the rail shows")
    moves = " -> ".join([str(item.expected), *outcome.moves])
    reason = f"{event_type} {event.event_id} applied from {item.rail_object_id}: {moves}"
    await close_break(conn, break_id, BreakStatus.HEALED, actor=actor, reason=reason, now=now)
    accepted = outcome.accepted_at
    paid_after = None if accepted is None else _since(accepted, now)
    return Heal(True, reason, event.event_id, outcome.settlement, paid_after)


def _since(accepted_at: datetime, now: datetime) -> float:
    return max((now - accepted_at).total_seconds(), 0.0)


class Healer:
    """Heals the drifts of each page of breaks a run stores; counts what it healed."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        rail: RailObjects,
        clock: Clock,
        paid_after: list[float] | None = None,
        actor: str = ACTOR,
    ) -> None:
        self._pool = pool
        self._rail = rail
        self._clock = clock
        self._actor = actor  # whose heals they are, in the audit
        # Seconds from accepted to paid of each settlement a heal made paid, once committed.
        self.paid_after = paid_after if paid_after is not None else []

    async def heal(self, breaks: Iterable[Break]) -> int:
        """Heal every drift among `breaks` the rail proves; how many were healed."""
        healed = 0
        for item in proof.healable(breaks):
            wire = await self._rail.wire(item.rail_object_id or "")
            # The change is dated when the rail moved the money: the entries it books are
            # effective then, and a payout's failure and its return after paying differ only
            # by when the money came back (the inbox compares that with its arrival date).
            moved = proof.dated_by(wire) if wire is not None else None
            at = await self._rail.moved_at(moved) if moved is not None else None
            done = await retry_contended(partial(self._heal_one, item, wire, at))
            if done.settlement is not None:
                s = done.settlement
                with about_settlement(s.id, s.tenant, s.trace):
                    log.info("drift healed: %s", done.reason)
            elif not done.healed:
                log.info("drift of %s left open: %s", item.settlement_id, done.reason)
            if done.paid_after is not None:
                self.paid_after.append(done.paid_after)
            healed += done.healed
        return healed

    async def _heal_one(
        self, item: Break, wire: Mapping[str, Any] | None, changed_at: int | None
    ) -> Heal:
        async with self._pool.acquire() as conn:
            return await heal_drift(conn, item, wire, self._clock(), changed_at, self._actor)
