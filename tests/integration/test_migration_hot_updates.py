"""Revision 0008 on the real PostgreSQL: a settlement's status move is a heap-only update (no
index entry written), the tables updated in place keep room on their pages, and the
downgrade puts the dropped indexes back."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from services.adapters.postgres.migrate import downgrade, upgrade
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers

pytestmark = pytest.mark.integration

DROPPED = {
    "settlements_tenant_status",
    "outbox_published_at",
    "outbox_unpublished_by_settlement",
    "rail_instructions_rail_reference",
}
FILL_FACTORS = {
    "settlements": "fillfactor=70",
    "rail_instructions": "fillfactor=70",
    "outbox": "fillfactor=50",
    "inbox_events": "fillfactor=50",
    "account_balances": "fillfactor=50",
}
BOOK = """INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination,
              amount, currency, rail, status, created_at, updated_at)
          VALUES ($1, $2, $3, $4, 'payee-1', 'acct_1', 1000, 'USD', 'sim', 'accepted',
                  now(), now())"""
# What the guarded write changes on a move that carries no rail reference.
MOVE = """UPDATE settlements SET status = $2, version = version + 1, updated_at = now()
           WHERE id = $1"""
HOT_SO_FAR = "SELECT pg_stat_get_xact_tuples_hot_updated('settlements'::regclass)"


@pytest.fixture
async def fresh_db(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_hot_", migrated=False) as url:
        yield url


async def _moves_made_heap_only(url: str) -> int:
    """Book a settlement, move it twice in one transaction; how many moves were HOT."""
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        sid = uuid.uuid4()
        await conn.execute(BOOK, sid, unique("t"), unique("ref-"), unique("key-"))
        async with conn.transaction():
            await conn.execute(MOVE, sid, "dispatching")
            await conn.execute(MOVE, sid, "submitted")
            return int(await conn.fetchval(HOT_SO_FAR))
    finally:
        await conn.close()


async def _schema(url: str) -> tuple[set[str], dict[str, str]]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        indexes = {r["indexname"] for r in await conn.fetch("SELECT indexname FROM pg_indexes")}
        # A table partitioned by month (the inbox, 0012) holds no options: its months do.
        options = await conn.fetch(
            """SELECT c.relname, coalesce(array_to_string(c.reloptions, ','),
                          (SELECT string_agg(DISTINCT array_to_string(p.reloptions, ','), ';')
                             FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid
                            WHERE i.inhparent = c.oid)) AS o
                 FROM pg_class c WHERE c.relname = ANY($1::text[])""",
            list(FILL_FACTORS),
        )
        return indexes, {r["relname"]: r["o"] or "" for r in options}
    finally:
        await conn.close()


async def test_a_status_move_writes_no_index_entry(fresh_db: str) -> None:
    await asyncio.to_thread(upgrade, fresh_db)
    assert await _moves_made_heap_only(fresh_db) == 2


async def test_upgrade_sets_room_and_drops_unread_indexes_and_downgrade_restores(
    fresh_db: str,
) -> None:
    await asyncio.to_thread(upgrade, fresh_db)
    indexes, options = await _schema(fresh_db)
    assert not DROPPED & indexes
    assert options == FILL_FACTORS
    await asyncio.to_thread(downgrade, fresh_db, "0007")
    indexes, options = await _schema(fresh_db)
    assert indexes >= DROPPED
    assert set(options.values()) == {""}
    # Before 0008 every status change also rewrote the (tenant, status) index entry.
    assert await _moves_made_heap_only(fresh_db) == 0
    await asyncio.to_thread(upgrade, fresh_db)
    indexes, options = await _schema(fresh_db)
    assert not DROPPED & indexes
    assert options == FILL_FACTORS
