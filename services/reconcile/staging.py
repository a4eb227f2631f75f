"""A run's rail objects staged in PostgreSQL (migration 0007), so that no run holds the rail in
memory: the listed pages are copied in batches, then read back joined in SQL, a page at a
time, in two ordered streams:

    owned    the window's settlements by id, each with the staged objects it owns
    unowned  the listed objects no window settlement owns, those naming no settlement first,
             then by the settlement id their metadata names

An object belongs to a settlement as `compare` has it: the settlement's `rail_reference`
names it, or its `metadata.settlement_id` is the settlement's id as text. An object staged
twice (listed twice) is read as its last copy. Each stream is one query read through a
cursor, joined by hash rather than looked up per page: looked up a page of 1,000 at a time
by index, the settlements and their objects cost 100 ms a page in random reads here.
PostgreSQL out of reach raises StoreUnavailable.

The table is UNLOGGED (no WAL for a copy of what the rail says), so a crash restart of
PostgreSQL empties it, possibly between two of a run's statements, each on a fresh connection.
Every read therefore first looks, on the connection it reads on, for the first row the run
staged (a restart empties the whole table, so that row is gone if any is): a connection that
lives from that look to the end of the read saw no restart, and a missing row raises
StagedRowsLost: read on, the emptied table would hide what only the listing shows (duplicates,
strays) in a run reported complete. One index probe, not a count: a run over a million
objects reads many pages.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Iterable, Sequence
from datetime import datetime, timedelta
from typing import cast

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import LedgerRecord, RailObject
from services.reconcile.errors import StagedRowsLost
from services.reconcile.ledger_source import DUE_ON, ledger_record

TABLE = "reconciliation_rail_staging"
BATCH_ROWS = 5000  # objects copied at a time: the most a run holds before they are staged
FETCH_ROWS = 2000  # rows a stream's cursor brings at a time
# A stream's joins sort and hash the whole window once: in memory rather than in batches on
# disk, and without JIT, which cost 2.6 s of compiling for a 100,000-settlement window.
# A plan made for this window's bounds, never the generic one a prepared statement falls back
# to: not knowing how recent `since` is, that one scans every settlement and transition.
STREAM_SETTINGS = (
    "SET LOCAL jit = off; SET LOCAL work_mem = '64MB'; "
    "SET LOCAL plan_cache_mode = force_custom_plan"
)
# A run still `running` this long after it started is taken as crashed: its rows may go.
ABANDONED_AFTER = timedelta(hours=1)
_DOWN = "PostgreSQL is unreachable; the rail's objects could not be staged"
_COLUMNS = (
    "run_id",
    "seq",
    "listed",
    "object_id",
    "kind",
    "amount",
    "amount_reversed",
    "currency",
    "destination",
    "status",
    "created",
    "settlement_id",
    "arrival",
)
_OBJECT = """st.object_id, st.kind, st.amount, st.amount_reversed, st.currency, st.destination,
       st.status, st.created, st.settlement_id, st.arrival"""
# $1 run, [$2, $3) the window, $4 the rails whose settlements the run reads. sent_at and
# due_on as ledger_source reads them.
# Settlements changed since $2 (`updated_at >= $2`): each change writes a transition stamped
# as `updated_at`, and their index (0011) reads the window's rows, not every settlement.
_WINDOW = """
w AS (SELECT s.id, s.tenant, s.amount, s.currency, s.destination, s.status, s.rail_reference,
             s.amount_reversed
        FROM settlements AS s
       WHERE s.id IN (SELECT c.settlement_id FROM settlement_transitions AS c
                       WHERE c.occurred_at >= $2)
         AND s.created_at < $3 AND s.rail = ANY($4::text[]))"""
OWNED = f"""
WITH {_WINDOW},
sent AS (SELECT t.settlement_id, min(t.occurred_at) AS sent_at FROM settlement_transitions AS t
          WHERE t.to_status <> 'accepted' AND t.settlement_id IN (SELECT w.id FROM w)
          GROUP BY t.settlement_id),
own AS (SELECT w.id AS owner, st.seq, {_OBJECT}
          FROM w JOIN {TABLE} AS st ON st.run_id = $1 AND st.object_id = w.rail_reference
        UNION ALL
        SELECT w.id, st.seq, {_OBJECT}
          FROM w JOIN {TABLE} AS st ON st.run_id = $1 AND st.settlement_id = w.id::text
         WHERE st.object_id IS DISTINCT FROM w.rail_reference)
SELECT w.id, w.tenant, w.amount, w.currency, w.destination, w.status, w.rail_reference,
       sent.sent_at, own.object_id AS o_id, own.kind AS o_kind, own.amount AS o_amount,
       own.amount_reversed AS o_reversed, own.currency AS o_currency,
       own.destination AS o_destination, own.status AS o_status, own.created AS o_created,
       own.settlement_id AS o_settlement_id, own.arrival AS o_arrival, w.amount_reversed,
       {DUE_ON.format(id="w.id")}
  FROM w LEFT JOIN sent ON sent.settlement_id = w.id LEFT JOIN own ON own.owner = w.id
 ORDER BY w.id, own.seq
"""
UNOWNED = f"""
WITH {_WINDOW}
SELECT {_OBJECT} FROM {TABLE} AS st
 WHERE st.run_id = $1 AND st.listed
   AND NOT EXISTS (SELECT 1 FROM w WHERE w.rail_reference = st.object_id)
   AND NOT EXISTS (SELECT 1 FROM w WHERE w.id::text = st.settlement_id)
 ORDER BY st.settlement_id NULLS FIRST, st.object_id, st.seq
"""
BY_OBJECT_IDS = f"""
SELECT {_OBJECT} FROM {TABLE} AS st
 WHERE st.run_id = $1 AND st.object_id = ANY($2::text[]) ORDER BY st.seq
"""
STILL_STAGED = (
    f"SELECT EXISTS (SELECT FROM {TABLE} WHERE run_id = $1 AND object_id = $2 AND seq = $3)"
)
CLEAR_ABANDONED = f"""
DELETE FROM {TABLE} WHERE run_id IN (
    SELECT r.id FROM reconciliation_runs AS r
     WHERE r.id IN (SELECT DISTINCT run_id FROM {TABLE}) AND r.id <> $1
       AND (r.status <> 'running' OR r.started_at < $2))
"""
_KINDS = {m.value: m for m in PayoutMethod}  # a lookup: an Enum call costs more than the row
OwnedPage = list[tuple[LedgerRecord, dict[str, RailObject]]]


def _row(run_id: int, seq: int, listed: bool, obj: RailObject) -> tuple[object, ...]:
    return (run_id, seq, listed, *obj)


def rail_object(row: asyncpg.Record, at: int = 0) -> RailObject:
    """The staged object in `row`'s columns from `at` on, as it was listed."""
    return RailObject(row[at], _KINDS[row[at + 1]], *row[at + 2 : at + 10])


class Staging:
    """One run's staged objects; `drop` them when the run ends."""

    def __init__(self, pool: asyncpg.Pool, run_id: int, rails: Sequence[str]) -> None:
        self._pool, self.run_id = pool, run_id
        self.rails = list(rails)  # the rails whose settlements the run compares
        self._seq = itertools.count()
        self.listed = 0  # objects the window's lists returned
        self.retrieved = 0  # objects fetched by id and staged
        self._first: tuple[str, int] | None = None  # object id and seq of the first row staged

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
        with unavailable_when_down(_DOWN):
            await self._pool.execute(f"ANALYZE {TABLE}")  # the streams' joins are planned on it

    async def add_retrieved(self, objects: Sequence[RailObject]) -> None:
        """Stage objects fetched by id, so that the run counts them and finds them again."""
        await self._copy([_row(self.run_id, next(self._seq), False, o) for o in objects])

    async def owned(
        self, start: datetime, end: datetime, page_size: int
    ) -> AsyncGenerator[OwnedPage, None]:
        """The settlements alive in [start, end), by id, `page_size` at a time, each with the
        staged objects it owns by object id."""
        page: OwnedPage = []
        async for row in self._stream(OWNED, start, end):
            if not page or page[-1][0].settlement_id != str(row[0]):
                if len(page) >= page_size:
                    yield page
                    page = []
                page.append((ledger_record(row), {}))
            if row[8] is not None:
                obj = rail_object(row, 8)
                page[-1][1][obj.object_id] = obj
        if page:
            yield page

    async def unowned(
        self, start: datetime, end: datetime, page_size: int
    ) -> AsyncGenerator[list[RailObject], None]:
        """The listed objects no settlement alive in [start, end) owns, last copies only:
        those naming no settlement `page_size` at a time, then those naming the next
        `page_size` settlements (as text)."""
        page: dict[str, RailObject] = {}
        names: set[str] = set()  # the settlements the page's objects name
        async for row in self._stream(UNOWNED, start, end):
            obj = rail_object(row)
            name = obj.settlement_id
            if page and obj.object_id not in page:
                if name is None:
                    full = len(page) >= page_size
                else:  # the first named object ends a page of anonymous ones
                    full = not names or (name not in names and len(names) >= page_size)
                if full:
                    yield list(page.values())
                    page, names = {}, set()
            if name is not None:
                names.add(name)
            page[obj.object_id] = obj
        if page:
            yield list(page.values())

    async def by_object_ids(self, object_ids: Iterable[str]) -> dict[str, RailObject]:
        """The staged objects with these ids, by id."""
        with unavailable_when_down(_DOWN):
            async with self._pool.acquire() as conn:
                await self._check_intact(conn)
                rows = await conn.fetch(BY_OBJECT_IDS, self.run_id, sorted(set(object_ids)))
        return {o.object_id: o for o in map(rail_object, rows)}

    async def drop(self) -> None:
        """Delete this run's rows."""
        with unavailable_when_down(_DOWN):
            await self._pool.execute(f"DELETE FROM {TABLE} WHERE run_id = $1", self.run_id)

    async def _stream(
        self, query: str, start: datetime, end: datetime
    ) -> AsyncIterator[asyncpg.Record]:
        """`query`'s rows for this run and window, through a cursor (one snapshot)."""
        with unavailable_when_down(_DOWN):
            async with self._pool.acquire() as conn, conn.transaction(readonly=True):
                await conn.execute(STREAM_SETTINGS)
                await self._check_intact(conn)
                cursor = await conn.cursor(query, self.run_id, start, end, self.rails)
                # fetched a batch at a time: row by row, asyncpg's checks cost more than a row
                while rows := await cursor.fetch(FETCH_ROWS):
                    for row in rows:
                        yield row

    async def _check_intact(self, conn: asyncpg.Connection) -> None:
        if self._first is None:
            return  # nothing staged, nothing to lose
        if not await conn.fetchval(STILL_STAGED, self.run_id, *self._first):
            raise StagedRowsLost(self.run_id, self.listed + self.retrieved)

    async def _copy(self, rows: list[tuple[object, ...]]) -> None:
        if not rows:
            return
        with unavailable_when_down(_DOWN):
            await self._pool.copy_records_to_table(TABLE, records=rows, columns=_COLUMNS)
        if self._first is None:
            _, seq, _, object_id = rows[0][:4]
            self._first = (cast(str, object_id), cast(int, seq))
        listed = sum(1 for r in rows if r[2])
        self.listed += listed
        self.retrieved += len(rows) - listed
