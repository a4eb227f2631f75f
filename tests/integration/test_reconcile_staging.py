"""A reconciliation run whose window holds more rail objects than one staging batch and one
list page, on the real PostgreSQL and a served simulator: it finds exactly the breaks planted,
whatever batch and page they fell in, and leaves none of its staged rows behind; rows a
crashed run left are cleaned by the next run; a run whose rows a crash restart of PostgreSQL
emptied (the table is unlogged) fails instead of completing without what only the listing
shows.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import orjson
import pytest

from railsim.core import RailSim
from railsim.http import create_app
from railsim.seed import seeded
from services.adapters.stripe.source import PAGE_SIZE, RailSource
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import RailObject, RunKind, RunStatus
from services.reconcile import staging, store
from services.reconcile.engine import reconcile
from services.reconcile.outcome import Outcome
from services.reconcile.windows import Window
from tests.conftest import asyncpg_dsn, create_database, drop_database, unique
from tests.harness import Servers
from tests.integration.check_support import template
from tests.integration.railsim_support import serving
from tools.bench.reconcile_seed import PLANTED, planted_breaks, rail_chunks, seed_ledger

pytestmark = pytest.mark.integration
__all__ = ["template"]

SETTLEMENTS = 260  # listed: 260 - 5 missing + 5 duplicates + 5 strays = 265, three pages
SPREAD = 600
BATCH = 50


@pytest.fixture
async def books(infra: Servers, template: str) -> AsyncIterator[tuple[asyncpg.Pool, str]]:
    """A ledger of SETTLEMENTS paid settlements and a rail of their transfers, breaks planted."""
    name = unique("settle_recon_stage_")
    url = await create_database(infra.database_url, name, template)
    pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
    sim = RailSim()
    end = int(time.time()) - 5
    try:
        async with pool.acquire() as conn:
            await seed_ledger(conn, SETTLEMENTS, end, SPREAD)
        for chunk in rail_chunks(SETTLEMENTS, end, SPREAD, 100):
            sim.seed(seeded(orjson.dumps(chunk)))
        async with serving(create_app(sim)) as sim_url:
            yield pool, sim_url
    finally:
        await pool.close()
        await drop_database(infra.database_url, name)


def _found(outcome: Outcome) -> set[tuple[str, str | None, str | None]]:
    return {(b.break_type.value, b.settlement_id, b.rail_object_id) for b in outcome.breaks}


async def _run(pool: asyncpg.Pool, sim_url: str) -> Outcome:
    now = datetime.now(UTC)
    rail = RailSource("sk_test_x", api_base=sim_url)
    try:
        return await reconcile(
            pool,
            rail,
            Window(RunKind.INTRADAY, now - timedelta(hours=1), now),
            grace=0,
            page_size=40,
        )
    finally:
        await rail.aclose()


async def test_a_window_larger_than_a_batch_and_a_page_finds_exactly_the_planted_breaks(
    books: tuple[asyncpg.Pool, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, sim_url = books
    monkeypatch.setattr(staging, "BATCH_ROWS", BATCH)
    # less the missing, plus the duplicates, the strays and the foreign transfers
    listed = SETTLEMENTS + 2 * PLANTED
    assert listed > PAGE_SIZE and listed > BATCH
    copied: list[int] = []
    copy = staging.Staging._copy

    async def counting(self: staging.Staging, rows: list[tuple[object, ...]]) -> None:
        copied.append(len(rows))
        await copy(self, rows)

    monkeypatch.setattr(staging.Staging, "_copy", counting)
    now = datetime.now(UTC)
    rail = RailSource("sk_test_x", api_base=sim_url)
    try:
        outcome = await reconcile(
            pool,
            rail,
            Window(RunKind.INTRADAY, now - timedelta(hours=1), now),
            grace=0,
            page_size=40,
        )
    finally:
        await rail.aclose()
    assert (outcome.status, outcome.error) == (RunStatus.COMPLETED, None)
    assert sum(copied) == listed and max(copied) < listed  # staged in more than one batch
    planted = planted_breaks()
    assert _found(outcome) == planted
    assert len(outcome.breaks) == len(planted)  # each found once, in whichever page
    assert await pool.fetchval(f"SELECT count(*) FROM {staging.TABLE}") == 0
    rows = await pool.fetchval(
        "SELECT rows_returned FROM reconciliation_sources WHERE run_id = $1 AND source = 'rail'",
        outcome.run_id,
    )
    assert rows == listed


async def test_rows_a_crashed_run_left_are_deleted_by_the_next_run(
    books: tuple[asyncpg.Pool, str],
) -> None:
    pool, sim_url = books
    # A run that crashed two hours ago, still `running`, its staged rows left behind.
    crashed = await pool.fetchval(
        "INSERT INTO reconciliation_runs (kind, window_start, window_end, started_at, status)"
        " VALUES ('intraday', now() - interval '3 hours', now() - interval '2 hours',"
        " now() - interval '2 hours', 'running') RETURNING id"
    )
    await pool.execute(
        f"INSERT INTO {staging.TABLE} (run_id, seq, listed, object_id, kind, amount,"
        " amount_reversed, currency, created) VALUES ($1, 0, true, 'tr_left', 'transfer', 1, 0,"
        " 'USD', 0)",
        crashed,
    )
    now = datetime.now(UTC)
    rail = RailSource("sk_test_x", api_base=sim_url)
    try:
        await reconcile(pool, rail, Window(RunKind.INTRADAY, now - timedelta(hours=1), now))
    finally:
        await rail.aclose()
    assert await pool.fetchval(f"SELECT count(*) FROM {staging.TABLE}") == 0


async def test_the_staging_table_writes_no_wal(books: tuple[asyncpg.Pool, str]) -> None:
    pool, _ = books
    persistence = await pool.fetchval(
        "SELECT relpersistence::text FROM pg_class WHERE relname = $1", staging.TABLE
    )
    assert persistence == "u"  # unlogged: emptied by a crash restart, hence the checks below


# Emptied after the listing: the ledger pass reads nothing staged. Emptied after the ledger
# pass retrieved its first page's references: the pages it is comparing were read before (one
# snapshot), the stray objects' pass would read nothing.
@pytest.mark.parametrize(
    ("lost_after", "keeps_breaks"), [("list_in", False), ("add_retrieved", True)]
)
async def test_a_run_whose_staged_rows_a_restart_emptied_fails_and_the_next_finds_the_breaks(
    books: tuple[asyncpg.Pool, str],
    monkeypatch: pytest.MonkeyPatch,
    lost_after: str,
    keeps_breaks: bool,
) -> None:
    pool, sim_url = books
    staged = getattr(staging.Staging, lost_after)

    async def then_restart(self: staging.Staging, *args: object) -> None:
        await staged(self, *args)
        # As crash recovery empties an unlogged table, between two of the run's statements.
        await pool.execute(f"DELETE FROM {staging.TABLE}")

    monkeypatch.setattr(staging.Staging, lost_after, then_restart)
    lost = await _run(pool, sim_url)
    assert lost.status == RunStatus.FAILED
    assert "PostgreSQL lost them in a crash restart" in (lost.error or "")
    # Every break it kept was read while its rows were all there: none from the emptied table.
    assert _found(lost) <= planted_breaks()
    assert bool(lost.breaks) == keeps_breaks
    monkeypatch.setattr(staging.Staging, lost_after, staged)
    again = await _run(pool, sim_url)
    assert (again.status, again.error) == (RunStatus.COMPLETED, None)
    assert _found(again) == planted_breaks()


async def test_a_staged_payout_keeps_its_arrival_date(books: tuple[asyncpg.Pool, str]) -> None:
    pool, _ = books
    run_id = await store.start_run(
        pool, RunKind.INTRADAY, datetime.now(UTC), datetime.now(UTC), datetime.now(UTC)
    )
    staged = staging.Staging(pool, run_id, ["sim"])
    payout = RailObject(
        "po_arrival", PayoutMethod.PAYOUT, 900, 0, "EUR", None, "in_transit", 1, None, 1_800_086_400
    )
    try:
        await staged.add_retrieved([payout])
        assert await staged.by_object_ids(["po_arrival"]) == {"po_arrival": payout}
    finally:
        await staged.drop()
