"""The one guarded write path for changing settlements: guarded update, postings from the
shared rules, audit row and outbox event, together in the caller's transaction or not at all.

Every change to an existing settlement goes through `TransitionBatch`; a single change is a
batch of one (`apply_transition`). The batch locks its settlements in id order (batches
sharing settlements queue, never deadlock) and plans each step on the locked row through the
domain's `transition`: an illegal or repeated move (a reversal adding nothing) is None and
changes nothing; needs_review without a reason raises ReasonRequired. `write` stores them
all in one statement, a named array of rows per table (`transition_rows`): one update per
settlement guarded by status and version (row count checked), audit, entries, postings,
balances, outbox events.

Booking (`services/ledger/sql.py`) is the one other writer: it inserts new rows, with no
status or version to guard, guarded by the key claim and the reference's uniqueness instead.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

import asyncpg

from services.contracts.topics import EVENTS
from services.domain.balance_shards import BALANCE_SHARDS
from services.domain.errors import SettleError
from services.domain.postings import (
    AccountKind,
    Posting,
    holding_account,
    step_postings,
)
from services.domain.settlement import (
    IllegalTransition,
    SettlementStatus,
    Transition,
    reference_recorded,
    reversed_after,
    transition,
)
from services.domain.trace_context import carried
from services.settlement.transition_rows import (
    LockedSettlement,
    PlannedStep,
    Rows,
    Transitioned,
    rows_of,
)
from services.settlement.transition_sql import HELD_IN, LOCK_SETTLEMENTS, WRITE_TRANSITIONS


class TransitionConflict(SettleError):
    """The settlement changed under a locked read: a bug or a manual edit; never retried."""


class TransitionBatch:
    """Steps of many locked settlements, planned in memory and written by one statement.

    `lock` the settlements first (in the caller's transaction), `move` them or
    `record_rail_reference` as often as needed, then `write` once.
    """

    def __init__(self, locked: dict[uuid.UUID, LockedSettlement]) -> None:
        self.settlements = locked
        self._steps: list[PlannedStep] = []

    @classmethod
    async def lock(cls, conn: asyncpg.Connection, ids: Iterable[uuid.UUID]) -> TransitionBatch:
        """Lock the settlements among `ids` that exist, in id order, and read where they stand."""
        rows = await conn.fetch(LOCK_SETTLEMENTS, sorted(set(ids)))
        reviewed = [r["id"] for r in rows if r["status"] == SettlementStatus.NEEDS_REVIEW]
        held: dict[uuid.UUID, AccountKind] = {}
        if reviewed:
            for r in await conn.fetch(HELD_IN, reviewed):
                held.setdefault(r["settlement_id"], AccountKind(r["account_id"].rsplit(":", 2)[-2]))
        locked = {}
        for r in rows:
            status = SettlementStatus(r["status"])
            locked[r["id"]] = LockedSettlement(
                r["id"],
                r["tenant"],
                r["reference"],
                r["amount"],
                r["currency"],
                status,
                r["version"],
                r["rail_reference"],
                held.get(r["id"], AccountKind.FUNDING)
                if status is SettlementStatus.NEEDS_REVIEW
                else holding_account(status, AccountKind.FUNDING),
                status,
                r["version"],
                amount_reversed=r["amount_reversed"],
                destination=r["destination"],
                rail=r["rail"],
                accepted_at=r["created_at"],
                trace=carried(r["traceparent"], r["tracestate"]),
            )
        return cls(locked)

    def move(
        self,
        settlement_id: uuid.UUID,
        target: SettlementStatus,
        *,
        actor: str,
        reason: str | None = None,
        rail_reference: str | None = None,
        amount_reversed: int | None = None,
        effective_at: datetime | None = None,
    ) -> Transitioned | None:
        """Plan moving a locked settlement to `target`; None if it is not locked or not legal
        now; ReasonRequired for needs_review without a reason. A reversal names the
        cumulative `amount_reversed` (None: all of it) and books only what it adds; its entry
        is dated `effective_at` when the rail said when it moved the money."""
        s = self.settlements.get(settlement_id)
        if s is None:
            return None
        try:
            step = transition(s.status, target, reason)
            after = reversed_after(s.status, target, s.amount, s.amount_reversed, amount_reversed)
        except IllegalTransition:
            return None
        postings, held = step_postings(
            s.amount, s.currency, s.tenant, s.held_in, target, s.amount_reversed, after
        )
        s.amount_reversed = after
        return self._plan(s, step, postings, held, actor, rail_reference, effective_at)

    def record_rail_reference(
        self, settlement_id: uuid.UUID, rail_reference: str, *, actor: str
    ) -> Transitioned | None:
        """Plan recording the rail's reference on a locked settlement that has none, keeping
        its status; None if it is not locked or already has a reference."""
        s = self.settlements.get(settlement_id)
        if s is None or s.rail_reference is not None:
            return None
        return self._plan(s, reference_recorded(s.status), [], s.held_in, actor, rail_reference)

    def _plan(
        self,
        s: LockedSettlement,
        step: Transition,
        postings: list[Posting],
        held: AccountKind,
        actor: str,
        rail_reference: str | None,
        effective_at: datetime | None = None,
    ) -> Transitioned:
        done = Transitioned(
            str(s.id), step.source, step.target, s.version + 1, tuple(postings), s.amount_reversed
        )
        published = rail_reference or s.rail_reference
        self._steps.append(PlannedStep(s, step, done, actor, published, effective_at))
        s.status, s.version, s.held_in = step.target, s.version + 1, held
        # The guarded update keeps what a step leaves out (coalesce).
        s.rail_reference = rail_reference if rail_reference is not None else s.rail_reference
        s.reason = step.reason if step.reason is not None else s.reason
        return done

    @property
    def moves(self) -> list[Transitioned]:
        """The steps planned so far, in order."""
        return [m.done for m in self._steps]

    def rows(self, now: datetime) -> Rows:
        """The rows that store every planned step, minted now (ids, events)."""
        return rows_of(self.settlements.values(), self._steps, now)

    async def write(
        self, conn: asyncpg.Connection, now: datetime, shard: int | None = None
    ) -> None:
        """Store every planned step in the caller's transaction; TransitionConflict if a
        settlement changed under its lock (then nothing of the statement is kept). Each
        account's delta lands on a balance shard no other writer holds, `shard` tried first."""
        if not self._steps:
            return
        rows = self.rows(now)
        start = random.randrange(BALANCE_SHARDS) if shard is None else shard
        moved = await conn.fetchval(
            WRITE_TRANSITIONS,
            now,
            rows.moves,
            rows.transitions,
            rows.entries,
            rows.postings,
            [d.account_id for d in rows.deltas],
            [d.delta for d in rows.deltas],
            EVENTS,
            rows.events,
            start,
        )
        if moved != len(rows.moves):
            raise TransitionConflict(
                f"{len(rows.moves) - moved} of {len(rows.moves)} settlements changed under "
                "their lock"
            )
        self._steps.clear()
        for s in self.settlements.values():
            s.locked_status, s.locked_version = s.status, s.version


class Move(NamedTuple):
    """One requested move for `apply_transitions`."""

    settlement_id: uuid.UUID
    target: SettlementStatus
    reason: str | None = None
    rail_reference: str | None = None
    effective_at: datetime | None = None  # when the rail moved the money, if it said


async def apply_transitions(
    conn: asyncpg.Connection, moves: Sequence[Move], *, actor: str, now: datetime
) -> list[Transitioned | None]:
    """Lock, plan and write `moves` as one batch in the caller's transaction, in order (moves
    of one settlement chain); each answer is None where that move was illegal by then."""
    if not moves:
        return []
    batch = await TransitionBatch.lock(conn, (m.settlement_id for m in moves))
    done = [
        batch.move(
            m.settlement_id,
            m.target,
            actor=actor,
            reason=m.reason,
            rail_reference=m.rail_reference,
            effective_at=m.effective_at,
        )
        for m in moves
    ]
    await batch.write(conn, now)
    return done


async def apply_transition(
    conn: asyncpg.Connection,
    settlement_id: str,
    target: SettlementStatus,
    *,
    actor: str,
    now: datetime,
    reason: str | None = None,
    rail_reference: str | None = None,
) -> Transitioned | None:
    """A batch of one: move the settlement to `target`, or None if illegal now."""
    move = Move(uuid.UUID(settlement_id), target, reason, rail_reference)
    return (await apply_transitions(conn, [move], actor=actor, now=now))[0]
