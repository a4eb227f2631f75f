"""Revision 0013 on the real PostgreSQL: an outbox row is indexed by its id, its settlement's
sequence and, until published, the unpublished index, and no longer by its event id; the
downgrade puts the unique event id back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from services.adapters.postgres.migrate import downgrade, upgrade
from tests.conftest import asyncpg_dsn, scratch_database
from tests.harness import Servers

pytestmark = pytest.mark.integration

KEPT = {"outbox_pkey", "outbox_sequence_unique", "outbox_unpublished"}
DROPPED = "outbox_event_id_key"


@pytest.fixture
async def fresh_db(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_outbox_id_", migrated=False) as url:
        yield url


async def _outbox_indexes(url: str) -> set[str]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        rows = await conn.fetch("SELECT indexname FROM pg_indexes WHERE tablename = 'outbox'")
        return {r["indexname"] for r in rows}
    finally:
        await conn.close()


async def test_upgrade_drops_the_event_id_index_and_downgrade_restores_it(fresh_db: str) -> None:
    await asyncio.to_thread(upgrade, fresh_db)
    assert await _outbox_indexes(fresh_db) == KEPT
    await asyncio.to_thread(downgrade, fresh_db, "0012")  # to the revision before 0013
    assert await _outbox_indexes(fresh_db) == KEPT | {DROPPED}
    await asyncio.to_thread(upgrade, fresh_db)
    assert await _outbox_indexes(fresh_db) == KEPT
