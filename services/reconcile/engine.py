"""One reconciliation run: read the rail and the ledger over a window, compare, record.

    1. start the run (reconciliation_runs, `running`)
    2. list the rail's transfers and payouts created in the window into the run's staging
       table (staging.py), a batch at a time: the run never holds the rail in memory
    3. page the ledger's settlements alive in the window by id, each with the staged objects
       it owns (joined in SQL); per page, retrieve by id (and stage) any object a reference
       names that is not staged, compare the page with its objects, store its breaks (a
       break seen before is seen again, not added)
    4. page the staged objects no window settlement owns: those naming no settlement are
       unknown_at_rail; the others are compared with the settlements they name, read by id
    5. record each source (when read, how many rows), finish the run, drop its staged rows

A rail that cannot be read records its error and the run ends `failed`: never a clean run.
The rail is also unreadable when it lists nothing though the ledger sent money in the window:
the run stops before it stores a break read from that silence. PostgreSQL out of reach
raises StoreUnavailable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

import asyncpg

from services.reconcile import ledger_source, store
from services.reconcile.compare import SENT, compare
from services.reconcile.errors import RailUnreadable, ReconcileError
from services.reconcile.model import Break, LedgerRecord, Pending, RailObject, Report, RunStatus
from services.reconcile.model import break_key as sort_key
from services.reconcile.rail_source import RailSource
from services.reconcile.staging import Staging
from services.reconcile.windows import Window
from services.shared.domain.breaks import DEFAULT_GRACE_SECONDS, BreakStatus

LEDGER, RAIL = "ledger", "rail"


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Outcome:
    """What one run found and how it ended."""

    run_id: int
    window: Window
    status: RunStatus
    breaks: list[Break] = field(default_factory=list)
    pending: list[Pending] = field(default_factory=list)
    stored: dict[str, BreakStatus] = field(default_factory=dict)  # status by stored key
    error: str | None = None  # why a source could not be read

    def report(self) -> Report:
        """The breaks and pending items found, in the stable order."""
        return Report(
            tuple(sorted(set(self.breaks), key=sort_key)),
            tuple(sorted(set(self.pending), key=lambda p: (p.settlement_id, p.would_be.value))),
        )

    def status_of(self, item: Break) -> BreakStatus:
        """The break's stored status: open unless it was healed or resolved since."""
        return self.stored.get(store.stored_key(item), BreakStatus.OPEN)

    @property
    def open_breaks(self) -> int:
        """How many of the breaks found are still open."""
        return sum(1 for b in set(self.breaks) if self.status_of(b) is BreakStatus.OPEN)


@dataclass
class _Pass:
    """One run's reading, carried from page to page."""

    seen_at: datetime  # when the run started: the breaks' last_seen
    now: int  # the same, in Unix seconds, for grace periods
    staged: Staging  # the rail's objects: listed, then retrieved
    page_size: int  # settlements compared at a time
    settlements: int = 0  # settlements read
    sent_in_window: int = 0  # of them, handed to the rail inside the window


async def reconcile(
    pool: asyncpg.Pool,
    rail: RailSource,
    window: Window,
    *,
    grace: int = DEFAULT_GRACE_SECONDS,
    clock: Callable[[], datetime] = _utcnow,
    page_size: int = ledger_source.PAGE_SIZE,
) -> Outcome:
    """Run one reconciliation over `window`, `page_size` settlements at a time, recorded in
    the store; its outcome."""
    started = clock()
    run_id = await store.start_run(pool, window.kind, window.start, window.end, started)
    outcome = Outcome(run_id, window, RunStatus.RUNNING)
    staged = Staging(pool, run_id)
    try:
        await staged.clear_abandoned(started)
        try:
            await staged.list_in(rail.pages(*window.seconds()))
        except ReconcileError as e:
            outcome.error = str(e)
            await store.record_source(
                pool, run_id, RAIL, read_at=clock(), rows=0, data_expected=True, error=str(e)
            )
            outcome.status = await store.finish_run(pool, run_id, clock())
            return outcome
        rail_read_at = clock()
        state = _Pass(started, int(started.timestamp()), staged, page_size)
        try:
            await _ledger_pass(pool, rail, window, grace, outcome, state)
            await _remaining(pool, rail, window, grace, outcome, state)
        except ReconcileError as e:
            outcome.error = str(e)
        await _record_sources(pool, outcome, state, rail_read_at, clock())
    finally:
        await staged.drop()
    outcome.status = await store.finish_run(pool, run_id, clock())
    outcome.stored = await store.break_statuses(pool, [store.stored_key(b) for b in outcome.breaks])
    return outcome


async def _ledger_pass(
    pool: asyncpg.Pool, rail: RailSource, window: Window, grace: int, outcome: Outcome, state: _Pass
) -> None:
    """Compare the window's settlements, a page at a time, with the objects each owns."""
    start = window.seconds()[0]
    pages = state.staged.owned(window.start, window.end, state.page_size)
    async with contextlib.aclosing(pages):
        async for page in pages:
            records = [record for record, _ in page]
            state.settlements += len(records)
            state.sent_in_window += sum(
                1
                for r in records
                if r.status in SENT and r.sent_at is not None and r.sent_at >= start
            )
            if state.sent_in_window and not state.staged.listed:
                # Compared with nothing, every settlement would read as missing: no break is.
                raise RailUnreadable(store.EMPTY_ANSWER)
            own = {k: o for _, objects in page for k, o in objects.items()}
            own |= await _retrieve(rail, records, own, state)
            await _store(pool, outcome, state, compare(records, own.values(), state.now, grace))


async def _remaining(
    pool: asyncpg.Pool, rail: RailSource, window: Window, grace: int, outcome: Outcome, state: _Pass
) -> None:
    """Compare the listed objects no window settlement owns with the settlements they name, a
    page of named settlements at a time; what no settlement explains is unknown_at_rail."""
    pages = state.staged.unowned(window.start, window.end, state.page_size)
    async with contextlib.aclosing(pages):
        async for objects in pages:
            names = sorted({o.settlement_id for o in objects if o.settlement_id is not None})
            records = await ledger_source.by_ids(pool, names) if names else []
            state.settlements += len(records)
            referenced = [r.rail_reference for r in records if r.rail_reference]
            found = await state.staged.by_object_ids(referenced)
            found |= await _retrieve(rail, records, found, state)
            objects += found.values()
            await _store(pool, outcome, state, compare(records, objects, state.now, grace))


async def _retrieve(
    rail: RailSource, records: Sequence[LedgerRecord], found: Mapping[str, RailObject], state: _Pass
) -> dict[str, RailObject]:
    """Fetch by id (and stage) the objects the settlements' references name that are not
    among those `found`."""
    missing = {r.rail_reference for r in records if r.rail_reference} - found.keys()
    retrieved = await rail.retrieve(sorted(missing))
    await state.staged.add_retrieved(retrieved)
    return {o.object_id: o for o in retrieved}


async def _store(pool: asyncpg.Pool, outcome: Outcome, state: _Pass, report: Report) -> None:
    """Keep one comparison's findings and store its breaks under this run."""
    await store.upsert_breaks(pool, outcome.run_id, report.breaks, state.seen_at)
    outcome.breaks.extend(report.breaks)
    outcome.pending.extend(report.pending)


async def _record_sources(
    pool: asyncpg.Pool, outcome: Outcome, state: _Pass, rail_read_at: datetime, now: datetime
) -> None:
    """The evidence of each source: the rail must have answered something if money was sent."""
    await store.record_source(
        pool, outcome.run_id, LEDGER, read_at=now, rows=state.settlements, data_expected=False
    )
    error = await store.record_source(
        pool,
        outcome.run_id,
        RAIL,
        read_at=rail_read_at,
        rows=state.staged.listed + state.staged.retrieved,
        data_expected=state.sent_in_window > 0,
        error=outcome.error,
    )
    outcome.error = error
