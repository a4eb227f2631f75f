"""Booking what a rail charged settle: each charge once, as a balanced journal entry from the
platform's funding to its rail fees (`charge_postings`), beside the charge's record.

A charge is known by its rail's own reference (a bank's AcctSvcrRef for the fee entry on a
statement). `book_charges` records the charges not recorded before and books exactly those,
in one transaction: a statement read twice, or by two runs at once, books each fee once
(the second insert of a reference does nothing and books nothing). The entries belong to no
settlement, so a settlement's postings still say only where its own money is.

The entries are written by the platform's one entry writer (`platform_entries.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from typing import NamedTuple

import asyncpg

from services.domain.ids import uuid7
from services.domain.postings import charge_postings
from services.settlement.platform_entries import PlatformEntry, book_platform_entries

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
        await book_platform_entries(
            conn,
            [
                PlatformEntry(
                    entry, ENTRY_KIND, charge_postings(c.amount, c.currency), c.effective_at
                )
                for entry, c in booked.items()
            ],
            now,
        )
    return len(booked)
