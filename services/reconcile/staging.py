"""A run's rail objects staged in PostgreSQL (migration 0007), so that no run holds the rail in
memory: the listed pages are copied in batches, then read back joined in SQL, a page at a
time, in two ordered streams (their statements: staging_sql.py):

    owned    the window's settlements by id, each with the staged objects it owns
    unowned  the listed objects no window settlement owns, those naming no settlement first,
             then by the settlement id their metadata names

An object belongs to a settlement as `compare` has it: the settlement's `rail_reference`
names it, or its `metadata.settlement_id` is the settlement's id as text. An object staged
twice (listed twice) is read as its last copy. Each stream is one query read through a
cursor, joined by hash rather than looked up per page: looked up a page of 1,000 at a time
by index, the settlements and their objects cost 100 ms a page in random reads here.
PostgreSQL out of reach raises StoreUnavailable.

A listing that stages itself (`SelfStaging`: a statement's files, copied while they are read,
then amended in SQL) is handed the staging instead of being paged in; once it calls `judge`,
both streams are the parts of one statement (`staging_sql.JUDGED`): the settlements that
plainly agree with their object never leave PostgreSQL, they are only counted (`unpaged`).

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
from typing import Protocol, cast, runtime_checkable

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import LedgerRecord, RailObject
from services.reconcile.errors import StagedRowsLost
from services.reconcile.ledger_source import ledger_record
from services.reconcile.staging_sql import (
    AGREEING,
    BY_OBJECT_IDS,
    CLEAR_ABANDONED,
    COLUMNS,
    JUDGED,
    OWNED,
    STILL_STAGED,
    TABLE,
    UNOWNED,
)

BATCH_ROWS = 5000  # objects copied at a time: the most a run holds before they are staged
FETCH_ROWS = 2000  # rows a stream's cursor brings at a time
# A stream's joins sort and hash the whole window once: in memory rather than in batches on
# disk, and without JIT, which cost 2.6 s of compiling for a 100,000-settlement window.
# A plan made for this window's bounds, never the generic one a prepared statement falls back
# to: not knowing how recent `since` is, that one scans every settlement and transition.
STREAM_SETTINGS = (
    "SET LOCAL jit = off; SET LOCAL work_mem = '{work_mem}'; "
    "SET LOCAL plan_cache_mode = force_custom_plan"
)
# The judged statement keeps the window (a million settlements: 180 MB) and hashes the staged
# objects (170 MB) in memory: spilled to disk, they cost a second more.
WORK_MEM, JUDGED_WORK_MEM = "64MB", "256MB"
# A run still `running` this long after it started is taken as crashed: its rows may go.
ABANDONED_AFTER = timedelta(hours=1)
_DOWN = "PostgreSQL is unreachable; the rail's objects could not be staged"
_KINDS = {m.value: m for m in PayoutMethod}  # a lookup: an Enum call costs more than the row
_PART, _TOTAL = 20, 21  # JUDGED's columns after OWNED's
OwnedPage = list[tuple[LedgerRecord, dict[str, RailObject]]]


def rail_object(row: asyncpg.Record, at: int = 0) -> RailObject:
    """The staged object in `row`'s columns from `at` on, as it was listed."""
    return RailObject(row[at], _KINDS[row[at + 1]], *row[at + 2 : at + 10])


@runtime_checkable
class SelfStaging(Protocol):
    """A listing that copies itself into a run's staging (a statement's files)."""

    async def stage(self, staging: Staging) -> None:
        """Stage every object, as `Staging.copy_in` does."""


class Staging:
    """One run's staged objects; `drop` them when the run ends."""

    def __init__(self, pool: asyncpg.Pool, run_id: int, rails: Sequence[str]) -> None:
        self.pool, self.run_id = pool, run_id  # the staged rows are read and written through it
        self.rails = list(rails)  # the rails whose settlements the run compares
        self._seq = itertools.count()
        self.listed = 0  # objects the window's lists returned
        self.retrieved = 0  # objects fetched by id and staged
        self._first: tuple[str, int] | None = None  # object id and seq of the first row staged
        self._uncompared: list[str] | None = None  # set by `judge`: the window judged in SQL
        self._judged: AsyncGenerator[asyncpg.Record, None] | None = None  # its open statement
        self._loose: asyncpg.Record | None = None  # its first row of part 2, read by `owned`
        self._total = 0  # judged: the settlements the window has
        self.unpaged = 0  # window settlements read but never paged: agreeing, or uncompared

    async def clear_abandoned(self, now: datetime) -> None:
        """Delete the rows of runs that ended without deleting them (they crashed)."""
        with unavailable_when_down(_DOWN):
            await self.pool.execute(CLEAR_ABANDONED, self.run_id, now - ABANDONED_AFTER)

    async def list_in(self, pages: AsyncIterable[Sequence[RailObject]]) -> None:
        """Stage every listed object, `BATCH_ROWS` at a time (a listing that stages itself
        is handed this staging instead)."""
        if isinstance(pages, SelfStaging):
            await pages.stage(self)
            return
        batch: list[tuple[object, ...]] = []
        async for page in pages:
            batch.extend(self._row(True, o) for o in page)
            if len(batch) >= BATCH_ROWS:
                await self._copy(batch)
                batch = []
        await self._copy(batch)
        await self.analyze()

    async def copy_in(self, objects: Iterable[tuple[bool, RailObject]]) -> None:
        """Stage each object, listed in the window or only there to be found by id, in one
        COPY fed as `objects` are read: PostgreSQL stores one while the next is read."""

        async def rows() -> AsyncIterator[tuple[object, ...]]:
            for listed, obj in objects:
                row = self._row(listed, obj)
                yield row
                self._counted(row)

        with unavailable_when_down(_DOWN):
            await self.pool.copy_records_to_table(TABLE, records=rows(), columns=COLUMNS)

    async def analyze(self) -> None:
        """Refresh the table's statistics: the streams' joins are planned on them."""
        with unavailable_when_down(_DOWN):
            await self.pool.execute(f"ANALYZE {TABLE}")

    async def add_retrieved(self, objects: Sequence[RailObject]) -> None:
        """Stage objects fetched by id, so that the run counts them and finds them again."""
        await self._copy([self._row(False, o) for o in objects])

    def judge(self, uncompared: Iterable[str]) -> None:
        """From now on read the window in one statement that leaves the agreeing settlements
        in PostgreSQL, and neither pages nor counts as agreeing the `uncompared` settlements.
        Only for staged objects unique by id (a statement's, checked when amended)."""
        self._uncompared = sorted(set(uncompared))

    async def owned(
        self, start: datetime, end: datetime, page_size: int
    ) -> AsyncGenerator[OwnedPage, None]:
        """The settlements alive in [start, end), by id, `page_size` at a time, each with the
        staged objects it owns by object id (judged: those SQL does not find agreeing)."""
        page: OwnedPage = []
        paged = 0
        async for row in self._owned_rows(start, end):
            if not page or page[-1][0].settlement_id != str(row[0]):
                if len(page) >= page_size:
                    yield page
                    page = []
                page.append((ledger_record(row), {}))
                paged += 1
            if row[8] is not None:
                obj = rail_object(row, 8)
                page[-1][1][obj.object_id] = obj
        if page:
            yield page
        if self._uncompared is not None:
            self.unpaged = self._total - paged

    async def unowned(
        self, start: datetime, end: datetime, page_size: int
    ) -> AsyncGenerator[list[RailObject], None]:
        """The listed objects no settlement alive in [start, end) owns, last copies only:
        those naming no settlement `page_size` at a time, then those naming the next
        `page_size` settlements (as text)."""
        page: dict[str, RailObject] = {}
        names: set[str] = set()  # the settlements the page's objects name
        async for obj in self._unowned_objects(start, end):
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
            async with self.pool.acquire() as conn:
                await self._check_intact(conn)
                rows = await conn.fetch(BY_OBJECT_IDS, self.run_id, sorted(set(object_ids)))
        return {o.object_id: o for o in map(rail_object, rows)}

    async def drop(self) -> None:
        """Close the judged statement if still open, and delete this run's rows."""
        if self._judged is not None:
            await self._judged.aclose()
            self._judged = None
        with unavailable_when_down(_DOWN):
            await self.pool.execute(f"DELETE FROM {TABLE} WHERE run_id = $1", self.run_id)

    async def _owned_rows(self, start: datetime, end: datetime) -> AsyncIterator[asyncpg.Record]:
        """OWNED's rows; judged, the window's count, then part 1 of the statement, which is
        left open on its first row of part 2 for `unowned`."""
        if self._uncompared is None:
            async for row in self._stream(OWNED, start, end):
                yield row
            return
        self._judged = self._stream(
            JUDGED, start, end, self._uncompared, AGREEING, work_mem=JUDGED_WORK_MEM
        )
        async for row in self._judged:
            if row[_PART] == 0:
                self._total = row[_TOTAL]
            elif row[_PART] == 1:
                yield row
            else:
                self._loose = row
                return

    async def _unowned_objects(self, start: datetime, end: datetime) -> AsyncIterator[RailObject]:
        """UNOWNED's objects; judged, part 2 of the statement `owned` left open."""
        if self._uncompared is None:
            async for row in self._stream(UNOWNED, start, end):
                yield rail_object(row)
            return
        if self._loose is not None and self._judged is not None:
            yield rail_object(self._loose, 8)
            async for row in self._judged:
                yield rail_object(row, 8)
        self._loose = self._judged = None

    async def _stream(
        self,
        query: str,
        start: datetime,
        end: datetime,
        *more: object,
        work_mem: str = WORK_MEM,
    ) -> AsyncGenerator[asyncpg.Record, None]:
        """`query`'s rows for this run and window, through a cursor (one snapshot)."""
        with unavailable_when_down(_DOWN):
            async with self.pool.acquire() as conn, conn.transaction(readonly=True):
                await conn.execute(STREAM_SETTINGS.format(work_mem=work_mem))
                await self._check_intact(conn)
                cursor = await conn.cursor(query, self.run_id, start, end, self.rails, *more)
                # fetched a batch at a time: row by row, asyncpg's checks cost more than a row
                while rows := await cursor.fetch(FETCH_ROWS):
                    for row in rows:
                        yield row

    async def _check_intact(self, conn: asyncpg.Connection) -> None:
        if self._first is None:
            return  # nothing staged, nothing to lose
        if not await conn.fetchval(STILL_STAGED, self.run_id, *self._first):
            raise StagedRowsLost(self.run_id, self.listed + self.retrieved)

    def _row(self, listed: bool, obj: RailObject) -> tuple[object, ...]:
        return (self.run_id, next(self._seq), listed, *obj)

    def _counted(self, row: tuple[object, ...]) -> None:
        """Count a row staged; the first is the one `_check_intact` looks for."""
        if self._first is None:
            self._first = (cast(str, row[3]), cast(int, row[1]))
        if row[2]:
            self.listed += 1
        else:
            self.retrieved += 1

    async def _copy(self, rows: list[tuple[object, ...]]) -> None:
        if not rows:
            return
        with unavailable_when_down(_DOWN):
            await self.pool.copy_records_to_table(TABLE, records=rows, columns=COLUMNS)
        for row in rows:
            self._counted(row)
