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
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import asyncpg

from services.contracts.topics import EVENTS
from services.domain.balance_shards import BALANCE_SHARDS, free_shards
from services.domain.errors import SettleError
from services.domain.ids import uuid7, uuid7_text
from services.domain.postings import (
    AccountKind,
    Posting,
    entry_kind,
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
    BalanceDelta,
    EntryRow,
    EventRow,
    LockedSettlement,
    PostingRow,
    Rows,
    SettlementMove,
    Transitioned,
    TransitionRow,
    settlement_event,
)

LOCK_SETTLEMENTS = """
SELECT id, tenant, reference, amount, currency, status, version, rail_reference, amount_reversed,
       destination, traceparent, tracestate, created_at
  FROM settlements WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE
"""
# A settlement under review keeps its money where it was; its postings say where that is.
HELD_IN = """
SELECT e.settlement_id, p.account_id FROM postings p JOIN journal_entries e ON e.id = p.entry_id
 WHERE e.settlement_id = ANY($1::uuid[])
 GROUP BY e.settlement_id, p.account_id HAVING sum(p.amount) > 0
"""
WRITE_TRANSITIONS = f"""
WITH moved AS (
    UPDATE settlements AS s
       SET status = m.status, version = m.version, reason = coalesce(m.reason, s.reason),
           amount_reversed = m.amount_reversed,
           rail_reference = coalesce(m.rail_reference, s.rail_reference), updated_at = $1
      FROM unnest($2::settlement_move[]) AS m
     WHERE s.id = m.id AND s.status = m.from_status AND s.version = m.from_version
    RETURNING s.id
), audit AS (
    INSERT INTO settlement_transitions (settlement_id, sequence, from_status, to_status,
                                        reason, actor, occurred_at)
    SELECT t.settlement_id, t.sequence, t.from_status, t.to_status, t.reason, t.actor, $1
      FROM unnest($3::transition_row[]) AS t
), entries AS (
    INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at)
    SELECT j.id, j.tenant, j.settlement_id, j.kind, $1 FROM unnest($4::entry_row[]) AS j
), legs AS (
    INSERT INTO postings (entry_id, account_id, amount, currency, occurred_at)
    SELECT p.entry_id, p.account_id, p.amount, p.currency, $1 FROM unnest($5::posting_row[]) AS p
), shards AS MATERIALIZED ({free_shards("$6::text[]", "$10::int")}
), balances AS (
    UPDATE account_balances AS b SET balance = b.balance + d.delta
      FROM unnest($6::text[], $7::bigint[]) AS d(account_id, delta)
      JOIN shards USING (account_id)
     WHERE b.account_id = d.account_id AND b.shard = shards.shard
), events AS (
    INSERT INTO outbox (event_id, settlement_id, sequence, topic, message_key, payload)
    SELECT o.event_id, o.settlement_id, o.sequence, $8, convert_to(o.settlement_id::text, 'UTF8'),
           o.payload
      FROM unnest($9::event_row[]) AS o
)
SELECT count(*) FROM moved
"""


class TransitionConflict(SettleError):
    """The settlement changed under a locked read: a bug or a manual edit; never retried."""


@dataclass(frozen=True, slots=True)
class _Step:
    settlement: LockedSettlement
    step: Transition
    done: Transitioned
    actor: str
    published_reference: str | None  # the event's rail reference, as the row had it then


class TransitionBatch:
    """Steps of many locked settlements, planned in memory and written by one statement.

    `lock` the settlements first (in the caller's transaction), `move` them or
    `record_rail_reference` as often as needed, then `write` once.
    """

    def __init__(self, locked: dict[uuid.UUID, LockedSettlement]) -> None:
        self.settlements = locked
        self._steps: list[_Step] = []

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
                r["id"], r["tenant"], r["reference"], r["amount"], r["currency"], status,
                r["version"], r["rail_reference"],
                held.get(r["id"], AccountKind.FUNDING) if status is SettlementStatus.NEEDS_REVIEW
                else holding_account(status, AccountKind.FUNDING),
                status, r["version"], amount_reversed=r["amount_reversed"],
                destination=r["destination"], accepted_at=r["created_at"],
                trace=carried(r["traceparent"], r["tracestate"]),
            )  # fmt: skip
        return cls(locked)

    def move(
        self, settlement_id: uuid.UUID, target: SettlementStatus, *, actor: str,
        reason: str | None = None, rail_reference: str | None = None,
        amount_reversed: int | None = None,
    ) -> Transitioned | None:  # fmt: skip
        """Plan moving a locked settlement to `target`; None if it is not locked or not legal
        now; ReasonRequired for needs_review without a reason. A reversal names the
        cumulative `amount_reversed` (None: all of it) and books only what it adds."""
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
        return self._plan(s, step, postings, held, actor, rail_reference)

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
        self, s: LockedSettlement, step: Transition, postings: list[Posting],
        held: AccountKind, actor: str, rail_reference: str | None,
    ) -> Transitioned:  # fmt: skip
        done = Transitioned(str(s.id), step.source, step.target, s.version + 1, tuple(postings),
                            s.amount_reversed)  # fmt: skip
        self._steps.append(_Step(s, step, done, actor, rail_reference or s.rail_reference))
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
        moves = [
            SettlementMove(s.id, s.locked_status, s.locked_version, s.status, s.version,
                           s.reason, s.rail_reference, s.amount_reversed)
            for s in self.settlements.values() if s.version != s.locked_version
        ]  # fmt: skip
        transitions, entries, postings, events = [], [], [], []
        deltas: dict[str, int] = {}
        for m in self._steps:
            s, done = m.settlement, m.done
            transitions.append(TransitionRow(
                s.id, done.sequence, done.source, done.target, m.step.reason, m.actor))  # fmt: skip
            if done.postings:
                entry = uuid7()
                entries.append(
                    EntryRow(entry, s.tenant, s.id, entry_kind(done.target, done.amount_reversed))
                )
                for p in done.postings:
                    postings.append(PostingRow(entry, p.account_id, p.amount, p.currency))
                    deltas[p.account_id] = deltas.get(p.account_id, 0) + p.amount
            event_id = uuid7_text()  # as text: the event names it so, and the outbox takes it
            payload = settlement_event(
                event_id, done.settlement_id, s.tenant, s.reference, s.amount, s.currency,
                sequence=done.sequence, event_type=m.step.event_type, status=m.step.target,
                rail_reference=m.published_reference, reason=m.step.reason, occurred_at=now,
            )  # fmt: skip
            events.append(EventRow(event_id, s.id, done.sequence, payload))
        balance = [BalanceDelta(a, deltas[a]) for a in sorted(deltas) if deltas[a] != 0]
        return Rows(moves, transitions, entries, postings, balance, events)

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
            WRITE_TRANSITIONS, now, rows.moves, rows.transitions, rows.entries, rows.postings,
            [d.account_id for d in rows.deltas], [d.delta for d in rows.deltas], EVENTS,
            rows.events, start,
        )  # fmt: skip
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


async def apply_transitions(
    conn: asyncpg.Connection, moves: Sequence[Move], *, actor: str, now: datetime
) -> list[Transitioned | None]:
    """Lock, plan and write `moves` as one batch in the caller's transaction, in order (moves
    of one settlement chain); each answer is None where that move was illegal by then."""
    if not moves:
        return []
    batch = await TransitionBatch.lock(conn, (m.settlement_id for m in moves))
    done = [
        batch.move(m.settlement_id, m.target, actor=actor, reason=m.reason,
                   rail_reference=m.rail_reference)
        for m in moves
    ]  # fmt: skip
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
