"""One reconciliation run: read the rail and the ledger over a window, compare, record.

    1. start the run (reconciliation_runs, `running`)
    2. list the rail's transfers and payouts created in the window (from its API, or from a
       statement file: any RailReader) into the run's staging table (staging.py), a batch at
       a time: the run never holds the rail in memory
    3. page the ledger's settlements alive in the window by id, each with the staged objects
       it owns (joined in SQL); per page, retrieve by id (and stage) any object a reference
       names that is not staged, compare the page with its objects (and, for each rail
       reference, the first settlement in the whole ledger to name it), store its breaks (an
       open break seen again is seen again, not added; after it closed, a new one is opened)
    4. page the staged objects no window settlement owns: each is compared with the
       settlement it names or that claims it, read by id; those naming a settlement the ledger
       lacks are unknown_at_rail, those with no mark of settle's are out of scope (counted)
    5. the nostro view (nostro_pass.py): the rail's balance read and recorded, its movement
       against its balance transactions and the ledger's postings: balance_mismatch breaks
    6. record each source (when read, how many rows), finish the run, drop its staged rows

A re-check (`ById`) reads instead the named objects and settlements by id, a bounded set, and
compares them as in 4; it judges no balance. Each page's status drifts that the rail proves
are healed as they are stored (`heal.Healer`, unless the run is read-only or reads a file).
Unless the run is read-only, each page also heals the open breaks of the settlements and
objects it compared that it no longer finds (of the types the evidence can resolve, and not
of a settlement still pending): a missing object that appeared, an unknown one a settlement
now claims, reversals that caught up, a drift a late webhook mended.

A rail that cannot be read records its error and the run ends `failed`: never a clean run.
The rail is also unreadable when it lists nothing though the ledger sent money in the window:
the run stops before it stores a break read from that silence. PostgreSQL out of reach
raises StoreUnavailable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime

import asyncpg

from services.adapters.stripe.source import RailReader, RailSource
from services.domain.breaks import DEFAULT_GRACE_SECONDS
from services.domain.rail import RailReadError, RailUnreadable
from services.domain.reconciliation import LedgerRecord, RailObject, Report, RunStatus
from services.platform.clock import Clock, utc_now
from services.reconcile import closing, ledger_source, nostro_pass, store
from services.reconcile.compare import SENT, compare
from services.reconcile.errors import ReconcileError
from services.reconcile.heal import ACTOR, Healer
from services.reconcile.outcome import ById, Outcome
from services.reconcile.staging import Staging
from services.reconcile.windows import Window

LEDGER = "ledger"


@dataclass
class _Pass:
    """One run's reading, carried from page to page."""

    seen_at: datetime  # when the run started: the breaks' last_seen
    staged: Staging  # the rail's objects: listed, then retrieved
    page_size: int  # settlements compared at a time
    grace: int  # seconds an item handed to the rail may lag before it is a break
    healer: Healer | None  # None: a read-only run, or a source that is no live proof
    closes: bool  # whether breaks the evidence no longer shows are healed (not read-only)
    clock: Clock  # the time breaks are healed at
    booked_through: date | None  # the last business day the rail's records cover, if dated
    actor: str  # whose heals they are: the reconciler's, or the operator's who ran the run
    settlements: int = 0  # settlements read
    sent_in_window: int = 0  # of them, handed to the rail inside the window

    @property
    def now(self) -> int:
        """When the run started, in Unix seconds, for grace periods."""
        return int(self.seen_at.timestamp())


async def reconcile(
    pool: asyncpg.Pool,
    rail: RailReader,
    window: Window,
    *,
    grace: int = DEFAULT_GRACE_SECONDS,
    clock: Clock = utc_now,
    page_size: int = ledger_source.PAGE_SIZE,
    heal: bool = True,
    by_id: ById | None = None,
    booked_through: date | None = None,
    actor: str = ACTOR,
) -> Outcome:
    """Run one reconciliation over `window` (or, given `by_id`, of those items only),
    `page_size` settlements at a time, recorded in the store, healing the drifts the rail
    proves unless `heal` is False (each heal audited under `actor`); its outcome. Given
    `booked_through`, the last business day dated records cover (a bank's statements), a
    transfer due after that day is pending."""
    started = clock()
    run_id = await store.start_run(pool, window.kind, window.start, window.end, started)
    outcome = Outcome(run_id, window, RunStatus.RUNNING)
    # Only the rail's own API is live proof and shows a balance: a statement file is neither.
    live = rail if isinstance(rail, RailSource) else None
    healer = Healer(pool, live, clock, outcome.paid_after, actor) if heal and live else None
    staged = Staging(pool, run_id, rail.rails)
    state = _Pass(started, staged, page_size, grace, healer, heal, clock, booked_through, actor)
    try:
        await staged.clear_abandoned(started)
        if by_id is None:
            try:
                await staged.list_in(rail.pages(*window.seconds()))
            except (ReconcileError, RailReadError) as e:
                return await _unlisted(pool, rail, outcome, str(e), clock)
        rail_read_at = clock()
        try:
            if by_id is None:
                await _ledger_pass(pool, rail, window, outcome, state)
                await _remaining(pool, rail, window, outcome, state)
            else:
                await _recheck(pool, rail, by_id, outcome, state)
            if live is not None and by_id is None:  # a re-check of items judges no balance
                balance = await nostro_pass.balance_breaks(
                    pool, live, run_id, clock(), quiet=outcome.quiet, book_fees=heal
                )
                await _store(pool, outcome, state, Report(tuple(balance), ()))
        except (ReconcileError, RailReadError) as e:
            outcome.error = str(e)
        await _record_sources(pool, rail, outcome, state, rail_read_at, clock())
    finally:
        await staged.drop()
    outcome.status = await store.finish_run(pool, run_id, clock())
    outcome.stored = await store.break_statuses(pool, [store.stored_key(b) for b in outcome.breaks])
    return outcome


async def _unlisted(
    pool: asyncpg.Pool, rail: RailReader, outcome: Outcome, error: str, clock: Clock
) -> Outcome:
    """The run ended at its listing: the source recorded with why, the run finished."""
    outcome.error = error
    await store.record_source(
        pool,
        outcome.run_id,
        rail.source,
        read_at=clock(),
        rows=0,
        data_expected=True,
        error=error,
    )
    outcome.status = await store.finish_run(pool, outcome.run_id, clock())
    return outcome


async def _ledger_pass(
    pool: asyncpg.Pool, rail: RailReader, window: Window, outcome: Outcome, state: _Pass
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
            await _compare(pool, outcome, state, records, own.values())
    state.settlements += state.staged.unpaged  # read too: found agreeing in SQL, or uncompared


async def _remaining(
    pool: asyncpg.Pool, rail: RailReader, window: Window, outcome: Outcome, state: _Pass
) -> None:
    """Compare the listed objects no window settlement owns with the settlements they name, a
    page of named settlements at a time; what no settlement explains is unknown_at_rail."""
    pages = state.staged.unowned(window.start, window.end, state.page_size)
    async with contextlib.aclosing(pages):
        async for objects in pages:
            names = {o.settlement_id for o in objects if o.settlement_id is not None}
            # An object without settle's mark is still settle's if a settlement claims it.
            unmarked = [o.object_id for o in objects if o.settlement_id is None]
            names |= set((await ledger_source.claims_of(pool, unmarked)).values())
            records = await ledger_source.by_ids(pool, names, rail.rails) if names else []
            state.settlements += len(records)
            referenced = [r.rail_reference for r in records if r.rail_reference]
            found = await state.staged.by_object_ids(referenced)
            found |= await _retrieve(rail, records, found, state)
            await _compare(pool, outcome, state, records, [*objects, *found.values()])


async def _recheck(
    pool: asyncpg.Pool, rail: RailReader, by_id: ById, outcome: Outcome, state: _Pass
) -> None:
    """Compare the named objects, read by id, with the named settlements and those the
    objects name, a page of settlements at a time; what none explains is unknown_at_rail."""
    objects = {o.object_id: o for o in await rail.retrieve(sorted(by_id.object_ids))}
    await state.staged.add_retrieved(list(objects.values()))
    names = {o.settlement_id for o in objects.values() if o.settlement_id is not None}
    ordered = sorted(names | by_id.settlement_ids)
    owned: set[str] = set()
    for i in range(0, len(ordered), state.page_size):
        chunk = set(ordered[i : i + state.page_size])
        records = await ledger_source.by_ids(pool, chunk, rail.rails)
        state.settlements += len(records)
        own = {k: o for k, o in objects.items() if o.settlement_id in chunk}
        own |= {
            r.rail_reference: objects[r.rail_reference]
            for r in records
            if r.rail_reference in objects
        }
        own |= await _retrieve(rail, records, own, state)
        owned |= own.keys()
        await _compare(pool, outcome, state, records, own.values())
    anonymous = [o for k, o in objects.items() if k not in owned]
    await _compare(pool, outcome, state, [], anonymous)


async def _retrieve(
    rail: RailReader, records: Sequence[LedgerRecord], found: Mapping[str, RailObject], state: _Pass
) -> dict[str, RailObject]:
    """Fetch by id (and stage) the objects the settlements' references name that are not
    among those `found`."""
    missing = {r.rail_reference for r in records if r.rail_reference} - found.keys()
    retrieved = await rail.retrieve(sorted(missing))
    await state.staged.add_retrieved(retrieved)
    return {o.object_id: o for o in retrieved}


async def _compare(
    pool: asyncpg.Pool,
    outcome: Outcome,
    state: _Pass,
    records: Sequence[LedgerRecord],
    objects: Iterable[RailObject],
) -> None:
    """Compare settlements with the objects they own (and any others given), store the
    breaks, and heal the open ones of what was compared that the comparison no longer finds."""
    objects = list(objects)
    report = compare(
        records,
        objects,
        state.now,
        state.grace,
        booked_through=state.booked_through,
        first_claims=await ledger_source.first_claims(pool, records),
    )
    await _store(pool, outcome, state, report)
    if state.closes:
        waiting = {p.settlement_id for p in report.pending}
        outcome.healed += await closing.heal_agreeing(
            pool,
            [r.settlement_id for r in records if r.settlement_id not in waiting],
            [o.object_id for o in objects],
            [store.stored_key(b) for b in report.breaks],
            actor=state.actor,
            now=state.clock(),
        )


async def _store(pool: asyncpg.Pool, outcome: Outcome, state: _Pass, report: Report) -> None:
    """Keep one comparison's findings, store its breaks under this run, heal the drifts the
    rail proves."""
    await store.upsert_breaks(pool, outcome.run_id, report.breaks, state.seen_at)
    outcome.breaks.extend(report.breaks)
    outcome.pending.extend(report.pending)
    outcome.out_of_scope(report.foreign)
    if state.healer is not None:
        outcome.healed += await state.healer.heal(report.breaks)


async def _record_sources(
    pool: asyncpg.Pool,
    rail: RailReader,
    outcome: Outcome,
    state: _Pass,
    rail_read_at: datetime,
    now: datetime,
) -> None:
    """The evidence of each source: the rail must have answered something if money was sent."""
    await store.record_source(
        pool, outcome.run_id, LEDGER, read_at=now, rows=state.settlements, data_expected=False
    )
    error = await store.record_source(
        pool,
        outcome.run_id,
        rail.source,
        read_at=rail_read_at,
        rows=rail.rows_read(state.staged.listed + state.staged.retrieved),
        data_expected=state.sent_in_window > 0,
        error=outcome.error,
    )
    outcome.error = error
