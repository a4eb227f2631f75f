"""`settle reconciler` on the real PostgreSQL and a served rail simulator, started in process:
it runs on its interval and records completed runs, its /metrics say what the store says, a
second replica waits for the lock and never runs beside the first, a rail outage records
failed runs while the heartbeat stays put, and a re-check takes an item when it reaches its age.

Each test gets a database of its own (copied from a migrated template) and its own simulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import pytest

from railsim.core import RailSim
from railsim.http import create_app
from services.apps.reconciler import Service, compose
from services.domain.reconciliation import RunKind
from services.domain.settlement import SettlementStatus as S
from services.platform.clock import utc_now
from services.platform.settings import load_settings
from tests.conftest import asyncpg_dsn, create_database, drop_database, unique
from tests.harness import Servers
from tests.integration.check_support import World, template
from tests.integration.railsim_support import serving, stripe_client, transfer_params
from tests.unit.test_metrics_endpoints import Samples, scrape
from tests.waiting import eventually
from tools.infra.procs import free_ports

pytestmark = pytest.mark.integration
__all__ = ["template"]

INTERVAL = "0.2"
Clock = Callable[[], datetime]


@pytest.fixture
async def world(infra: Servers, template: str) -> AsyncIterator[World]:
    """One settlement paid and one still `submitted` (its transfer made, no webhook yet)."""
    name = unique("settle_reconciler_")
    url = await create_database(infra.database_url, name, template)
    pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
    sim = RailSim()
    try:
        async with serving(create_app(sim)) as sim_url:
            w = World(url, pool, sim, sim_url, infra.kafka_bootstrap, "", "", "", "", "")
            w.paid, w.review = await w.accept(), await w.accept()
            await w.dispatch(w.paid)
            await w.move(w.paid, S.PAID)
            await w.dispatch(w.review)  # stays submitted: the re-checks' item
            yield w
    finally:
        await pool.close()
        await drop_database(infra.database_url, name)


async def reconciler(
    world: World, rail_url: str | None = None, clock: Clock = utc_now, **env: str
) -> Service:
    """The reconciler's parts for this world, on a short interval unless `env` says otherwise."""
    settings = load_settings(
        {
            "SETTLE_DATABASE_URL": world.url,
            "STRIPE_API_BASE": rail_url or world.sim_url,
            "SETTLE_RECONCILE_INTERVAL": INTERVAL,
            **env,
        }
    )
    return await compose(settings, clock=clock)


@contextlib.asynccontextmanager
async def running(service: Service) -> AsyncIterator[asyncio.Task[None]]:
    """The service's rounds running until the block ends; then it is stopped once its round
    is over, and closed."""
    task = asyncio.create_task(service.reconciler.run())
    try:
        yield task
    finally:
        service.reconciler.stop()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 30)
        await service.aclose()


async def runs(world: World, kind: RunKind | None = None) -> list[asyncpg.Record]:
    """The runs recorded and finished, oldest first (a run stopped half-way stays `running`)."""
    return await world.pool.fetch(
        """SELECT * FROM reconciliation_runs
            WHERE ($1::text IS NULL OR kind = $1) AND status <> 'running' ORDER BY id""",
        kind.value if kind else None,
    )


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


async def test_the_service_runs_on_its_interval_and_its_metrics_match_the_store(
    world: World,
) -> None:
    async with stripe_client(world.sim_url) as client:
        stray = await client.v1.transfers.create_async(transfer_params(str(uuid.uuid4())))
    service = await reconciler(world)
    async with running(service):

        async def three_intraday_runs() -> bool:
            done = [r for r in await runs(world, RunKind.INTRADAY) if r["status"] == "completed"]
            return len(done) >= 3

        await eventually(three_intraday_runs)
        healthz = await get(service, "/healthz")
    samples = await scrape(service.app)
    recorded = await runs(world)
    assert {r["status"] for r in recorded} == {"completed"}
    # The intraday windows follow each other, each read again from the last one's end less
    # the overlap; yesterday's end of day ran once.
    intraday = [r for r in recorded if r["kind"] == "intraday"]
    assert all(b["window_start"] < a["window_end"] for a, b in itertools.pairwise(intraday))
    eod = [r for r in recorded if r["kind"] == "end_of_day"]
    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    assert [r["window_start"].date() for r in eod] == [yesterday]
    assert healthz == {"role": "active", "status": "ok"}

    for kind in ("intraday", "end_of_day"):
        done = sum(1 for r in recorded if r["kind"] == kind)
        assert (
            sample(samples, "settle_reconcile_runs_total", kind=kind, outcome="completed") == done
        )
    last = max(r["finished_at"] for r in recorded)
    assert sample(samples, "settle_reconcile_last_success_timestamp_seconds") == last.timestamp()
    rows = await world.pool.fetch(
        """SELECT s.source, sum(s.rows_returned) AS n FROM reconciliation_sources AS s
             JOIN reconciliation_runs AS r ON r.id = s.run_id
            WHERE r.status <> 'running' GROUP BY s.source"""
    )
    for r in rows:
        read = sample(samples, "settle_reconcile_objects_read_total", source=r["source"])
        assert read == r["n"]
    breaks = await world.pool.fetch("SELECT * FROM reconciliation_breaks WHERE status = 'open'")
    assert [(b["break_type"], b["rail_object_id"]) for b in breaks] == [
        ("unknown_at_rail", stray.id)
    ]
    open_unknown = sample(samples, "settle_reconcile_breaks_open", type="unknown_at_rail")
    assert open_unknown == 1
    assert sample(samples, "settle_reconcile_breaks_open", type="status_drift") == 0
    age = sample(samples, "settle_reconcile_oldest_open_break_seconds")
    assert 0 < age <= (datetime.now(UTC) - breaks[0]["first_seen"]).total_seconds()
    assert sample(samples, "settle_reconcile_healed_total") == 0


async def get(service: Service, path: str) -> object:
    transport = httpx.ASGITransport(app=service.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://r") as client:
        response = await client.get(path)
    assert response.status_code == 200
    return response.json()


async def test_a_second_replica_waits_for_the_lock_and_never_runs_beside_the_first(
    world: World,
) -> None:
    first, second = await reconciler(world), await reconciler(world)
    async with running(first) as first_task:

        async def first_ran_twice() -> bool:
            return len(await runs(world, RunKind.INTRADAY)) >= 2

        await eventually(first_ran_twice)
        async with running(second) as second_task:
            await asyncio.sleep(1.0)
            assert await get(second, "/healthz") == {"role": "standby", "status": "ok"}
            assert await get(first, "/healthz") == {"role": "active", "status": "ok"}
            standby = await scrape(second.app)
            assert sample(standby, "settle_reconcile_lock_held") == 0
            assert (
                sum(v for (name, _), v in standby.items() if name == "settle_reconcile_runs_total")
                == 0
            )
            # The first one stops: the second takes the lock over and runs.
            first.reconciler.stop()
            await asyncio.wait_for(first_task, 30)
            taken_over = len(await runs(world))

            async def second_ran() -> bool:
                return len(await runs(world)) > taken_over + 1

            await eventually(second_ran)
            assert await get(second, "/healthz") == {"role": "active", "status": "ok"}
            assert not second_task.done()
            # A standby asked to stop does not wait for the lock first.
            third = await reconciler(world)
            standby_task = asyncio.create_task(third.reconciler.run())
            await asyncio.sleep(0.5)
            third.reconciler.stop()
            await asyncio.wait_for(standby_task, 1.5)
            await third.aclose()
    recorded = await runs(world)
    assert {r["status"] for r in recorded} == {"completed"}
    for earlier, later in itertools.pairwise(recorded):
        assert later["started_at"] >= earlier["finished_at"], "two runs overlapped"


async def test_a_rail_outage_records_failed_runs_and_the_heartbeat_stays(world: World) -> None:
    healthy = await reconciler(world, SETTLE_RECONCILE_INTERVAL="60")
    async with running(healthy):

        async def one_completed() -> bool:
            return any(r["status"] == "completed" for r in await runs(world))

        await eventually(one_completed)
    heartbeat = max(r["finished_at"] for r in await runs(world) if r["status"] == "completed")
    before = len(await runs(world))
    closed = f"http://127.0.0.1:{free_ports()}"  # nothing listens there
    outage = await reconciler(world, closed)
    async with running(outage) as task:

        async def failed_twice_and_counted() -> bool:
            # A run's row is committed before its outcome is counted: wait for both.
            nonlocal samples, later
            later = (await runs(world))[before:]
            samples = await scrape(outage.app)
            key = ("settle_reconcile_runs_total", (("kind", "intraday"), ("outcome", "failed")))
            return len(later) >= 2 and samples.get(key) == len(later)

        samples: Samples = {}
        later: list[asyncpg.Record] = []
        await eventually(failed_twice_and_counted)
        assert not task.done()  # it keeps running, backing off
    assert later and {(r["kind"], r["status"]) for r in later} == {("intraday", "failed")}
    assert all("rail could not be read" in r["error"] for r in later)
    assert sample(samples, "settle_reconcile_last_success_timestamp_seconds") == (
        heartbeat.timestamp()
    )
    failed = sample(samples, "settle_reconcile_runs_total", kind="intraday", outcome="failed")
    assert failed == len(later)
    assert sample(samples, "settle_reconcile_runs_total", kind="intraday", outcome="completed") == 0


async def test_a_re_check_takes_a_submitted_settlement_at_its_age(world: World) -> None:
    # Seed 001's ages, with the reconciler's clock moved on instead of waiting for them.
    offset = timedelta(0)
    service = await reconciler(
        world, clock=lambda: utc_now() + offset, SETTLE_RECONCILE_RECHECK_AGES="1h,1d,7d,30d"
    )

    async def rechecks() -> list[asyncpg.Record]:
        return await runs(world, RunKind.RECHECK)

    async def read_by(run_id: int) -> dict[str, int]:
        rows = await world.pool.fetch(
            "SELECT source, rows_returned FROM reconciliation_sources WHERE run_id = $1", run_id
        )
        return {r["source"]: r["rows_returned"] for r in rows}

    # Handed to the rail, which shows nothing of it yet: a lag, not proof of anything.
    lagging = await world.accept()
    await world.move(lagging, S.DISPATCHING)
    await world.move(lagging, S.SUBMITTED)
    async with stripe_client(world.sim_url) as client:
        stray = await client.v1.transfers.create_async(transfer_params(str(uuid.uuid4())))
    try:
        offset = timedelta(minutes=59)
        assert await service.reconciler.round()
        assert await rechecks() == []  # not an hour old yet
        unknown = await world.pool.fetchrow(
            "SELECT * FROM reconciliation_breaks WHERE rail_object_id = $1", stray.id
        )
        assert unknown["break_type"] == "unknown_at_rail"  # found by the intraday run
        # The settlement under review whose transfer the rail shows: proof, healed at once.
        drift = await world.pool.fetchrow(
            "SELECT * FROM reconciliation_breaks WHERE settlement_id = $1", uuid.UUID(world.review)
        )
        assert (drift["break_type"], drift["status"]) == ("status_drift", "healed")

        offset = timedelta(hours=1, seconds=5)
        assert await service.reconciler.round()
        (first,) = await rechecks()
        assert await read_by(first["id"]) == {"ledger": 1, "rail": 0}
        missing = await world.pool.fetchrow(
            "SELECT * FROM reconciliation_breaks WHERE settlement_id = $1", uuid.UUID(lagging)
        )
        # Past its grace, still nothing at the rail: the re-check at T+1h calls it missing.
        assert missing["break_type"] == "missing_at_rail"
        assert missing["first_run_id"] == first["id"]

        offset = timedelta(hours=1, minutes=30)
        assert await service.reconciler.round()
        assert len(await rechecks()) == 1  # T+1h was taken; nothing else is due

        # The unknown transfer's break, first seen at 0h59m, is an hour old: only its object
        # is read again, by id (with the missing settlement's, first seen at 1h, an hour
        # short of its own next age).
        offset = timedelta(hours=1, minutes=59, seconds=30)
        assert await service.reconciler.round()
        (_, of_break) = await rechecks()
        assert await read_by(of_break["id"]) == {"ledger": 0, "rail": 1}
        seen = await world.pool.fetchval(
            "SELECT last_run_id FROM reconciliation_breaks WHERE id = $1", unknown["id"]
        )
        assert seen == of_break["id"]
    finally:
        await service.aclose()
