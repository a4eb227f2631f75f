"""Finding settlements and reading one settlement's whole story, through indexes only.

Search is an exact match on indexed columns, a keyset page by id at a time: the id (primary
key), the reference in any tenant (`settlements_reference_unique` (tenant, reference), its
tenants walked as a skip scan), the payee and the destination (`settlements_payee`,
`settlements_destination`, migration 0015) and the rail reference
(`settlements_rail_reference`).
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down

PAGE = 50
SETTLEMENT = """s.id, s.tenant, s.reference, s.payee, s.destination, s.amount, s.currency,
       s.amount_reversed, s.rail, s.status, s.version, s.reason, s.rail_reference,
       s.created_at, s.updated_at"""
# Each branch reads at most a page from its index; the union is cut to a page again.
SEARCH = f"""
WITH RECURSIVE tenants(t) AS (
    (SELECT tenant FROM settlements ORDER BY tenant LIMIT 1)
    UNION ALL
    SELECT (SELECT s.tenant FROM settlements s WHERE s.tenant > tenants.t
             ORDER BY s.tenant LIMIT 1)
      FROM tenants WHERE tenants.t IS NOT NULL
), found AS (
    (SELECT id FROM settlements WHERE id = $2 AND id > $3)
    UNION
    (SELECT s.id FROM tenants, settlements s
      WHERE tenants.t IS NOT NULL AND s.tenant = tenants.t AND s.reference = $1 AND s.id > $3)
    UNION
    (SELECT id FROM settlements WHERE payee = $1 AND id > $3 ORDER BY id LIMIT $4)
    UNION
    (SELECT id FROM settlements WHERE destination = $1 AND id > $3 ORDER BY id LIMIT $4)
    UNION
    (SELECT id FROM settlements WHERE rail_reference = $1 AND id > $3 ORDER BY id LIMIT $4)
)
SELECT {SETTLEMENT} FROM settlements s WHERE s.id IN (SELECT id FROM found)
 ORDER BY s.id LIMIT $4
"""
ONE = f"SELECT {SETTLEMENT} FROM settlements s WHERE s.id = $1"
TRANSITIONS = """
SELECT sequence, from_status, to_status, reason, actor, occurred_at
  FROM settlement_transitions WHERE settlement_id = $1 ORDER BY sequence
"""
POSTINGS = """
SELECT j.kind, p.id, p.account_id, p.amount, p.currency, p.occurred_at
  FROM journal_entries j JOIN postings p ON p.entry_id = j.id
 WHERE j.settlement_id = $1 ORDER BY p.occurred_at, p.id
"""
OUTBOX = """
SELECT id, event_id, sequence, topic, created_at, claimed_by, published_at
  FROM outbox WHERE settlement_id = $1 ORDER BY sequence
"""
INSTRUCTION = """
SELECT status, method, rail, idempotency_key, destination, amount, currency, fence, attempts,
       first_sent_at, next_attempt_at, lease_until, claimed_by, error_class, last_error,
       rail_reference, created_at, updated_at
  FROM rail_instructions WHERE settlement_id = $1
"""
INBOX = """
SELECT id, rail_event_id, event_type, object_id, status, attempts, reason, received_at,
       applied_at, mismatch
  FROM inbox_events WHERE settlement_id = $1 ORDER BY received_at, id
"""
BREAKS = """
SELECT id, break_type, status, field, reason, first_seen, last_seen, resolved_by,
       resolution_reason
  FROM reconciliation_breaks WHERE settlement_id = $1 ORDER BY id
"""
ACTIONS = """
SELECT id, actor, action, target, detail, occurred_at FROM operator_actions
 WHERE target = ANY($1::text[]) ORDER BY occurred_at, id
"""


class Story(NamedTuple):
    """Everything the database holds about one settlement."""

    settlement: asyncpg.Record
    transitions: list[asyncpg.Record]
    postings: list[asyncpg.Record]
    outbox: list[asyncpg.Record]
    instruction: asyncpg.Record | None
    inbox: list[asyncpg.Record]
    breaks: list[asyncpg.Record]
    actions: list[asyncpg.Record]


def as_uuid(text: str) -> uuid.UUID | None:
    """`text` as a settlement id, or None when it is not one."""
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


async def search(pool: asyncpg.Pool, q: str, after: uuid.UUID | None) -> list[asyncpg.Record]:
    """A page of settlements, by id after `after`, whose id, reference, payee, destination or
    rail reference is exactly `q`."""
    start = after or uuid.UUID(int=0)
    with unavailable_when_down("PostgreSQL is unreachable; nothing was searched"):
        return list(await pool.fetch(SEARCH, q, as_uuid(q), start, PAGE))


async def story(pool: asyncpg.Pool, settlement_id: uuid.UUID) -> Story | None:
    """The whole story of one settlement; None when there is no such settlement."""
    with unavailable_when_down("PostgreSQL is unreachable; the settlement could not be read"):
        async with pool.acquire() as conn, conn.transaction(readonly=True):
            row = await conn.fetchrow(ONE, settlement_id)
            if row is None:
                return None
            parts: dict[str, Any] = {
                "transitions": await conn.fetch(TRANSITIONS, settlement_id),
                "postings": await conn.fetch(POSTINGS, settlement_id),
                "outbox": await conn.fetch(OUTBOX, settlement_id),
                "instruction": await conn.fetchrow(INSTRUCTION, settlement_id),
                "inbox": await conn.fetch(INBOX, settlement_id),
                "breaks": await conn.fetch(BREAKS, settlement_id),
            }
            targets = [f"settlement:{settlement_id}"]
            targets += [f"break:{b['id']}" for b in parts["breaks"]]
            targets += [str(e["id"]) for e in parts["inbox"]]
            parts["actions"] = await conn.fetch(ACTIONS, targets)
    return Story(settlement=row, **parts)
