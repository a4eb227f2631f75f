"""Which items a re-check compares again: open breaks and `submitted` settlements that crossed
a re-check age since the last completed re-check (the rule is `schedule.recheck_bounds`).

An open break ages from its first_seen; a `submitted` settlement from its updated_at, which
is when it became `submitted` (any later change leaves that status). Both are read a page at
a time by id; what a re-check keeps is the ids, the objects are read one page at a time by
the engine. PostgreSQL out of reach raises StoreUnavailable.
"""

from __future__ import annotations

import uuid

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.reconcile.ledger_source import RAILS_READ
from services.reconcile.outcome import ById
from services.reconcile.schedule import AgeBounds

PAGE_SIZE = 1000

_CROSSED = """EXISTS (SELECT 1 FROM unnest($1::timestamptz[], $2::timestamptz[]) AS b(after, until)
                WHERE {origin} > b.after AND {origin} <= b.until)"""
DUE_SETTLEMENTS = f"""
SELECT id FROM settlements
 WHERE status = 'submitted' AND rail IN {RAILS_READ} AND id > $3
   AND {_CROSSED.format(origin="updated_at")}
 ORDER BY id LIMIT $4
"""
DUE_BREAKS = f"""
SELECT id, settlement_id, rail_object_id FROM reconciliation_breaks
 WHERE status = 'open' AND id > $3 AND {_CROSSED.format(origin="first_seen")}
 ORDER BY id LIMIT $4
"""


async def due(
    conn: asyncpg.Connection | asyncpg.Pool,
    bounds: tuple[AgeBounds, ...],
    page_size: int = PAGE_SIZE,
) -> ById:
    """The settlements and rail objects to compare again: those of the open breaks and the
    `submitted` settlements whose origin lies in one of `bounds`."""
    if not bounds:
        return ById(frozenset(), frozenset())
    afters, untils = [b.after for b in bounds], [b.until for b in bounds]
    settlements: set[str] = set()
    objects: set[str] = set()
    with unavailable_when_down("PostgreSQL is unreachable; no re-check was read"):
        after = uuid.UUID(int=0)
        while rows := await conn.fetch(DUE_SETTLEMENTS, afters, untils, after, page_size):
            settlements.update(str(r["id"]) for r in rows)
            after = rows[-1]["id"]
        last_id = 0
        while rows := await conn.fetch(DUE_BREAKS, afters, untils, last_id, page_size):
            settlements.update(str(r["settlement_id"]) for r in rows if r["settlement_id"])
            objects.update(r["rail_object_id"] for r in rows if r["rail_object_id"])
            last_id = rows[-1]["id"]
    return ById(frozenset(settlements), frozenset(objects))
