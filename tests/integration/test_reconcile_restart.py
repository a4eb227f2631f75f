"""A crash restart of PostgreSQL in the middle of a reconciliation run, on a private cluster of
this test's own (the shared one is never restarted): recovery empties the unlogged staging
table, the connection pool carries on against the restarted server, and the run fails rather
than complete without the duplicates and strays only the listing shows; the next run finds
exactly the planted breaks.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import orjson
import pytest

from railsim.core import RailSim
from railsim.http import create_app
from railsim.seed import seeded
from services.adapters.postgres.migrate import upgrade
from services.adapters.stripe.source import RailSource
from services.domain.reconciliation import RunKind, RunStatus
from services.reconcile import staging
from services.reconcile.engine import reconcile
from services.reconcile.outcome import Outcome
from services.reconcile.windows import Window
from tests.conftest import asyncpg_dsn, unique
from tests.integration.railsim_support import serving
from tools.bench.reconcile_seed import planted_breaks, rail_chunks, seed_ledger
from tools.infra import postgres
from tools.infra.paths import RunPaths, run_paths
from tools.infra.procs import free_ports

pytestmark = pytest.mark.integration

SETTLEMENTS = 60
SPREAD = 600


@pytest.fixture
async def cluster() -> AsyncIterator[RunPaths]:
    """A PostgreSQL cluster of this test's own, migrated; removed afterwards."""
    usual = run_paths()
    run = usual.run / "restart" / unique("r")
    run.mkdir(parents=True)
    run.chmod(0o755)  # the server's user must traverse it when we are root
    url = f"postgresql+asyncpg://settle@127.0.0.1:{free_ports(1)}/settle"
    paths = RunPaths(root=usual.root, run=run, database_url=url)
    try:
        await asyncio.to_thread(postgres.start, paths)
        await asyncio.to_thread(upgrade, url)
        yield paths
    finally:
        await asyncio.to_thread(postgres.stop, paths)
        shutil.rmtree(paths.pg, ignore_errors=True)
        shutil.rmtree(run, ignore_errors=True)


async def _run(pool: asyncpg.Pool, sim_url: str) -> Outcome:
    now = datetime.now(UTC)
    rail = RailSource("sk_test_x", api_base=sim_url)
    try:
        return await reconcile(
            pool, rail, Window(RunKind.INTRADAY, now - timedelta(hours=1), now), grace=0
        )
    finally:
        await rail.aclose()


async def test_a_crash_restart_mid_run_fails_the_run_and_the_next_finds_the_breaks(
    cluster: RunPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = await asyncpg.create_pool(asyncpg_dsn(cluster.database_url), min_size=1, max_size=4)
    sim = RailSim()
    end = int(time.time()) - 5
    try:
        async with pool.acquire() as conn:
            await seed_ledger(conn, SETTLEMENTS, end, SPREAD)
        for chunk in rail_chunks(SETTLEMENTS, end, SPREAD, 100):
            sim.seed(seeded(orjson.dumps(chunk)))
        listed = staging.Staging.list_in

        async def then_crash(self: staging.Staging, *args: object) -> None:
            await listed(self, *args)
            await asyncio.to_thread(postgres.crash, cluster)
            await asyncio.to_thread(postgres.start, cluster)
            # Nothing more: the pool replaces its dead connections by itself, so the run's
            # next statement reads the restarted server.

        monkeypatch.setattr(staging.Staging, "list_in", then_crash)
        async with serving(create_app(sim)) as sim_url:
            lost = await _run(pool, sim_url)
            staged_after = await pool.fetchval(f"SELECT count(*) FROM {staging.TABLE}")
            monkeypatch.setattr(staging.Staging, "list_in", listed)
            again = await _run(pool, sim_url)
    finally:
        await pool.close()
    assert staged_after == 0  # recovery emptied the unlogged table
    assert lost.status == RunStatus.FAILED
    assert "PostgreSQL lost them in a crash restart" in (lost.error or "")
    assert lost.breaks == []
    assert (again.status, again.error) == (RunStatus.COMPLETED, None)
    found = {(b.break_type.value, b.settlement_id, b.rail_object_id) for b in again.breaks}
    assert found == planted_breaks()
