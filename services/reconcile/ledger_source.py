"""The ledger side of a reconciliation: settlements read from PostgreSQL as `LedgerRecord`s.

A window's settlements (created before its end, changed at or after its start) are streamed
with the objects each owns by staging.py, through a cursor a page at a time, so no run holds
the table in memory; this module reads the settlements a rail object names from outside the
window, by id, a bounded page of ids at a time. PostgreSQL out of reach raises
StoreUnavailable.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.adapters.stripe.source import STRIPE_API_RAILS
from services.domain.reconciliation import LedgerRecord
from services.domain.settlement import SettlementStatus

PAGE_SIZE = 1000
# The settlements a reconciliation of Stripe's API reads: those of the rails that speak it
# (the SEPA rail's are the bank statements' to prove); as an SQL list for the nostro view.
RAILS_READ = "(" + ", ".join(f"'{rail}'" for rail in STRIPE_API_RAILS) + ")"
_STATUSES = {s.value: s for s in SettlementStatus}  # a lookup: an Enum call costs more than a row

# sent_at: the first move out of `accepted`, i.e. when the settlement was first handed on to
# the rail (a refusal before sending has no object either, and `failed` expects none).
# due_on: the execution date of the bank file the transfer is in (other rails have none),
# for the settlement whose id is `{id}`.
DUE_ON = """(SELECT f.execution_date FROM rail_instructions AS i JOIN bank_files AS f
            ON f.msg_id = i.bank_file
         WHERE i.settlement_id = {id}) AS due_on"""
_COLUMNS = f"""
SELECT s.id, s.tenant, s.amount, s.currency, s.destination, s.status, s.rail_reference,
       s.amount_reversed,
       (SELECT min(t.occurred_at) FROM settlement_transitions AS t
         WHERE t.settlement_id = s.id AND t.to_status <> 'accepted') AS sent_at,
       {DUE_ON.format(id="s.id")}
  FROM settlements AS s
"""
BY_IDS = _COLUMNS + " WHERE s.id = ANY($1::uuid[]) AND s.rail = ANY($2::text[]) ORDER BY s.id"


def ledger_record(row: asyncpg.Record) -> LedgerRecord:
    """One settlement row as reconciliation compares it."""
    status = _STATUSES[row["status"]]
    sent_at: datetime | None = row["sent_at"]
    return LedgerRecord(
        str(row["id"]),
        row["tenant"],
        row["amount"],
        row["currency"],
        row["destination"],
        status,
        row["amount_reversed"],
        row["rail_reference"],
        int(sent_at.timestamp()) if sent_at is not None else None,
        row["due_on"],
    )


FIRST_CLAIMS = """
SELECT DISTINCT ON (rail_reference) rail_reference, id FROM settlements
 WHERE rail_reference = ANY($1::text[]) ORDER BY rail_reference, id
"""


async def first_claims(
    conn: asyncpg.Connection | asyncpg.Pool, records: Iterable[LedgerRecord]
) -> dict[str, str]:
    """The first settlement (by id) in the whole ledger that names each of the records' rail
    references."""
    return await claims_of(conn, (r.rail_reference for r in records if r.rail_reference))


async def claims_of(
    conn: asyncpg.Connection | asyncpg.Pool, object_ids: Iterable[str]
) -> dict[str, str]:
    """The first settlement (by id) in the whole ledger that names each of these rail objects
    as its rail reference; an object no settlement names is left out."""
    references = sorted(set(object_ids))
    if not references:
        return {}
    rows = await conn.fetch(FIRST_CLAIMS, references)
    return {r["rail_reference"]: str(r["id"]) for r in rows}


async def by_ids(
    conn: asyncpg.Connection | asyncpg.Pool,
    settlement_ids: Iterable[str],
    rails: Sequence[str] = STRIPE_API_RAILS,
) -> list[LedgerRecord]:
    """The settlements of `rails` with these ids that exist (an id that is no UUID names
    none)."""
    wanted = sorted({u for u in (_uuid(s) for s in settlement_ids) if u is not None})
    if not wanted:
        return []
    with unavailable_when_down("PostgreSQL is unreachable; no settlement was read"):
        rows = await conn.fetch(BY_IDS, wanted, list(rails))
    return [ledger_record(r) for r in rows]


def _uuid(text: str) -> uuid.UUID | None:
    # Rail metadata is written by whoever created the object: it may name anything.
    try:
        return uuid.UUID(text)
    except ValueError:
        return None
