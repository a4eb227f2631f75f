"""One balanced journal entry between settle's own accounts (an operator's write-off or
adjustment), in the caller's transaction, beside the operator's audit row.

It is booked as a rail's charge is (services/settlement/rail_charges.py): the accounts
opened where missing (`OPEN_ACCOUNTS`), the entry of the platform with no settlement, its
postings, and each account's balance moved on a free shard, in one statement. The database
checks the entry balances when the transaction commits.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import asyncpg

from services.domain.balance_shards import BALANCE_SHARDS, free_shards
from services.domain.ids import uuid7
from services.domain.postings import PLATFORM, Posting, is_balanced, net_by_account
from services.settlement.transition_sql import OPEN_ACCOUNTS

WRITE_ENTRY = f"""
WITH entry AS (
    INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at)
    VALUES ($1, '{PLATFORM}', NULL, $2, $3)
), legs AS (
    INSERT INTO postings (entry_id, account_id, amount, currency, occurred_at)
    SELECT $1, p.account_id, p.amount, p.currency, $3
      FROM unnest($4::text[], $5::bigint[], $6::text[]) AS p(account_id, amount, currency)
), shards AS MATERIALIZED ({free_shards("$7::text[]", "0")}
)
UPDATE account_balances AS b SET balance = b.balance + d.delta
  FROM unnest($7::text[], $8::bigint[]) AS d(account_id, delta)
  JOIN shards USING (account_id)
 WHERE b.account_id = d.account_id AND b.shard = shards.shard
"""


def postings_document(postings: Sequence[Posting]) -> list[dict[str, object]]:
    """An entry's postings as answers and audit rows write them."""
    return [p._asdict() for p in postings]


async def book_platform_entry(
    conn: asyncpg.Connection, kind: str, postings: Sequence[Posting], now: datetime
) -> uuid.UUID:
    """Book `postings` (balanced, on the platform's accounts) as one entry of `kind`; its id."""
    if not postings or not is_balanced(postings):
        raise ValueError(f"a {kind} entry must balance per currency: {postings!r}")
    accounts = sorted({p.account_id: p.currency for p in postings}.items())
    await conn.execute(
        OPEN_ACCOUNTS,
        [a for a, _ in accounts],
        [PLATFORM] * len(accounts),
        [a.split(":")[1] for a, _ in accounts],
        [currency for _, currency in accounts],
        BALANCE_SHARDS,
    )
    net = net_by_account(postings)
    entry = uuid7()
    await conn.execute(
        WRITE_ENTRY,
        entry,
        kind,
        now,
        [p.account_id for p in postings],
        [p.amount for p in postings],
        [p.currency for p in postings],
        sorted(net),
        [net[a] for a in sorted(net)],
    )
    return entry
