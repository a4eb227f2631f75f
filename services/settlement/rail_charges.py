"""Booking what a rail charged settle: each charge once, as a balanced journal entry from the
platform's funding to its rail fees (`charge_postings`), beside the charge's record.

A charge is known by its rail's own reference (a bank's AcctSvcrRef for the fee entry on a
statement). `book_charges` records the charges not recorded before and books exactly those,
in one transaction: a statement read twice, or by two runs at once, books each fee once
(the second insert of a reference does nothing and books nothing). The entries belong to no
settlement, so a settlement's postings still say only where its own money is.

With booking and the transitions, this is the third writer of postings; like them it opens
the accounts it posts to and moves their balances on a free shard.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from typing import NamedTuple

import asyncpg

from services.domain.balance_shards import BALANCE_SHARDS, free_shards
from services.domain.ids import uuid7
from services.domain.postings import PLATFORM, charge_postings, net_by_account
from services.settlement.transition_sql import OPEN_ACCOUNTS

ENTRY_KIND = "rail_charge"

RECORD_CHARGES = """
INSERT INTO rail_charges (rail, reference, entry_id, amount, currency, charged_on,
                          end_to_end_id, recorded_at)
SELECT c.rail, c.reference, c.entry_id, c.amount, c.currency, c.charged_on, c.e2e, $8
  FROM unnest($1::text[], $2::text[], $3::uuid[], $4::bigint[], $5::text[], $6::date[],
              $7::text[]) AS c(rail, reference, entry_id, amount, currency, charged_on, e2e)
ON CONFLICT DO NOTHING
RETURNING entry_id
"""
WRITE_ENTRIES = f"""
WITH entries AS (
    INSERT INTO journal_entries (id, tenant, settlement_id, kind, occurred_at, effective_at)
    SELECT e, '{PLATFORM}', NULL, '{ENTRY_KIND}', $1, t
      FROM unnest($2::uuid[], $9::timestamptz[]) AS c(e, t)
), legs AS (
    INSERT INTO postings (entry_id, account_id, amount, currency, occurred_at)
    SELECT p.entry_id, p.account_id, p.amount, p.currency, $1
      FROM unnest($3::uuid[], $4::text[], $5::bigint[], $6::text[])
           AS p(entry_id, account_id, amount, currency)
), shards AS MATERIALIZED ({free_shards("$7::text[]", "0")}
)
UPDATE account_balances AS b SET balance = b.balance + d.delta
  FROM unnest($7::text[], $8::bigint[]) AS d(account_id, delta)
  JOIN shards USING (account_id)
 WHERE b.account_id = d.account_id AND b.shard = shards.shard
"""


class RailCharge(NamedTuple):
    """One charge a rail took from settle's own account."""

    rail: str
    reference: str  # the rail's own reference for the charge
    amount: int  # minor units, positive
    currency: str
    charged_on: date  # the rail's booking date
    end_to_end_id: str | None  # the charged transfer (or settlement), when the rail names it
    charged_at: datetime | None = None  # when the rail took it, if it says more than the day

    @property
    def effective_at(self) -> datetime:
        """The entry's date: when the rail took the charge (its booking day's start, if only
        the day is known)."""
        return self.charged_at or datetime.combine(self.charged_on, time(), UTC)


async def book_charges(pool: asyncpg.Pool, charges: Sequence[RailCharge], *, now: datetime) -> int:
    """Book each of `charges` not booked before; how many were booked now."""
    if not charges:
        return 0
    planned = {uuid7(): c for c in charges}
    async with pool.acquire() as conn, conn.transaction():
        recorded = await conn.fetch(
            RECORD_CHARGES,
            [c.rail for c in planned.values()],
            [c.reference for c in planned.values()],
            list(planned),
            [c.amount for c in planned.values()],
            [c.currency for c in planned.values()],
            [c.charged_on for c in planned.values()],
            [c.end_to_end_id for c in planned.values()],
            now,
        )
        booked = {r["entry_id"]: planned[r["entry_id"]] for r in recorded}
        if booked:
            await _write_entries(conn, booked, now)
    return len(booked)


async def _write_entries(
    conn: asyncpg.Connection, booked: dict[uuid.UUID, RailCharge], now: datetime
) -> None:
    legs = [
        (entry, p) for entry, c in booked.items() for p in charge_postings(c.amount, c.currency)
    ]
    net = net_by_account(p for _, p in legs)
    accounts = sorted({p.account_id: p.currency for _, p in legs}.items())
    await conn.execute(
        OPEN_ACCOUNTS,
        [a for a, _ in accounts],
        [PLATFORM] * len(accounts),
        [a.split(":")[1] for a, _ in accounts],
        [currency for _, currency in accounts],
        BALANCE_SHARDS,
    )
    await conn.execute(
        WRITE_ENTRIES,
        now,
        list(booked),
        [entry for entry, _ in legs],
        [p.account_id for _, p in legs],
        [p.amount for _, p in legs],
        [p.currency for _, p in legs],
        sorted(net),
        [net[a] for a in sorted(net)],
        [c.effective_at for c in booked.values()],
    )
