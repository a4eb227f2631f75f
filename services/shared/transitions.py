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
from dataclasses import dataclass
from datetime import datetime

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
