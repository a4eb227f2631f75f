"""The nostro view's records in PostgreSQL (migration 0006): the rail's balance each run read,
and the ledger's postings over a window summed per account.

A run's balance is recorded while the run is running (the database refuses it afterwards); a
later run opens from the latest balance of a completed run, so a failed run's reading is
never anyone's opening. PostgreSQL out of reach raises StoreUnavailable.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.instruction import InstructionStatus as I
from services.domain.postings import Posting
from services.reconcile.ledger_source import RAILS_READ

RECORD_BALANCE = """
INSERT INTO reconciliation_balances (run_id, currency, as_of, balance, quiet)
SELECT $1, b.currency, $2, b.balance, $5
  FROM unnest($3::text[], $4::bigint[]) AS b(currency, balance)
"""
# The latest reading at or before the cut-off that a completed, quiet run stands behind.
OPENING = """
SELECT b.as_of, b.currency, b.balance
  FROM reconciliation_balances AS b
 WHERE b.run_id = (SELECT o.run_id FROM reconciliation_balances AS o
                     JOIN reconciliation_runs AS r ON r.id = o.run_id
                    WHERE o.as_of <= $1 AND o.quiet AND r.status = 'completed'
                    ORDER BY o.as_of DESC, o.run_id DESC LIMIT 1)
"""
# Entries are cut by when the rail moved the money (`effective_at`, else when recorded), as
# the rail's balance transactions are. The rail acts before settle records it, so an entry
# effective in the window was recorded in it or later: the index on `occurred_at` bounds the
# scan from the window's start, less what the rail's clock may run ahead of ours.
RAIL_CLOCK_AHEAD = "5 minutes"
# Summed in the database per account: a window's postings never come into memory one by one.
# bigint: sum() of bigint is numeric, which asyncpg would hand over as a Decimal.
# Only the money of the rails that move it through this Stripe account (and entries of no
# settlement): the SEPA rail's moves are on the bank account, not on this balance.
POSTINGS_BETWEEN = f"""
SELECT p.account_id, p.currency, sum(p.amount)::bigint AS amount
  FROM journal_entries AS e
  JOIN postings AS p ON p.entry_id = e.id
 WHERE e.occurred_at >= $1::timestamptz - interval '{RAIL_CLOCK_AHEAD}'
   AND coalesce(e.effective_at, e.occurred_at) >= $1
   AND coalesce(e.effective_at, e.occurred_at) < $2
   AND (e.settlement_id IS NULL
        OR EXISTS (SELECT 1 FROM settlements AS s
                    WHERE s.id = e.settlement_id AND s.rail IN {RAILS_READ}))
 GROUP BY p.account_id, p.currency
 ORDER BY p.account_id, p.currency
"""


# Any rail instruction mid-dispatch (read through the index of pending and processing rows).
MID_DISPATCH = f"""
SELECT EXISTS (SELECT 1 FROM rail_instructions
                WHERE status = '{I.PROCESSING}' AND rail IN {RAILS_READ})
"""


class Balance(NamedTuple):
    """The rail's balance as of a cut-off: what every movement created before it adds up to."""

    as_of: datetime  # the cut-off, a whole second
    by_currency: Mapping[str, int]  # signed minor units, available + pending


async def record_balance(
    conn: asyncpg.Connection | asyncpg.Pool, run_id: int, balance: Balance, *, quiet: bool
) -> None:
    """Record `balance` as what running run `run_id` read (`quiet`: all its items agreed)."""
    currencies = sorted(balance.by_currency)
    amounts = [balance.by_currency[c] for c in currencies]
    with unavailable_when_down("PostgreSQL is unreachable; the balance was not recorded"):
        await conn.execute(RECORD_BALANCE, run_id, balance.as_of, currencies, amounts, quiet)


async def opening_balance(
    conn: asyncpg.Connection | asyncpg.Pool, cut_off: datetime
) -> Balance | None:
    """The latest balance a completed, quiet run recorded as of `cut_off` or before; None if
    none."""
    with unavailable_when_down("PostgreSQL is unreachable; no balance was read"):
        rows = await conn.fetch(OPENING, cut_off)
    if not rows:
        return None
    return Balance(rows[0]["as_of"], {r["currency"]: r["balance"] for r in rows})


async def postings_between(
    conn: asyncpg.Connection | asyncpg.Pool, start: datetime, end: datetime
) -> list[Posting]:
    """The postings of journal entries effective in [start, end), one summed line per
    account."""
    with unavailable_when_down("PostgreSQL is unreachable; no posting was read"):
        rows = await conn.fetch(POSTINGS_BETWEEN, start, end)
    return [Posting(r["account_id"], r["amount"], r["currency"]) for r in rows]


async def mid_dispatch(conn: asyncpg.Connection | asyncpg.Pool) -> bool:
    """Whether any rail instruction is being sent now: the rail may be ahead of the ledger."""
    with unavailable_when_down("PostgreSQL is unreachable; no instruction was read"):
        return bool(await conn.fetchval(MID_DISPATCH))
