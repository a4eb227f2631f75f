"""A run's rail objects staged in PostgreSQL (migration 0008), so that no run holds the rail in
memory: the listed pages are copied in batches, and read back only as a ledger page asks for
the objects its settlements own, or as the objects no window settlement owns are paged.

An object belongs to a settlement as `compare` has it: the settlement's `rail_reference`
names it, or its `metadata.settlement_id` is the settlement's id as text. An object staged
twice (listed twice) is read as its last copy. PostgreSQL out of reach raises
StoreUnavailable.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterable, Iterable, Sequence
from datetime import datetime, timedelta

import asyncpg

from services.reconcile.model import LedgerRecord, RailObject
from services.shared.domain.payout import PayoutMethod
from services.shared.store_errors import unavailable_when_down

TABLE = "reconciliation_rail_staging"
BATCH_ROWS = 5000  # objects copied at a time: the most a run holds before they are staged
# A run still `running` this long after it started is taken as crashed: its rows may go.
ABANDONED_AFTER = timedelta(hours=1)
_DOWN = "PostgreSQL is unreachable; the rail's objects could not be staged"
_COLUMNS = ("run_id", "seq", "listed", "object_id", "kind", "amount", "amount_reversed",
            "currency", "destination", "status", "created", "settlement_id")  # fmt: skip
_OBJECT = """object_id, kind, amount, amount_reversed, currency, destination, status, created,
       settlement_id"""
OWNED = f"""
SELECT {_OBJECT} FROM {TABLE}
 WHERE run_id = $1 AND (object_id = ANY($2::text[]) OR settlement_id = ANY($3::text[]))
 ORDER BY seq
"""
# Owned by a settlement alive in the window ($3, $4): named by its reference, or naming it.
# Only the canonical text of a UUID names a settlement (`compare` matches text to text).
_CANONICAL_UUID = "'^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$'"
_UNOWNED = f"""
st.run_id = $1 AND st.listed
AND NOT EXISTS (SELECT 1 FROM settlements AS w WHERE w.rail_reference = st.object_id
                   AND w.updated_at >= $3 AND w.created_at < $4)
AND NOT EXISTS (SELECT 1 FROM settlements AS w
                 WHERE w.id = CASE WHEN st.settlement_id ~ {_CANONICAL_UUID}
                                   THEN st.settlement_id::uuid END
                   AND w.updated_at >= $3 AND w.created_at < $4)
"""
UNOWNED_ANONYMOUS = f"""
SELECT {_OBJECT} FROM {TABLE} AS st
 WHERE st.settlement_id IS NULL AND st.object_id > $2 AND {_UNOWNED}
 ORDER BY st.object_id, st.seq LIMIT $5
"""
UNOWNED_NAMED = f"""
WITH names AS (
    SELECT DISTINCT st.settlement_id FROM {TABLE} AS st
     WHERE st.settlement_id > $2 AND {_UNOWNED}
     ORDER BY st.settlement_id LIMIT $5)
SELECT {_OBJECT} FROM {TABLE} AS st JOIN names USING (settlement_id)
 WHERE {_UNOWNED}
 ORDER BY st.settlement_id, st.seq
"""
CLEAR_ABANDONED = f"""
DELETE FROM {TABLE} WHERE run_id IN (
    SELECT r.id FROM reconciliation_runs AS r
     WHERE r.id IN (SELECT DISTINCT run_id FROM {TABLE}) AND r.id <> $1
       AND (r.status <> 'running' OR r.started_at < $2))
"""


def _row(run_id: int, seq: int, listed: bool, obj: RailObject) -> tuple[object, ...]:
    return (run_id, seq, listed, *obj)


def rail_object(row: asyncpg.Record) -> RailObject:
    """A staged row read back as the object it was."""
    return RailObject(row[0], PayoutMethod(row[1]), *row[2:])


class Staging:
    """One run's staged objects; `drop` them when the run ends."""

    def __init__(self, pool: asyncpg.Pool, run_id: int) -> None:
        self._pool, self.run_id = pool, run_id
        self._seq = itertools.count()
        self.listed = 0  # objects the window's lists returned
        self.retrieved = 0  # objects fetched by id and staged

    async def clear_abandoned(self, now: datetime) -> None:
        """Delete the rows of runs that ended without deleting them (they crashed)."""
        with unavailable_when_down(_DOWN):
            await self._pool.execute(CLEAR_ABANDONED, self.run_id, now - ABANDONED_AFTER)

    async def list_in(self, pages: AsyncIterable[Sequence[RailObject]]) -> None:
        """Stage every listed object, `BATCH_ROWS` at a time."""
        batch: list[tuple[object, ...]] = []
        async for page in pages:
            batch.extend(_row(self.run_id, next(self._seq), True, o) for o in page)
            if len(batch) >= BATCH_ROWS:
                await self._copy(batch)
                batch = []
        await self._copy(batch)

    async def add_retrieved(self, objects: Sequence[RailObject]) -> None:
        """Stage objects fetched by id, so a later page finds them staged."""
        await self._copy([_row(self.run_id, next(self._seq), False, o) for o in objects])

    async def owned(
        self, records: Iterable[LedgerRecord], *, by_name: bool = True
    ) -> dict[str, RailObject]:
        """The staged objects these settlements' references name and, `by_name`, the objects
        naming them, by object id."""
        records = list(records)
        references = [r.rail_reference for r in records if r.rail_reference]
        ids = [r.settlement_id for r in records] if by_name else []
        with unavailable_when_down(_DOWN):
            rows = await self._pool.fetch(OWNED, self.run_id, references, ids)
        return {o.object_id: o for o in map(rail_object, rows)}

    async def unowned(
        self, start: datetime, end: datetime, named: bool, after: str, limit: int
    ) -> list[RailObject]:
        """The next listed objects no settlement alive in [start, end) owns: without a named
        settlement, the `limit` next by object id; else every one naming the `limit` next
        settlement ids (as text) after `after`, by name."""
        query = UNOWNED_NAMED if named else UNOWNED_ANONYMOUS
        with unavailable_when_down(_DOWN):
            rows = await self._pool.fetch(query, self.run_id, after, start, end, limit)
        return list({o.object_id: o for o in map(rail_object, rows)}.values())

    async def drop(self) -> None:
        """Delete this run's rows."""
        with unavailable_when_down(_DOWN):
            await self._pool.execute(f"DELETE FROM {TABLE} WHERE run_id = $1", self.run_id)

    async def _copy(self, rows: list[tuple[object, ...]]) -> None:
        if not rows:
            return
        with unavailable_when_down(_DOWN):
            await self._pool.copy_records_to_table(TABLE, records=rows, columns=_COLUMNS)
        listed = sum(1 for r in rows if r[2])
        self.listed += listed
        self.retrieved += len(rows) - listed
