"""The ledger's read API on the real PostgreSQL: a settlement with its history and postings,
tenant isolation, keyset pages that neither skip nor repeat, balances summed over shards, and
503 when PostgreSQL cannot be reached. Rows are written with plain SQL under tenants of each
test's own."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from services.ledger.http import create_admin_app, create_app
from services.ledger.metrics import create_metrics
from services.ledger.model import AcceptResult, SettlementRequest
from services.ledger.readiness import Readiness
from services.ledger.reads import SettlementReads
from services.platform.settings import load_settings
from tests.conftest import asyncpg_dsn, unique
from tools.infra.procs import free_ports

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)


class NoAcceptor:
    """The read tests never book; a call here is a bug in the test."""

    async def accept(self, request: SettlementRequest) -> AcceptResult:
        raise AssertionError("reads must not book")

    async def accept_many(self, requests: list[SettlementRequest]) -> list[AcceptResult]:
        raise AssertionError("reads must not book")


def client_for(pool: asyncpg.Pool, kafka_bootstrap: str, *tenants: str) -> httpx.AsyncClient:
    tokens = ",".join(f"{t}:token-{t}" for t in tenants)
    settings = load_settings({"SETTLE_API_TOKENS": tokens})
    app = create_app(NoAcceptor(), SettlementReads(pool), settings)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ledger")


def admin_client_for(pool: asyncpg.Pool, kafka_bootstrap: str) -> httpx.AsyncClient:
    app = create_admin_app(Readiness(pool, kafka_bootstrap), create_metrics())
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://admin")


def auth(tenant: str) -> dict[str, str]:
    return {"Authorization": f"Bearer token-{tenant}"}


async def open_accounts(conn: asyncpg.Connection, tenant: str) -> None:
    for kind in ("funding", "payable"):
        await conn.execute(
            "INSERT INTO accounts (id, tenant, kind, currency) VALUES ($1, $2, $3, 'USD')"
            " ON CONFLICT DO NOTHING",
            f"{tenant}:{kind}:USD",
            tenant,
            kind,
        )


async def seed_settlement(
    conn: asyncpg.Connection,
    tenant: str,
    *,
    reference: str,
    status: str = "submitted",
    created_at: datetime = T0,
    amount: int = 1050,
    settlement_id: uuid.UUID | None = None,
) -> str:
    """A settlement with its accepted entry (funding -> payable) and, when past `accepted`,
    its transitions to `status` and a transferred rail instruction."""
    sid = settlement_id or uuid.uuid4()
    statuses = ["accepted"] if status == "accepted" else ["accepted", "dispatching", status]
    async with conn.transaction():
        await open_accounts(conn, tenant)
        await conn.execute(
            """INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination,
                   amount, currency, rail, metadata, status, version, created_at, updated_at)
               VALUES ($1, $2, $3, $4, 'payee-1', 'acct_1', $5, 'USD', 'sim',
                   '{"order": "o-1"}', $6, $7, $8, $9)""",
            sid,
            tenant,
            reference,
            f"key-{reference}",
            amount,
            status,
            len(statuses),
            created_at,
            created_at + timedelta(seconds=len(statuses)),
        )
        previous = None
        for sequence, to_status in enumerate(statuses, start=1):
            await conn.execute(
                "INSERT INTO settlement_transitions VALUES ($1, $2, $3, $4, NULL, 'ledger', $5)",
                sid,
                sequence,
                previous,
                to_status,
                created_at + timedelta(seconds=sequence - 1),
            )
            previous = to_status
        entry = uuid.uuid4()
        await conn.execute(
            "INSERT INTO journal_entries VALUES ($1, $2, $3, 'accepted', $4)",
            entry,
            tenant,
            sid,
            created_at,
        )
        await conn.executemany(
            "INSERT INTO postings (entry_id, account_id, amount, currency)"
            " VALUES ($1, $2, $3, 'USD')",
            [(entry, f"{tenant}:funding:USD", -amount), (entry, f"{tenant}:payable:USD", amount)],
        )
        if status != "accepted":
            key = hashlib.sha256(str(sid).encode()).hexdigest()
            await conn.execute(
                """INSERT INTO rail_instructions (settlement_id, tenant, rail, method,
                       idempotency_key, destination, amount, currency, status, rail_reference,
                       created_at, updated_at)
                   VALUES ($1, $2, 'sim', 'transfer', $3, 'acct_1', $4, 'USD', 'transferred',
                       $5, $6, $6)""",
                sid,
                tenant,
                key,
                amount,
                f"tr_{reference}",
                created_at,
            )
    return str(sid)


async def pages(client: httpx.AsyncClient, path: str, tenant: str, **params: Any) -> list[Any]:
    """Every page of a listing, following next_cursor to the end."""
    out: list[Any] = []
    cursor = None
    for _ in range(50):
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = await client.get(path, params=query, headers=auth(tenant))
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["object"] == "list"
        out.append(body["data"])
        cursor = body["next_cursor"]
        if cursor is None:
            return out
    raise AssertionError("pagination did not end")


async def test_a_settlement_reads_back_with_history_rail_key_and_postings(
    pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    tenant, other = unique("t"), unique("t")
    async with pool.acquire() as conn:
        sid = await seed_settlement(conn, tenant, reference="ref-1")
    async with client_for(pool, kafka_bootstrap, tenant, other) as client:
        response = await client.get(f"/v1/settlements/{sid}", headers=auth(tenant))
        assert response.status_code == 200
        body = response.json()
        assert body["object"] == "settlement"
        assert (body["id"], body["reference"], body["amount"], body["currency"]) == (
            sid,
            "ref-1",
            1050,
            "USD",
        )
        assert (body["status"], body["version"], body["metadata"]) == (
            "submitted",
            3,
            {"order": "o-1"},
        )
        assert body["rail_idempotency_key"] == hashlib.sha256(sid.encode()).hexdigest()
        assert body["rail_reference"] == "tr_ref-1"
        assert body["created_at"] == "2026-11-25T12:00:00.000Z"
        history = [(t["sequence"], t["from_status"], t["to_status"]) for t in body["transitions"]]
        assert history == [
            (1, None, "accepted"),
            (2, "accepted", "dispatching"),
            (3, "dispatching", "submitted"),
        ]
        postings = {p["account_id"]: p["amount"] for p in body["postings"]}
        assert postings == {f"{tenant}:funding:USD": -1050, f"{tenant}:payable:USD": 1050}
        assert {p["kind"] for p in body["postings"]} == {"accepted"}

        for path, who in [
            (f"/v1/settlements/{sid}", other),
            (f"/v1/settlements/{uuid.uuid4()}", tenant),
            ("/v1/settlements/not-a-uuid", tenant),
        ]:
            missing = await client.get(path, headers=auth(who))
            assert missing.status_code == 404, path
            assert missing.json()["error"]["code"] == "not_found"
            assert sid not in missing.text


async def test_listing_by_reference_and_status_pages_without_gaps_or_repeats(
    pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    tenant, other = unique("t"), unique("t")
    async with pool.acquire() as conn:
        # Two share a created_at, so the id must break the tie for the cursor to hold.
        times = [
            T0,
            T0 + timedelta(seconds=1),
            T0 + timedelta(seconds=1),
            T0 + timedelta(seconds=2),
        ]
        times.append(T0 + timedelta(seconds=3))
        paid = [
            await seed_settlement(conn, tenant, reference=f"paid-{i}", status="paid", created_at=t)
            for i, t in enumerate(times)
        ]
        await seed_settlement(conn, tenant, reference="fresh", status="accepted")
        await seed_settlement(conn, other, reference="paid-0", status="paid")
    async with client_for(pool, kafka_bootstrap, tenant) as client:
        got = await pages(client, "/v1/settlements", tenant, status="paid", limit=2)
        assert [len(page) for page in got] == [2, 2, 1]
        listed = [s for page in got for s in page]
        assert sorted(s["id"] for s in listed) == sorted(paid)
        keys = [(s["created_at"], s["id"]) for s in listed]
        assert keys == sorted(keys, reverse=True)
        assert {s["status"] for s in listed} == {"paid"}

        everything = await pages(client, "/v1/settlements", tenant, limit=100)
        assert [len(page) for page in everything] == [6]

        by_reference = await pages(client, "/v1/settlements", tenant, reference="paid-0")
        assert [[s["id"] for s in page] for page in by_reference] == [[paid[0]]]

        bad = await client.get(
            "/v1/settlements", params={"cursor": "not a cursor!"}, headers=auth(tenant)
        )
        assert bad.status_code == 400
        assert (bad.json()["error"]["code"], bad.json()["error"]["field"]) == (
            "invalid_cursor",
            "cursor",
        )


async def test_balance_is_the_sum_of_shards_and_entries_page_newest_first(
    pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    tenant, other = unique("t"), unique("t")
    funding = f"{tenant}:funding:USD"
    async with pool.acquire() as conn:
        amounts = [100, 200, 300, 400, 500]
        sids = [
            await seed_settlement(conn, tenant, reference=f"r{i}", status="accepted", amount=a)
            for i, a in enumerate(amounts)
        ]
        await conn.executemany(
            "INSERT INTO account_balances (account_id, shard, balance) VALUES ($1, $2, $3)",
            [(funding, 0, -1000), (funding, 3, -400), (funding, 7, -100)],
        )
    async with client_for(pool, kafka_bootstrap, tenant, other) as client:
        balance = await client.get(f"/v1/accounts/{funding}/balance", headers=auth(tenant))
        assert balance.status_code == 200
        assert balance.json() == {"account": funding, "currency": "USD", "balance": -1500}

        no_shards = await client.get(
            f"/v1/accounts/{tenant}:payable:USD/balance", headers=auth(tenant)
        )
        assert no_shards.json()["balance"] == 0

        got = await pages(client, f"/v1/accounts/{funding}/entries", tenant, limit=2)
        assert [len(page) for page in got] == [2, 2, 1]
        entries = [e for page in got for e in page]
        assert [e["amount"] for e in entries] == [-a for a in reversed(amounts)]
        assert [e["settlement_id"] for e in entries] == list(reversed(sids))
        assert {e["kind"] for e in entries} == {"accepted"}

        for path in (f"/v1/accounts/{funding}/balance", f"/v1/accounts/{funding}/entries"):
            foreign = await client.get(path, headers=auth(other))
            assert foreign.status_code == 404
            assert foreign.json()["error"]["code"] == "not_found"
        unknown = await client.get(
            f"/v1/accounts/{tenant}:paid_out:EUR/balance", headers=auth(tenant)
        )
        assert unknown.status_code == 404


@pytest.fixture
async def dead_pool() -> AsyncIterator[asyncpg.Pool]:
    # min_size=0: the pool is built without a server and fails on first use, like a ledger
    # started while PostgreSQL is down.
    dsn = f"postgresql://settle@127.0.0.1:{free_ports()}/settle"
    pool = await asyncpg.create_pool(dsn, min_size=0, max_size=1)
    yield pool
    await pool.close()


async def test_reads_fail_closed_with_503_when_postgres_is_unreachable(
    dead_pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    tenant = unique("t")
    async with client_for(dead_pool, kafka_bootstrap, tenant) as client:
        for path in (
            f"/v1/settlements/{uuid.uuid4()}",
            "/v1/settlements",
            f"/v1/accounts/{tenant}:funding:USD/balance",
            f"/v1/accounts/{tenant}:funding:USD/entries",
        ):
            response = await client.get(path, headers=auth(tenant))
            assert response.status_code == 503, path
            assert int(response.headers["retry-after"]) > 0
            assert response.json()["error"]["code"] == "store_unavailable"

    async with admin_client_for(dead_pool, kafka_bootstrap) as admin:
        ready = await admin.get("/readyz")
        assert (ready.status_code, ready.json()) == (503, {"kafka": True, "postgres": False})


async def test_reads_on_a_closed_pool_are_503(database_url: str, kafka_bootstrap: str) -> None:
    pool = await asyncpg.create_pool(asyncpg_dsn(database_url), min_size=1, max_size=1)
    await pool.close()
    tenant = unique("t")
    async with client_for(pool, kafka_bootstrap, tenant) as client:
        response = await client.get("/v1/settlements", headers=auth(tenant))
    assert response.status_code == 503


async def test_readyz_is_200_when_postgres_and_kafka_answer(
    pool: asyncpg.Pool, kafka_bootstrap: str
) -> None:
    async with admin_client_for(pool, kafka_bootstrap) as admin:
        ready = await admin.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"kafka": True, "postgres": True})


async def test_readyz_reports_an_unreachable_kafka(pool: asyncpg.Pool) -> None:
    probe = Readiness(pool, f"127.0.0.1:{free_ports()}", timeout=0.5)
    assert await probe.check() == {"kafka": False, "postgres": True}
