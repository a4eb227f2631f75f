"""Journal entries between settle's own accounts (tenant `platform`), belonging to no
settlement: a rail's charge, an operator's write-off or adjustment.

`book_platform_entries` writes any number of them in the caller's transaction, in one
statement: the accounts opened where missing (`OPEN_ACCOUNTS`, as booking opens a tenant's),
each entry with its postings, and each account's balance moved on a free shard. Every entry
must balance per currency before anything is written; the database checks it again when the
transaction commits. With booking and the transitions, this is the third writer of postings.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

import asyncpg

from services.domain.balance_shards import BALANCE_SHARDS, free_shards
from services.domain.postings import PLATFORM, Posting, is_balanced, net_by_account
from services.settlement.transition_sql import OPEN_ACCOUNTS

WRITE_ENTRIES = f"""
WITH entries AS (
    INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at, effective_at)
    SELECT e.id, '{PLATFORM}', NULL, e.kind, $1, e.effective_at
      FROM unnest($2::uuid[], $3::text[], $4::timestamptz[]) AS e(id, kind, effective_at)
), legs AS (
    INSERT INTO postings (entry_id, account_id, amount, currency, occurred_at)
    SELECT p.entry_id, p.account_id, p.amount, p.currency, $1
      FROM unnest($5::uuid[], $6::text[], $7::bigint[], $8::text[])
           AS p(entry_id, account_id, amount, currency)
), shards AS MATERIALIZED ({free_shards("$9::text[]", "0")}
)
UPDATE account_balances AS b SET balance = b.balance + d.delta
  FROM unnest($9::text[], $10::bigint[]) AS d(account_id, delta)
  JOIN shards USING (account_id)
 WHERE b.account_id = d.account_id AND b.shard = shards.shard
"""


class PlatformEntry(NamedTuple):
    """One entry between the platform's own accounts."""

    id: uuid.UUID
    kind: str  # what booked it: rail_charge, write_off, adjustment...
    postings: Sequence[Posting]  # balanced per currency, on `platform:` accounts
    effective_at: datetime | None = None  # when the money moved, if not when recorded


async def book_platform_entries(
    conn: asyncpg.Connection, entries: Sequence[PlatformEntry], now: datetime
) -> None:
    """Write `entries`, recorded `now`, in the caller's transaction; ValueError, before
    anything is written, if one does not balance."""
    for entry in entries:
        if not entry.postings or not is_balanced(entry.postings):
            raise ValueError(f"a {entry.kind} entry must balance per currency: {entry!r}")
    legs = [(e.id, p) for e in entries for p in e.postings]
    if not legs:
        return
    accounts = sorted({p.account_id: p.currency for _, p in legs}.items())
    await conn.execute(
        OPEN_ACCOUNTS,
        [a for a, _ in accounts],
        [PLATFORM] * len(accounts),
        [a.split(":")[1] for a, _ in accounts],
        [currency for _, currency in accounts],
        BALANCE_SHARDS,
    )
    net = net_by_account(p for _, p in legs)
    await conn.execute(
        WRITE_ENTRIES,
        now,
        [e.id for e in entries],
        [e.kind for e in entries],
        [e.effective_at for e in entries],
        [entry for entry, _ in legs],
        [p.account_id for _, p in legs],
        [p.amount for _, p in legs],
        [p.currency for _, p in legs],
        sorted(net),
        [net[a] for a in sorted(net)],
    )
