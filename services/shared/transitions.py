"""Applying a settlement state change in the caller's transaction: guarded update, postings
from the shared rules, audit row and outbox event, together or not at all.

The relay and the inbox change settlements only through `apply_transition`. It locks the
settlement row, asks the state machine whether the move is legal (an illegal or repeated move
is answered with None and changes nothing: a late or duplicated signal must not corrupt
state), then writes with `WHERE id = $1 AND version = $2 AND status = $3` and checks the
row count.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

import asyncpg

from services.shared import avro
from services.shared.domain.postings import (
    AccountKind,
    Posting,
    entry_kind,
    holding_account,
    postings_for,
)
from services.shared.domain.settlement import SettlementStatus, event_type, is_transition_valid
from services.shared.errors import SettleError
from services.shared.ids import uuid7
from services.shared.topics import EVENTS

BALANCE_SHARDS = 8

LOCK_SETTLEMENT = """
SELECT tenant, reference, amount, currency, status, version, rail_reference
  FROM settlements WHERE id = $1 FOR UPDATE
"""
# A settlement under review keeps its money where it was; its postings say where that is.
HELD_IN = """
SELECT p.account_id FROM postings p JOIN journal_entries e ON e.id = p.entry_id
 WHERE e.settlement_id = $1 GROUP BY p.account_id HAVING sum(p.amount) > 0
"""
UPDATE_SETTLEMENT = """
UPDATE settlements
   SET status = $4, version = $3 + 1, reason = coalesce($5, reason),
       rail_reference = coalesce($6, rail_reference), updated_at = $7
 WHERE id = $1 AND status = $2 AND version = $3
"""
INSERT_TRANSITION = """
INSERT INTO settlement_transitions (settlement_id, sequence, from_status, to_status, reason,
                                    actor, occurred_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)
"""
INSERT_ENTRY = """
INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at)
VALUES ($1, $2, $3, $4, $5)
"""
INSERT_POSTINGS = """
INSERT INTO postings (entry_id, account_id, amount, currency)
SELECT $1, a, m, $4 FROM unnest($2::text[], $3::bigint[]) AS u(a, m)
"""
ADD_TO_BALANCES = """
UPDATE account_balances AS b SET balance = b.balance + d.m
  FROM unnest($1::text[], $2::bigint[]) AS d(a, m)
 WHERE b.account_id = d.a AND b.shard = $3
"""
INSERT_EVENT = """
INSERT INTO outbox (event_id, settlement_id, sequence, topic, message_key, payload)
VALUES ($1, $2, $3, $4, $5, $6)
"""


class TransitionConflict(SettleError):
    """The settlement changed under a locked read: a bug or a manual edit; never retried."""


@dataclass(frozen=True, slots=True)
class Transitioned:
    """A state change that happened."""

    settlement_id: str
    source: SettlementStatus
    target: SettlementStatus
    sequence: int  # the transition's and its event's sequence
    postings: tuple[Posting, ...]


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
    """Move the settlement to `target` inside the caller's transaction, or None if illegal now."""
    row = await conn.fetchrow(LOCK_SETTLEMENT, uuid.UUID(settlement_id))
    if row is None:
        return None
    source = SettlementStatus(row["status"])
    if not is_transition_valid(source, target):
        return None
    held = await _held_in(conn, settlement_id, source, row["tenant"], row["currency"])
    postings, _ = postings_for(row["amount"], row["currency"], row["tenant"], held, target)
    sequence = row["version"] + 1
    sid = uuid.UUID(settlement_id)
    status = await conn.execute(
        UPDATE_SETTLEMENT, sid, source, row["version"], target, reason, rail_reference, now
    )
    if status != "UPDATE 1":
        raise TransitionConflict(f"settlement {settlement_id} changed under its row lock")
    await conn.execute(INSERT_TRANSITION, sid, sequence, source, target, reason, actor, now)
    if postings:
        await _post(conn, sid, row["tenant"], entry_kind(target), postings, now)
    event = {
        "event_id": str(uuid7()), "settlement_id": settlement_id, "tenant": row["tenant"],
        "reference": row["reference"], "type": event_type(target), "sequence": sequence,
        "amount": row["amount"], "currency": row["currency"], "occurred_at": now,
        "rail_reference": rail_reference or row["rail_reference"], "reason": reason,
        "status": str(target),
    }  # fmt: skip
    await conn.execute(
        INSERT_EVENT, uuid.UUID(str(event["event_id"])), sid, sequence, EVENTS,
        settlement_id.encode(), avro.encode("SettlementEvent", event),
    )  # fmt: skip
    return Transitioned(settlement_id, source, target, sequence, tuple(postings))


async def _held_in(
    conn: asyncpg.Connection, settlement_id: str, source: SettlementStatus, tenant: str,
    currency: str,
) -> AccountKind:  # fmt: skip
    if source is not SettlementStatus.NEEDS_REVIEW:
        return holding_account(source, AccountKind.FUNDING)
    rows = await conn.fetch(HELD_IN, uuid.UUID(settlement_id))
    prefix = f"{tenant}:"
    kinds = [AccountKind(r["account_id"][len(prefix) :].rsplit(":", 1)[0]) for r in rows]
    return kinds[0] if kinds else AccountKind.FUNDING


async def _post(
    conn: asyncpg.Connection, sid: uuid.UUID, tenant: str, kind: str,
    postings: list[Posting], now: datetime,
) -> None:  # fmt: skip
    entry = uuid7()
    await conn.execute(INSERT_ENTRY, entry, tenant, sid, kind, now)
    accounts = [p.account_id for p in postings]
    amounts = [p.amount for p in postings]
    await conn.execute(INSERT_POSTINGS, entry, accounts, amounts, postings[0].currency)
    order = sorted(range(len(postings)), key=lambda i: accounts[i])
    await conn.execute(
        ADD_TO_BALANCES, [accounts[i] for i in order], [amounts[i] for i in order],
        random.randrange(BALANCE_SHARDS),
    )  # fmt: skip


# --- Many transitions at once -------------------------------------------------------------
#
# `TransitionBatch` does what `apply_transition` does for many settlements in one transaction:
# the settlements are locked in id order (two batches sharing settlements queue instead of
# deadlocking), each move is checked against the state machine and planned in memory on the
# locked row (several moves of one settlement chain: each starts where the previous ended),
# and `write` stores everything in one statement of data-modifying CTEs: one guarded update
# per settlement, the audit rows, the journal entries and their postings, one balance update
# per account (rows locked in account order first), and the outbox events.

LOCK_SETTLEMENTS = """
SELECT id, tenant, reference, amount, currency, status, version, rail_reference
  FROM settlements WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE
"""
HELD_IN_MANY = """
SELECT e.settlement_id, p.account_id FROM postings p JOIN journal_entries e ON e.id = p.entry_id
 WHERE e.settlement_id = ANY($1::uuid[])
 GROUP BY e.settlement_id, p.account_id HAVING sum(p.amount) > 0
"""
LOCK_BALANCES = """
SELECT account_id FROM account_balances
 WHERE shard = $2 AND account_id = ANY($1::text[]) ORDER BY account_id FOR UPDATE
"""
WRITE_TRANSITIONS = """
WITH moved AS (
    UPDATE settlements AS s
       SET status = u.status, version = u.version, reason = coalesce(u.reason, s.reason),
           rail_reference = coalesce(u.rail_reference, s.rail_reference), updated_at = $1
      FROM unnest($2::uuid[], $3::text[], $4::int[], $5::text[], $6::int[], $7::text[],
                  $8::text[]) AS u(id, from_status, from_version, status, version, reason,
                                   rail_reference)
     WHERE s.id = u.id AND s.status = u.from_status AND s.version = u.from_version
    RETURNING s.id
), audit AS (
    INSERT INTO settlement_transitions (settlement_id, sequence, from_status, to_status,
                                        reason, actor, occurred_at)
    SELECT sid, seq, src, dst, why, who, $1
      FROM unnest($9::uuid[], $10::int[], $11::text[], $12::text[], $13::text[], $14::text[])
           AS t(sid, seq, src, dst, why, who)
), entries AS (
    INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at)
    SELECT id, tenant, sid, kind, $1
      FROM unnest($15::uuid[], $16::text[], $17::uuid[], $18::text[]) AS j(id, tenant, sid, kind)
), legs AS (
    INSERT INTO postings (entry_id, account_id, amount, currency)
    SELECT entry, account, amount, cur
      FROM unnest($19::uuid[], $20::text[], $21::bigint[], $22::text[])
           AS l(entry, account, amount, cur)
), balances AS (
    UPDATE account_balances AS b SET balance = b.balance + d.delta
      FROM unnest($23::text[], $24::bigint[]) AS d(account, delta)
     WHERE b.account_id = d.account AND b.shard = $25
), events AS (
    INSERT INTO outbox (event_id, settlement_id, sequence, topic, message_key, payload)
    SELECT id, sid, seq, $26, convert_to(sid::text, 'UTF8'), payload
      FROM unnest($27::uuid[], $28::uuid[], $29::int[], $30::bytea[]) AS o(id, sid, seq, payload)
)
SELECT count(*) FROM moved
"""


@dataclass(slots=True)
class LockedSettlement:
    """A settlement row under this transaction's lock, as the planned moves leave it."""

    id: uuid.UUID
    tenant: str
    reference: str
    amount: int
    currency: str
    status: SettlementStatus  # after the moves planned so far
    version: int  # after the moves planned so far
    rail_reference: str | None  # after the moves planned so far
    held_in: AccountKind  # where its money sits now
    locked_status: SettlementStatus  # as locked: what the guarded update expects
    locked_version: int
    reason: str | None = None  # the latest move's reason, if any gave one


@dataclass(frozen=True, slots=True)
class _Move:
    settlement: LockedSettlement
    done: Transitioned
    reason: str | None
    actor: str
    published_reference: str | None  # the event's rail reference, as the row had it then


class TransitionBatch:
    """Moves of many locked settlements, planned in memory and written by one statement.

    `lock` the settlements first (in the caller's transaction), `move` them as often as
    needed, then `write` once; a batch is used for one transaction only.
    """

    def __init__(self, locked: dict[uuid.UUID, LockedSettlement]) -> None:
        self.settlements = locked
        self._moves: list[_Move] = []

    @classmethod
    async def lock(cls, conn: asyncpg.Connection, ids: Iterable[uuid.UUID]) -> TransitionBatch:
        """Lock the settlements among `ids` that exist, in id order, and read where they stand."""
        rows = await conn.fetch(LOCK_SETTLEMENTS, sorted(set(ids)))
        reviewed = [r["id"] for r in rows if r["status"] == SettlementStatus.NEEDS_REVIEW]
        held: dict[uuid.UUID, AccountKind] = {}
        if reviewed:
            for r in await conn.fetch(HELD_IN_MANY, reviewed):
                held.setdefault(r["settlement_id"], AccountKind(r["account_id"].rsplit(":", 2)[-2]))
        locked = {}
        for r in rows:
            status = SettlementStatus(r["status"])
            locked[r["id"]] = LockedSettlement(
                r["id"], r["tenant"], r["reference"], r["amount"], r["currency"], status,
                r["version"], r["rail_reference"],
                held.get(r["id"], AccountKind.FUNDING) if status is SettlementStatus.NEEDS_REVIEW
                else holding_account(status, AccountKind.FUNDING),
                status, r["version"],
            )  # fmt: skip
        return cls(locked)

    def move(
        self,
        settlement_id: uuid.UUID,
        target: SettlementStatus,
        *,
        actor: str,
        reason: str | None = None,
        rail_reference: str | None = None,
    ) -> Transitioned | None:
        """Plan moving a locked settlement to `target`; None if it is not locked or not legal."""
        s = self.settlements.get(settlement_id)
        if s is None or not is_transition_valid(s.status, target):
            return None
        postings, held = postings_for(s.amount, s.currency, s.tenant, s.held_in, target)
        done = Transitioned(str(s.id), s.status, target, s.version + 1, tuple(postings))
        self._moves.append(_Move(s, done, reason, actor, rail_reference or s.rail_reference))
        s.status, s.version, s.held_in = target, s.version + 1, held
        # The guarded update keeps what a move leaves out: coalesce, as in apply_transition.
        s.rail_reference = rail_reference if rail_reference is not None else s.rail_reference
        s.reason = reason if reason is not None else s.reason
        return done

    @property
    def moves(self) -> list[Transitioned]:
        """The moves planned so far, in order."""
        return [m.done for m in self._moves]

    async def write(
        self, conn: asyncpg.Connection, now: datetime, shard: int | None = None
    ) -> None:
        """Store every planned move in the caller's transaction; TransitionConflict if a
        settlement changed under its lock (then nothing of the statement is kept)."""
        if not self._moves:
            return
        changed = [s for s in self.settlements.values() if s.version != s.locked_version]
        entries: list[tuple[uuid.UUID, _Move]] = []
        events: list[tuple[uuid.UUID, uuid.UUID, int, bytes]] = []
        deltas: dict[str, int] = {}
        for m in self._moves:
            s, done = m.settlement, m.done
            if done.postings:
                entries.append((uuid7(), m))
                for p in done.postings:
                    deltas[p.account_id] = deltas.get(p.account_id, 0) + p.amount
            event_id = uuid7()
            event = {
                "event_id": str(event_id), "settlement_id": str(s.id), "tenant": s.tenant,
                "reference": s.reference, "type": event_type(done.target),
                "sequence": done.sequence, "amount": s.amount, "currency": s.currency,
                "occurred_at": now, "rail_reference": m.published_reference,
                "reason": m.reason, "status": str(done.target),
            }  # fmt: skip
            events.append((event_id, s.id, done.sequence, avro.encode("SettlementEvent", event)))
        accounts = sorted(a for a, d in deltas.items() if d != 0)
        shard = random.randrange(BALANCE_SHARDS) if shard is None else shard
        if accounts:
            await conn.fetch(LOCK_BALANCES, accounts, shard)
        legs = [(entry, p) for entry, m in entries for p in m.done.postings]
        moved = await conn.fetchval(
            WRITE_TRANSITIONS, now,
            [s.id for s in changed], [str(s.locked_status) for s in changed],
            [s.locked_version for s in changed], [str(s.status) for s in changed],
            [s.version for s in changed], [s.reason for s in changed],
            [s.rail_reference for s in changed],
            [m.settlement.id for m in self._moves], [m.done.sequence for m in self._moves],
            [str(m.done.source) for m in self._moves], [str(m.done.target) for m in self._moves],
            [m.reason for m in self._moves], [m.actor for m in self._moves],
            [e for e, _ in entries], [m.settlement.tenant for _, m in entries],
            [m.settlement.id for _, m in entries], [entry_kind(m.done.target) for _, m in entries],
            [e for e, _ in legs], [p.account_id for _, p in legs], [p.amount for _, p in legs],
            [p.currency for _, p in legs],
            accounts, [deltas[a] for a in accounts], shard,
            EVENTS, [e[0] for e in events], [e[1] for e in events], [e[2] for e in events],
            [e[3] for e in events],
        )  # fmt: skip
        if moved != len(changed):
            raise TransitionConflict(
                f"{len(changed) - moved} of {len(changed)} settlements changed under their lock"
            )
        self._moves.clear()
        for s in changed:
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
    """`apply_transition` for many moves in the caller's transaction, in order (moves of one
    settlement chain); each answer is None where that move was illegal by then."""
    batch = await TransitionBatch.lock(conn, (m.settlement_id for m in moves))
    done = [
        batch.move(m.settlement_id, m.target, actor=actor, reason=m.reason,
                   rail_reference=m.rail_reference)
        for m in moves
    ]  # fmt: skip
    await batch.write(conn, now)
    return done
