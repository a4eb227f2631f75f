"""Revision 0014 on the real PostgreSQL: every month of the partitioned inbox, and each month
made later, takes a `mismatch` row only with its reason and both sides; the downgrade refuses
while a mismatch is kept (under the old statuses it could only be replayable `dead`), and
goes back once none is."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from services.adapters.postgres.migrate import downgrade, upgrade
from tests.conftest import asyncpg_dsn, scratch_database
from tests.harness import Servers

pytestmark = pytest.mark.integration

STORE = """
INSERT INTO inbox_events (rail, rail_event_id, payload, status, reason, received_at,
                          received_month, mismatch)
VALUES ('stripe', $1, '\\x7b7d', $2, $3, $4, date_trunc('month', $4 AT TIME ZONE 'UTC')
        AT TIME ZONE 'UTC', $5::jsonb)
"""
SIDES = '[{"field": "amount", "expected": 900, "received": 1}]'
# A month no partition holds yet at the upgrade: made afterwards, as the months ahead are.
LATER = datetime(2031, 5, 6, tzinfo=UTC)


@pytest.fixture
async def fresh_db(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_mismatch_", migrated=False) as url:
        yield url


async def test_mismatch_rows_need_both_sides_in_every_month_and_block_the_downgrade(
    fresh_db: str,
) -> None:
    await asyncio.to_thread(upgrade, fresh_db)
    conn = await asyncpg.connect(asyncpg_dsn(fresh_db))
    try:
        await conn.execute("SELECT settle_month_partition('inbox_events', '2031-05-01')")
        for n, at in enumerate((datetime.now(UTC), LATER)):
            await conn.execute(STORE, f"evt_{n}", "mismatch", "amount differs", at, SIDES)
            for reason, sides in (("no sides", None), ("empty", "[]"), (None, SIDES)):
                with pytest.raises(asyncpg.CheckViolationError):
                    await conn.execute(STORE, f"evt_bad_{n}", "mismatch", reason, at, sides)
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute(STORE, "evt_lost", "lost", "no such status", LATER, None)
    finally:
        await conn.close()

    with pytest.raises(Exception, match="inbox events in mismatch"):
        await asyncio.to_thread(downgrade, fresh_db, "0013")

    conn = await asyncpg.connect(asyncpg_dsn(fresh_db))
    try:
        await conn.execute("DELETE FROM inbox_events")
    finally:
        await conn.close()
    await asyncio.to_thread(downgrade, fresh_db, "0013")  # the revision before 0014
    conn = await asyncpg.connect(asyncpg_dsn(fresh_db))
    try:
        columns = await conn.fetchval(
            "SELECT count(*) FROM information_schema.columns "
            "WHERE table_name = 'inbox_events' AND column_name = 'mismatch'"
        )
        assert columns == 0
    finally:
        await conn.close()
    await asyncio.to_thread(upgrade, fresh_db)
