"""Rates across ledger replicas on the real PostgreSQL: each replica's heartbeat counts the live
ones in `service_replicas` and takes its share of every tenant's rate, so two ledgers together
admit the rate, not twice it; and a tenant's reads over its read rate are answered 429."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import asyncpg
import httpx
import pytest

from services.adapters.postgres.database import create_pool
from services.apps.ledger import windows
from services.ledger.acceptor import Ledger
from services.ledger.admission import Admission, admission_of
from services.ledger.booking import Books
from services.ledger.http import create_app
from services.ledger.reads import SettlementReads
from services.ledger.replicas import ReplicaRegistry
from services.platform.service_settings import Settings
from tests.conftest import unique
from tests.integration.test_ledger_api import error_of, ledger_settings, settlement

pytestmark = pytest.mark.integration


@pytest.fixture
async def pool(database_url: str, kafka_bootstrap: str) -> AsyncIterator[asyncpg.Pool]:
    settings = ledger_settings(database_url, kafka_bootstrap, unique("ta"), unique("tb"))
    pool = await create_pool(settings, keep_sessions=True)
    yield pool
    await pool.close()


def limited(database_url: str, kafka_bootstrap: str) -> tuple[Settings, str]:
    """Ledger settings whose tenant may book 4 settlements and read 6 times, cluster-wide,
    before waiting 1000 s for another token; and that tenant."""
    a = unique("ta")
    limits = {
        a: {
            "rate": {"per_second": 0.001, "burst": 4},
            "read_rate": {"per_second": 0.001, "burst": 6},
        }
    }
    extra = {"SETTLE_TENANT_LIMITS": json.dumps(limits)}
    return ledger_settings(database_url, kafka_bootstrap, a, unique("tb"), **extra), a


async def test_two_replicas_each_take_half_and_one_leaving_gives_it_back(
    pool: asyncpg.Pool, database_url: str, kafka_bootstrap: str
) -> None:
    settings, _ = limited(database_url, kafka_bootstrap)
    service = unique("ledger-")  # this test's replicas only: tests never clean the table
    one, two = admission_of(settings), admission_of(settings)
    first = ReplicaRegistry(pool, one.share_among, service=service)
    second = ReplicaRegistry(pool, two.share_among, service=service)
    assert await first.beat() == 1  # alone so far: the whole rate
    assert [await second.beat(), await first.beat()] == [2, 2]
    assert (one.replicas, two.replicas) == (2, 2)
    rows = await pool.fetch("SELECT replica_id FROM service_replicas WHERE service = $1", service)
    assert {r["replica_id"] for r in rows} == {first.replica_id, second.replica_id}
    # Another heartbeat is a stamp, not another row.
    assert await second.beat() == 2
    await second.leave()
    assert await first.beat() == 1
    assert one.replicas == 1


async def test_a_replica_that_stops_beating_is_counted_out_after_three_heartbeats(
    pool: asyncpg.Pool,
) -> None:
    service = unique("ledger-")
    counts: list[int] = []
    live = ReplicaRegistry(pool, counts.append, service=service, heartbeat=0.2)
    crashed = ReplicaRegistry(pool, lambda n: None, service=service, heartbeat=0.2)
    await crashed.beat()
    assert await live.beat() == 2
    await asyncio.sleep(0.7)  # three heartbeats of 0.2 s and more, without a stamp of it
    assert await live.beat() == 1
    assert counts == [2, 1]


@asynccontextmanager
async def replicas(settings: Settings, count: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """`count` ledger apps, each with its own pool, admission and heartbeat, as `serve` wires
    them (on a service name of this test's own), after one heartbeat of each."""
    service = unique("ledger-")
    async with AsyncExitStack() as stack:
        clients, beats = [], []
        for _ in range(count):
            pool = await create_pool(settings, keep_sessions=True)
            stack.push_async_callback(pool.close)
            books = Books(windows(settings), settings.stripe_method, limits=settings.tenant_limits)
            ledger = Ledger(pool, books)
            stack.push_async_callback(ledger.stop)
            admission: Admission = admission_of(settings)
            registry = ReplicaRegistry(pool, admission.share_among, service=service)
            stack.push_async_callback(registry.leave)
            beats.append(registry.beat)
            app = create_app(ledger, SettlementReads(pool), settings, admission=admission)
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            client = httpx.AsyncClient(transport=transport, base_url="http://ledger")
            clients.append(await stack.enter_async_context(client))
        for beat in beats * 2:  # the second round: every replica has seen every other
            await beat()
        yield clients


async def test_two_ledgers_together_admit_the_tenants_rate_not_twice_it(
    database_url: str, kafka_bootstrap: str
) -> None:
    settings, tenant = limited(database_url, kafka_bootstrap)
    auth = {"Authorization": f"Bearer {settings.api_tokens[tenant][-1].get_secret_value()}"}
    async with replicas(settings, 2) as ledgers:

        async def book(ledger: httpx.AsyncClient) -> httpx.Response:
            headers = {**auth, "Idempotency-Key": unique("key-")}
            return await ledger.post("/v1/settlements", json=settlement(), headers=headers)

        # A burst of 4 shared by 2 replicas: 2 each, then 429 on both.
        booked = [(await book(ledger)).status_code for ledger in ledgers for _ in range(3)]
        assert booked == [201, 201, 429, 201, 201, 429]
        # Reads have a bucket of their own (6, so 3 each): the bookings spent none of it.
        reads = [
            await ledger.get("/v1/settlements", headers=auth)
            for ledger in ledgers
            for _ in range(4)
        ]
    assert [r.status_code for r in reads] == [200, 200, 200, 429] * 2
    assert len(reads[0].json()["data"]) == 4
    refused = reads[-1]
    assert error_of(refused)["code"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1000


async def test_one_ledger_alone_serves_the_whole_read_rate_then_429_on_every_read(
    database_url: str, kafka_bootstrap: str
) -> None:
    settings, tenant = limited(database_url, kafka_bootstrap)
    auth = {"Authorization": f"Bearer {settings.api_tokens[tenant][-1].get_secret_value()}"}
    paths = [
        "/v1/settlements",
        "/v1/settlements/00000000-0000-0000-0000-000000000000",
        f"/v1/accounts/{tenant}:funding:EUR/balance",
        f"/v1/accounts/{tenant}:funding:EUR/entries",
    ]
    async with replicas(settings, 1) as (ledger,):
        served = [(await ledger.get(path, headers=auth)).status_code for path in paths[:2] * 3]
        refused = [await ledger.get(path, headers=auth) for path in paths]
    assert served == [200, 404] * 3
    for answer in refused:
        assert (answer.status_code, error_of(answer)["code"]) == (429, "rate_limited"), answer
        assert int(answer.headers["retry-after"]) >= 1
