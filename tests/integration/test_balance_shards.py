"""Writers moving money on the same accounts at once do not wait on each other's balance row
while the account has a free shard, and every delta still lands exactly once."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import asyncpg
import pytest

from services.domain.balance_shards import BALANCE_SHARDS
from services.domain.settlement import SettlementStatus as S
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.model import Outcome
from services.settlement.transitions import TransitionBatch
from tests.conftest import unique
from tests.integration.test_ledger_books import WINDOWS, request

pytestmark = pytest.mark.integration

# Far below any real wait: a writer that queues on a held row fails instead.
NO_WAIT = "200ms"


async def book(pool: asyncpg.Pool, tenant: str, *amounts: int) -> list[uuid.UUID]:
    ledger = Ledger(pool, Books(WINDOWS))
    results = await ledger.accept_many([request(tenant, amount=a, currency="USD") for a in amounts])
    assert all(r.outcome is Outcome.CREATED for r in results)
    return [uuid.UUID(json.loads(r.body)["id"]) for r in results]


async def shard_balances(pool: asyncpg.Pool, tenant: str) -> dict[tuple[str, int], int]:
    async with pool.acquire() as db:
        rows = await db.fetch(
            "SELECT account_id, shard, balance FROM account_balances "
            "WHERE account_id LIKE $1 AND balance <> 0",
            f"{tenant}:%",
        )
    return {(r["account_id"].split(":")[1], r["shard"]): r["balance"] for r in rows}


async def test_two_batches_on_the_same_accounts_do_not_wait_on_each_other(
    pool: asyncpg.Pool,
) -> None:
    tenant = unique("t")
    first, second = await book(pool, tenant, 300, 40)
    now = datetime.now(UTC)
    async with pool.acquire() as a, pool.acquire() as b:
        held, waiting = a.transaction(), b.transaction()
        await held.start()
        await waiting.start()
        try:
            await b.execute(f"SET LOCAL lock_timeout = '{NO_WAIT}'")
            for conn, sid in ((a, first), (b, second)):
                batch = await TransitionBatch.lock(conn, [sid])
                for target in (S.DISPATCHING, S.SUBMITTED):
                    assert batch.move(sid, target, actor="test", rail_reference=f"tr_{sid}")
                assert batch.rows(now).deltas, "the step must move money to prove anything"
                # Both prefer shard 0: the second must take another shard, not queue.
                await batch.write(conn, now, shard=0)
        except BaseException:
            await waiting.rollback()
            await held.rollback()
            raise
        await waiting.commit()
        await held.commit()
    balances = await shard_balances(pool, tenant)
    in_transit = [v for (kind, _), v in balances.items() if kind == "in_transit"]
    assert sorted(in_transit) == [40, 300]  # each batch on a shard of its own
    async with pool.acquire() as db:
        total = await db.fetchval(
            "SELECT sum(balance) FROM account_balances WHERE account_id = $1",
            f"{tenant}:in_transit:USD",
        )
    assert total == 340


async def test_booking_takes_the_free_shard_when_the_others_are_held(pool: asyncpg.Pool) -> None:
    tenant = unique("t")
    await book(pool, tenant, 1)  # opens the tenant's accounts
    free = BALANCE_SHARDS - 1
    opened = await shard_balances(pool, tenant)  # the opening 1 may sit on any shard, `free` too
    async with pool.acquire() as holder, holder.transaction():
        await holder.fetch(
            "SELECT 1 FROM account_balances WHERE account_id LIKE $1 AND shard <> $2 FOR UPDATE",
            f"{tenant}:%",
            free,
        )
        # Two batches in turn: a fixed rotation could not land both on the one free shard.
        await book(pool, tenant, 20)
        await book(pool, tenant, 300)
    balances = await shard_balances(pool, tenant)
    assert balances[("payable", free)] - opened.get(("payable", free), 0) == 320
    assert sum(v for (kind, _), v in balances.items() if kind == "payable") == 321
