"""Idempotency records past their retention are deleted in bounded batches on the real
PostgreSQL; live keys, in-flight keys and keys of unfinished settlements stay and answer as
before."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from services.ledger.acceptor import Ledger
from services.ledger.booking import Books, Windows
from services.ledger.key_cleanup import (
    CLEANUP_LOCK,
    FINAL_STATUSES,
    START,
    SWEEP_BATCH,
    KeyCleanup,
    deleted_keys_counter,
)
from services.ledger.key_retention import key_retention
from services.ledger.model import Outcome, SettlementRequest
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.test_ledger_books import WINDOWS, request

pytestmark = pytest.mark.integration
POLICY = key_retention(WINDOWS.replay, WINDOWS.tombstone, WINDOWS.replay + WINDOWS.tombstone)
PAST_RETENTION = POLICY.retention + timedelta(minutes=1)


@pytest.fixture
async def pool(infra: Servers) -> AsyncIterator[asyncpg.Pool]:
    # A database of its own per test: a sweep deletes every old key it can see.
    async with scratch_database(infra.database_url, "settle_keys_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
        yield pool
        await pool.close()


@pytest.fixture
async def ledger(pool: asyncpg.Pool) -> AsyncIterator[Ledger]:
    ledger = Ledger(pool, Books(WINDOWS))
    yield ledger
    await ledger.stop()


def cleanup(pool: asyncpg.Pool, batch: int = 1000) -> tuple[KeyCleanup, CollectorRegistry]:
    registry = CollectorRegistry()
    policy = key_retention(WINDOWS.replay, WINDOWS.tombstone, POLICY.retention, batch)
    return KeyCleanup(pool, policy, deleted_keys_counter(registry), pause=0), registry


async def book(ledger: Ledger, r: SettlementRequest, status: str, age: timedelta) -> None:
    """Book `r`, move its settlement to `status` and its key's first use `age` back."""
    result = await ledger.accept(r)
    if result.settlement_id is not None:
        await ledger.pool.execute(
            "UPDATE settlements SET status = $2, reason = 'as the test needs' WHERE id = $1",
            result.settlement_id,
            status,
        )
    await ledger.pool.execute(
        "UPDATE idempotency_keys SET created_at = created_at - $3::interval"
        " WHERE tenant = $1 AND key = $2",
        r.tenant,
        r.idempotency_key,
        age,
    )


async def keys_of(pool: asyncpg.Pool, tenant: str) -> set[str]:
    rows = await pool.fetch("SELECT key FROM idempotency_keys WHERE tenant = $1", tenant)
    return {row["key"] for row in rows}


async def test_expired_keys_go_and_live_ones_stay_and_answer_as_before(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenant = unique("t")
    paid_old = request(tenant, "paid-old")
    await book(ledger, paid_old, "paid", PAST_RETENTION)
    await book(ledger, request(tenant, "failed-old"), "failed", PAST_RETENTION)
    await book(ledger, request(tenant, "submitted-old"), "submitted", PAST_RETENTION)
    await book(ledger, request(tenant, "review-old"), "needs_review", PAST_RETENTION)
    fresh = request(tenant, "paid-fresh")
    await book(ledger, fresh, "paid", timedelta(hours=1))
    tombstoned = request(tenant, "paid-tombstoned")
    await book(ledger, tombstoned, "paid", WINDOWS.replay + timedelta(hours=1))
    # A request refused for its reference stores a 409 and books no settlement.
    await book(ledger, request(tenant, "refused-old", paid_old.reference), "-", PAST_RETENTION)
    await pool.execute(
        """INSERT INTO idempotency_keys (tenant, key, fingerprint, method, path, state,
               locked_until, created_at)
           VALUES ($1, 'in-flight-old', $2, 'POST', '/v1/settlements', 'in_flight',
                   now() - $3::interval + interval '30 s', now() - $3::interval)""",
        tenant,
        b"\x01" * 32,
        PAST_RETENTION,
    )
    replayed_before = await ledger.accept(fresh)

    sweeper, registry = cleanup(pool)
    assert await sweeper.sweep() == 3
    assert registry.get_sample_value("settle_ledger_idempotency_keys_deleted_total") == 3
    assert await keys_of(pool, tenant) == {
        "submitted-old",
        "review-old",
        "paid-fresh",
        "paid-tombstoned",
        "in-flight-old",
    }

    # Inside the window the key still replays its first bytes; in the tombstone it is 410.
    replayed = await ledger.accept(fresh)
    assert replayed.outcome is Outcome.REPLAYED
    assert (replayed.status, replayed.body) == (replayed_before.status, replayed_before.body)
    assert (await ledger.accept(tombstoned)).outcome is Outcome.EXPIRED
    # A deleted key is a new request; a late retry of the old one still books nothing twice.
    assert (await ledger.accept(paid_old)).outcome is Outcome.DUPLICATE_REFERENCE
    assert (await ledger.accept(request(tenant, "failed-old"))).outcome is Outcome.CREATED
    assert await sweeper.sweep() == 0


async def test_each_statement_deletes_at_most_a_batch_and_walks_past_keys_that_stay(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenant = unique("t")
    # The unfinished ones are the oldest: a sweep that did not walk past them would stall.
    for n in range(12):
        await book(ledger, request(tenant, f"open-{n:02}"), "submitted", PAST_RETENTION * 2)
    done = [request(tenant, f"done-{n:02}") for n in range(25)]
    for r in await ledger.accept_many(done):
        await pool.execute("UPDATE settlements SET status = 'paid' WHERE id = $1", r.settlement_id)
    await pool.execute(
        "UPDATE idempotency_keys SET created_at = created_at - $2::interval"
        " WHERE tenant = $1 AND key LIKE 'done-%'",
        tenant,
        PAST_RETENTION,
    )

    cutoff = POLICY.cutoff(datetime.now(UTC))
    one = await pool.fetchrow(SWEEP_BATCH, CLEANUP_LOCK, cutoff, *START, 10, FINAL_STATUSES)
    assert (one["held"], one["examined"], one["deleted"]) == (True, 10, 0)
    two = await pool.fetchrow(
        SWEEP_BATCH,
        CLEANUP_LOCK,
        cutoff,
        one["created_at"],
        one["tenant"],
        one["key"],
        10,
        FINAL_STATUSES,
    )
    assert (two["examined"], two["deleted"]) == (10, 8)

    sweeper, _ = cleanup(pool, batch=10)
    assert await asyncio.wait_for(sweeper.sweep(), timeout=10) == 25 - 8
    assert await keys_of(pool, tenant) == {f"open-{n:02}" for n in range(12)}


async def test_a_replica_finding_the_sweep_taken_leaves_it_to_the_holder(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenant = unique("t")
    await book(ledger, request(tenant, "paid-old"), "paid", PAST_RETENTION)
    sweeper, _ = cleanup(pool)
    async with pool.acquire() as other, other.transaction():
        assert await other.fetchval("SELECT pg_try_advisory_xact_lock($1)", CLEANUP_LOCK)
        assert await sweeper.sweep() == 0
    assert await keys_of(pool, tenant) == {"paid-old"}
    assert await sweeper.sweep() == 1


async def test_a_key_taken_over_while_the_sweep_waits_for_it_stays(
    ledger: Ledger, pool: asyncpg.Pool
) -> None:
    tenant = unique("t")
    await book(ledger, request(tenant, "taken"), "paid", PAST_RETENTION)
    sweeper, _ = cleanup(pool)
    async with pool.acquire() as other:
        async with other.transaction():
            # A booking takes the forgotten key over: its claim rewrites the first use to now.
            await other.execute(
                "UPDATE idempotency_keys SET created_at = now() WHERE tenant = $1", tenant
            )
            sweep = asyncio.create_task(sweeper.sweep())
            await wait_for_lock_wait(pool)
        assert await sweep == 0
    assert await keys_of(pool, tenant) == {"taken"}


async def wait_for_lock_wait(pool: asyncpg.Pool) -> None:
    """Return once some session waits for a row lock."""
    for _ in range(200):
        waiting = await pool.fetchval(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        if waiting:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the sweep never waited for the row")


async def test_seconds_level_windows_expire_and_go_in_real_time(pool: asyncpg.Pool) -> None:
    windows = Windows(replay=timedelta(seconds=1), tombstone=timedelta(seconds=1))
    ledger = Ledger(pool, Books(windows))
    try:
        tenant = unique("t")
        first = await ledger.accept(request(tenant, "short"))
        await pool.execute(
            "UPDATE settlements SET status = 'paid' WHERE id = $1", first.settlement_id
        )
        policy = key_retention(windows.replay, windows.tombstone, timedelta(seconds=2))
        sweeper = KeyCleanup(pool, policy, deleted_keys_counter(CollectorRegistry()), pause=0)
        assert await sweeper.sweep() == 0
        await asyncio.sleep(2.1)
        assert await sweeper.sweep() == 1
        assert await keys_of(pool, tenant) == set()
        assert json.loads((await ledger.accept(request(tenant, "short"))).body)["id"]
    finally:
        await ledger.stop()
