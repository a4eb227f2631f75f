"""One reconciliation run: read the rail and the ledger over a window, compare, record.

    1. start the run (reconciliation_runs, `running`)
    2. list the rail's transfers and payouts created in the window (from its API, or from a
       statement file: any RailReader)
    3. page the ledger's settlements alive in the window by id; per page, retrieve by id any
       object a reference names that the list did not return, compare the page with the
       objects it owns, store its breaks (a break seen before is seen again, not added)
    4. read by id the settlements that the remaining objects name, compare them with those
       objects: what no settlement explains is unknown_at_rail
    5. the nostro view (nostro_pass.py): the rail's balance read and recorded, its movement
       against its balance transactions and the ledger's postings: balance_mismatch breaks
    6. record each source (when read, how many rows) and finish the run

Each page's status drifts that the rail proves are healed as they are stored (`heal.Healer`,
unless the run is read-only).

A rail that cannot be read records its error and the run ends `failed`: never a clean run.
The rail is also unreadable when it lists nothing though the ledger sent money in the window:
the run stops before it stores a break read from that silence. PostgreSQL out of reach
raises StoreUnavailable.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import NamedTuple

import asyncpg

from services.reconcile import ledger_source, nostro_pass, store
from services.reconcile.compare import SENT, compare
from services.reconcile.errors import RailUnreadable, ReconcileError
from services.reconcile.heal import Healer
from services.reconcile.model import Break, LedgerRecord, Pending, RailObject, Report, RunStatus
from services.reconcile.model import break_key as sort_key
from services.reconcile.rail_source import RailReader, RailSource
from services.reconcile.windows import Window
from services.shared.domain.breaks import DEFAULT_GRACE_SECONDS, BreakStatus, BreakType

LEDGER = "ledger"


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
    healed: int = 0  # status drifts this run healed through the inbox

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


class ById(NamedTuple):
    """A re-check: settlements and rail objects compared again by id, not by window."""

    settlement_ids: frozenset[str]
    object_ids: frozenset[str]


@dataclass
class _Pass:
    """One run's reading, carried from page to page."""

    seen_at: datetime  # when the run started: the breaks' last_seen
    now: int  # the same, in Unix seconds, for grace periods
    objects: dict[str, RailObject]  # by object id: listed, then retrieved
    listed: int  # objects the window's lists returned
    page_size: int  # settlements compared at a time
    explained: set[str] = field(default_factory=set)  # object ids some settlement owns
    settlements: int = 0  # settlements read
    sent_in_window: int = 0  # of them, handed to the rail inside the window
    healer: Healer | None = None  # None: a read-only run


async def reconcile(
    pool: asyncpg.Pool,
    rail: RailReader,
    window: Window,
    *,
    grace: int = DEFAULT_GRACE_SECONDS,
    clock: Callable[[], datetime] = _utcnow,
    page_size: int = ledger_source.PAGE_SIZE,
    heal: bool = True,
    by_id: ById | None = None,
) -> Outcome:
    """Run one reconciliation over `window` (or, given `by_id`, of those items only),
    `page_size` settlements at a time, recorded in the store, healing the drifts the rail
    proves unless `heal` is False; its outcome."""
    started = clock()
    run_id = await store.start_run(pool, window.kind, window.start, window.end, started)
    outcome = Outcome(run_id, window, RunStatus.RUNNING)
    try:
        if by_id is None:
            listed = await rail.objects(*window.seconds())
        else:
            listed = await rail.retrieve(by_id.object_ids)
    except ReconcileError as e:
        outcome.error = str(e)
        await store.record_source(
            pool, run_id, rail.source, read_at=clock(), rows=0, data_expected=True, error=str(e)
        )
        outcome.status = await store.finish_run(pool, run_id, clock())
        return outcome
    rail_read_at = clock()
    objects = {o.object_id: o for o in listed}
    state = _Pass(started, int(started.timestamp()), objects, len(listed), page_size)
    # Only the rail's own API is live proof and shows a balance: a statement file is neither.
    live = rail if isinstance(rail, RailSource) else None
    if heal and live is not None:
        state.healer = Healer(pool, live, clock)
    try:
        if by_id is None:
            await _ledger_pass(pool, rail, window, grace, outcome, state)
        await _remaining(pool, rail, grace, outcome, state, by_id.settlement_ids if by_id else ())
        if live is not None and by_id is None:  # a re-check of items judges no balance
            quiet = _quiet(outcome)
            balance = await nostro_pass.balance_breaks(pool, live, run_id, clock(), quiet=quiet)
            await _store(pool, outcome, state, Report(tuple(balance), ()))
    except ReconcileError as e:
        outcome.error = str(e)
    await _record_sources(pool, rail, outcome, state, rail_read_at, clock())
    outcome.status = await store.finish_run(pool, run_id, clock())
    outcome.stored = await store.break_statuses(pool, [store.stored_key(b) for b in outcome.breaks])
    return outcome


async def _ledger_pass(
    pool: asyncpg.Pool, rail: RailReader, window: Window, grace: int, outcome: Outcome, state: _Pass
) -> None:
    """Compare the window's settlements, a page at a time, with the objects each owns."""
    named = _by_settlement(state.objects.values())
    start = window.seconds()[0]
    after: uuid.UUID | None = None
    while page := await ledger_source.window_page(
        pool, window.start, window.end, after, state.page_size
    ):
        after = uuid.UUID(page[-1].settlement_id)
        state.settlements += len(page)
        state.sent_in_window += sum(
            1 for r in page if r.status in SENT and r.sent_at is not None and r.sent_at >= start
        )
        if state.sent_in_window and not state.listed:
            # Compared with nothing, every settlement would read as missing: no break is.
            raise RailUnreadable(store.EMPTY_ANSWER)
        await _retrieve_referenced(rail, page, state)
        own = [
            o
            for r in page
            for o in [state.objects.get(r.rail_reference or ""), *named.get(r.settlement_id, [])]
            if o is not None
        ]
        state.explained.update(o.object_id for o in own)
        await _store(pool, outcome, state, compare(page, own, state.now, grace))


async def _remaining(
    pool: asyncpg.Pool, rail: RailReader, grace: int, outcome: Outcome, state: _Pass,
    wanted: Iterable[str] = (),
) -> None:  # fmt: skip
    """Compare the objects no window settlement owns with the settlements they name (and the
    `wanted` ones), a page of settlements at a time; what none explains is unknown_at_rail."""
    unexplained = [o for o in state.objects.values() if o.object_id not in state.explained]
    anonymous = [o for o in unexplained if o.settlement_id is None]
    await _store(pool, outcome, state, compare([], anonymous, state.now, grace))
    left = _by_settlement(unexplained)
    names = sorted(left.keys() | set(wanted))
    for i in range(0, len(names), state.page_size):
        chunk = names[i : i + state.page_size]
        records = await ledger_source.by_ids(pool, chunk)
        state.settlements += len(records)
        await _retrieve_referenced(rail, records, state)
        objects = [o for n in chunk for o in left.get(n, ())]
        objects += [state.objects[r.rail_reference or ""] for r in records
                    if (r.rail_reference or "") in state.objects]  # fmt: skip
        await _store(pool, outcome, state, compare(records, objects, state.now, grace))


async def _retrieve_referenced(
    rail: RailReader, records: Sequence[LedgerRecord], state: _Pass
) -> None:
    """Fetch by id the objects the settlements' references name that were not listed."""
    missing = {r.rail_reference for r in records if r.rail_reference} - state.objects.keys()
    for obj in await rail.retrieve(sorted(missing)):
        state.objects[obj.object_id] = obj


async def _store(pool: asyncpg.Pool, outcome: Outcome, state: _Pass, report: Report) -> None:
    """Keep one comparison's findings and store its breaks under this run."""
    await store.upsert_breaks(pool, outcome.run_id, report.breaks, state.seen_at)
    outcome.breaks.extend(report.breaks)
    outcome.pending.extend(report.pending)
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
        rows=rail.rows_read(len(state.objects)),
        data_expected=state.sent_in_window > 0,
        error=outcome.error,
    )
    outcome.error = error


def _quiet(outcome: Outcome) -> bool:
    """Whether every item agreed with the rail: nothing pending, drifting or healed."""
    drifts = any(b.break_type is BreakType.STATUS_DRIFT for b in outcome.breaks)
    return not (outcome.pending or outcome.healed or drifts)


def _by_settlement(objects: Iterable[RailObject]) -> dict[str, list[RailObject]]:
    """Objects grouped by the settlement their metadata names."""
    named: dict[str, list[RailObject]] = {}
    for obj in objects:
        if obj.settlement_id is not None:
            named.setdefault(obj.settlement_id, []).append(obj)
    return named
