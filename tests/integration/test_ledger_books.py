"""Booking on the real PostgreSQL: the idempotency contract, the books, the outbox, all in one
transaction, under concurrency."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta

import asyncpg
import pytest

from services.adapters.postgres.database import create_pool
from services.contracts import avro
from services.domain.errors import StoreUnavailable
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books, Windows
from services.ledger.intake import parse_settlement_body
from services.ledger.metrics import create_metrics
from services.ledger.model import Outcome, SettlementRequest
from services.platform.settings import load_settings
from tests.conftest import unique

pytestmark = [pytest.mark.integration, pytest.mark.money]
WINDOWS = Windows(replay=timedelta(hours=24), tombstone=timedelta(hours=24))


@pytest.fixture
async def ledger(pool: asyncpg.Pool) -> AsyncIterator[Ledger]:
    ledger = Ledger(pool, Books(WINDOWS))
    yield ledger
    await ledger.stop()


def request(
    tenant: str,
    key: str | None = None,
    reference: str | None = None,
    amount: int = 2_500,
    currency: str = "EUR",
) -> SettlementRequest:
    body = {
        "reference": reference or unique("ref-"),
        "payee": "payee-7",
        "destination": "acct_1Q2w3E",
        "amount": amount,
        "currency": currency,
        "metadata": {"order": "o-1"},
    }
    return parse_settlement_body(tenant, key or unique("key-"), json.dumps(body).encode())


async def test_accept_books_everything_in_one_transaction(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenant = unique("t")
    result = await ledger.accept(request(tenant, amount=2_500))
    assert result.outcome is Outcome.CREATED and result.status == 201
    body = json.loads(result.body)
    assert body["id"] == result.settlement_id and body["status"] == "accepted"
    sid = body["id"]
    async with pool.acquire() as db:
        row = await db.fetchrow(
            "SELECT status, version, amount FROM settlements WHERE id = $1", sid
        )
        assert (row["status"], row["version"], row["amount"]) == ("accepted", 1, 2_500)
        history = await db.fetch(
            "SELECT sequence, from_status, to_status FROM settlement_transitions "
            "WHERE settlement_id = $1",
            sid,
        )
        assert [tuple(h) for h in history] == [(1, None, "accepted")]
        postings = await db.fetch(
            """SELECT p.account_id, p.amount FROM postings p JOIN journal_entries e
               ON e.id = p.entry_id WHERE e.settlement_id = $1 ORDER BY p.amount""",
            sid,
        )
        assert sum(p["amount"] for p in postings) == 0
        assert {p["account_id"]: p["amount"] for p in postings} == {
            f"{tenant}:funding:EUR": -2_500,
            f"{tenant}:payable:EUR": 2_500,
        }
        instruction = await db.fetchrow(
            "SELECT status, idempotency_key FROM rail_instructions WHERE settlement_id = $1",
            sid,
        )
        assert instruction["status"] == "pending"
        assert instruction["idempotency_key"] == body["rail_idempotency_key"]
        outbox = await db.fetchrow(
            "SELECT sequence, message_key, payload FROM outbox WHERE settlement_id = $1", sid
        )
        event = avro.decode(outbox["payload"], "SettlementEvent")
        assert (event["type"], event["sequence"], event["amount"]) == ("created", 1, 2_500)
        assert outbox["message_key"] == sid.encode()
        stored = await db.fetchrow(
            "SELECT state, response_status, response_body FROM idempotency_keys WHERE tenant = $1",
            tenant,
        )
        assert (stored["state"], stored["response_status"]) == ("completed", 201)
        assert stored["response_body"] == result.body


async def test_retry_replays_the_same_bytes_and_books_nothing(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenant = unique("t")
    first = request(tenant)
    created = await ledger.accept(first)
    replayed = await ledger.accept(first)
    assert replayed.outcome is Outcome.REPLAYED
    assert (replayed.status, replayed.body) == (created.status, created.body)
    async with pool.acquire() as db:
        count = await db.fetchval("SELECT count(*) FROM settlements WHERE tenant = $1", tenant)
    assert count == 1


async def test_same_key_other_body_is_refused_and_nothing_runs(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenant, key = unique("t"), unique("k")
    await ledger.accept(request(tenant, key, amount=100))
    refused = await ledger.accept(request(tenant, key, amount=1_000))
    assert refused.outcome is Outcome.MISMATCH and refused.status == 422
    assert json.loads(refused.body)["error"]["code"] == "idempotency_key_reused"
    async with pool.acquire() as db:
        amounts = await db.fetch("SELECT amount FROM settlements WHERE tenant = $1", tenant)
    assert [a["amount"] for a in amounts] == [100]


async def test_keys_are_namespaced_per_tenant(ledger: Ledger) -> None:
    key = unique("shared-key-")
    a = await ledger.accept(request(unique("t"), key))
    b = await ledger.accept(request(unique("t"), key))
    assert a.outcome is b.outcome is Outcome.CREATED
    assert a.settlement_id != b.settlement_id


async def test_duplicate_reference_under_another_key_is_409(ledger: Ledger) -> None:
    tenant, reference = unique("t"), unique("ref")
    assert (await ledger.accept(request(tenant, reference=reference))).status == 201
    again = await ledger.accept(request(tenant, reference=reference))
    assert again.outcome is Outcome.DUPLICATE_REFERENCE and again.status == 409
    assert json.loads(again.body)["error"]["code"] == "duplicate_reference"


async def age_key(pool: asyncpg.Pool, tenant: str, key: str, by: timedelta) -> None:
    async with pool.acquire() as db:
        await db.execute(
            "UPDATE idempotency_keys SET created_at = created_at - $3::interval "
            "WHERE tenant = $1 AND key = $2",
            tenant,
            key,
            by,
        )


async def test_key_past_replay_window_is_410_then_new_after_tombstone(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenant, key = unique("t"), unique("k")
    original = request(tenant, key)
    await ledger.accept(original)
    await age_key(pool, tenant, key, WINDOWS.replay + timedelta(seconds=1))
    expired = await ledger.accept(original)
    assert expired.outcome is Outcome.EXPIRED and expired.status == 410
    assert json.loads(expired.body)["error"]["code"] == "idempotency_key_expired"
    await age_key(pool, tenant, key, WINDOWS.tombstone)
    reused = await ledger.accept(request(tenant, key))
    assert reused.outcome is Outcome.CREATED


async def test_fifty_concurrent_identical_requests_book_one_settlement(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenant = unique("t")
    same = request(tenant)
    results = await asyncio.gather(*(ledger.accept(same) for _ in range(50)))
    created = [r for r in results if r.status == 201]
    assert {r.body for r in created} == {created[0].body}
    assert all(r.outcome is Outcome.IN_USE for r in results if r.status != 201)
    assert sum(r.outcome is Outcome.CREATED for r in results) == 1
    async with pool.acquire() as db:
        count = await db.fetchval("SELECT count(*) FROM settlements WHERE tenant = $1", tenant)
    assert count == 1


async def test_same_key_held_by_another_transaction_is_409_in_use(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenant = unique("t")
    held = request(tenant)
    async with pool.acquire() as other, other.transaction():
        # Another replica is mid-booking this key: its claim is not committed yet.
        await other.execute(
            """INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, state,
                   locked_until, created_at)
               VALUES ($1, $2, $3, 'POST', '/v1/settlements', 'in_flight',
                       now() + interval '30 s', now())""",
            tenant,
            held.idempotency_key,
            held.fingerprint,
        )
        result = await ledger.accept(held)
    assert result.outcome is Outcome.IN_USE and result.status == 409
    assert result.retry_after is not None and result.retry_after > 0
    assert json.loads(result.body)["error"]["code"] == "idempotency_key_in_use"


async def test_books_balance_under_concurrent_settlements_on_shared_accounts(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenants = [unique("t") for _ in range(3)]
    amounts = list(range(1, 301))
    requests = [request(tenants[n % 3], amount=a, currency="USD") for n, a in enumerate(amounts)]
    results = await asyncio.gather(*(ledger.accept(r) for r in requests))
    assert all(r.outcome is Outcome.CREATED for r in results)
    async with pool.acquire() as db:
        rows = await db.fetch(
            """SELECT a.id, (SELECT sum(balance) FROM account_balances b WHERE b.account_id = a.id)
                      AS balance,
                      (SELECT coalesce(sum(amount), 0) FROM postings p WHERE p.account_id = a.id)
                      AS posted
                 FROM accounts a WHERE a.tenant = ANY($1::text[])""",
            tenants,
        )
    assert rows and all(r["balance"] == r["posted"] for r in rows)
    by_account = {r["id"]: r["balance"] for r in rows}
    for n, tenant in enumerate(tenants):
        booked = sum(amounts[n::3])
        assert by_account[f"{tenant}:payable:USD"] == booked
        assert by_account[f"{tenant}:funding:USD"] == -booked


async def test_batches_booked_at_once_answer_a_repeated_key_once(pool: asyncpg.Pool) -> None:
    # Three batches of two run at once: a key in two of them books one settlement, and the
    # other answers from the stored record (a replay, or 422 for another body).
    ledger = Ledger(pool, Books(WINDOWS), workers=3, max_batch=2)
    tenant = unique("t")
    first, other = request(tenant), request(tenant)
    changed = request(tenant, key=other.idempotency_key, amount=other.amount + 1)
    batch = [first, request(tenant), request(tenant), first, other, changed]
    try:
        results = await ledger.accept_many(batch)
    finally:
        await ledger.stop()
    outcomes = [r.outcome for r in results]
    assert sorted([outcomes[0], outcomes[3]]) == [Outcome.CREATED, Outcome.REPLAYED]
    assert results[0].body == results[3].body
    assert outcomes[1:3] == [Outcome.CREATED, Outcome.CREATED]
    assert outcomes[4:] == [Outcome.CREATED, Outcome.MISMATCH]
    async with pool.acquire() as db:
        booked = await db.fetchval("SELECT count(*) FROM settlements WHERE tenant = $1", tenant)
    assert booked == 4


async def test_batches_booked_at_once_update_different_balance_shards(
    pool: asyncpg.Pool,
) -> None:
    # Concurrent batches of one process must not queue (or deadlock) on one balance row.
    books = Books(WINDOWS, shards=4)
    ledger = Ledger(pool, books, workers=4, max_batch=1)
    tenant = unique("t")
    try:
        results = await ledger.accept_many([request(tenant, amount=a) for a in (1, 2, 4, 8)])
    finally:
        await ledger.stop()
    assert all(r.outcome is Outcome.CREATED for r in results)
    async with pool.acquire() as db:
        shards = await db.fetch(
            "SELECT shard, balance FROM account_balances WHERE account_id = $1 ORDER BY shard",
            f"{tenant}:payable:EUR",
        )
    assert sorted(r["balance"] for r in shards) == [1, 2, 4, 8]


async def test_an_http_request_and_a_command_a_moment_apart_share_one_transaction(
    pool: asyncpg.Pool,
) -> None:
    metrics = create_metrics()
    ledger = Ledger(pool, Books(WINDOWS), metrics=metrics, linger=0.3)
    tenant = unique("t")
    try:
        posted = asyncio.create_task(ledger.accept(request(tenant)))
        await asyncio.sleep(0.05)
        consumed = await ledger.accept_many([request(tenant)])
        results = [await posted, *consumed]
    finally:
        await ledger.stop()
    assert [r.outcome for r in results] == [Outcome.CREATED, Outcome.CREATED]
    registry = metrics.registry
    assert registry.get_sample_value("settle_ledger_batch_size_count") == 1
    assert registry.get_sample_value("settle_ledger_batch_size_sum") == 2


async def test_postgres_unreachable_fails_closed() -> None:
    dead = await asyncpg.create_pool("postgresql://settle@127.0.0.1:1/none", min_size=0)
    ledger = Ledger(dead, Books(WINDOWS))
    try:
        with pytest.raises(StoreUnavailable):
            await ledger.accept(request(unique("t")))
    finally:
        await ledger.stop()
        await dead.close()


async def test_a_connection_given_back_mid_transaction_comes_back_rolled_back(
    database_url: str,
) -> None:
    settings = load_settings({"SETTLE_DATABASE_URL": database_url})
    pool = await create_pool(settings, max_size=1, keep_sessions=True)
    tenant = unique("t")
    try:
        async with pool.acquire() as conn:
            await conn.execute("BEGIN")
            await conn.execute(
                "INSERT INTO accounts (id, tenant, kind, currency)"
                " VALUES ($1, $2, 'funding', 'USD')",
                f"{tenant}:funding:USD",
                tenant,
            )
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction()
            found = await conn.fetchval("SELECT count(*) FROM accounts WHERE tenant = $1", tenant)
            assert found == 0
    finally:
        await pool.close()


async def test_a_connection_given_back_costs_no_reset_round_trip(database_url: str) -> None:
    # The full reset (RESET ALL and more) is a round trip per batch; a setting surviving the
    # release shows none was sent.
    settings = load_settings({"SETTLE_DATABASE_URL": database_url})
    pool = await create_pool(settings, max_size=1, keep_sessions=True)
    try:
        async with pool.acquire() as conn:
            await conn.execute("SET application_name = 'kept'")
        async with pool.acquire() as conn:
            assert await conn.fetchval("SHOW application_name") == "kept"
    finally:
        await pool.close()
