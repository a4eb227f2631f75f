"""Revision 0012 on the real PostgreSQL: the inbox moves into monthly partitions with its
rows, ids, statuses and dedupe keys, its months get the inbox's fill factor and are kept
ahead with the rest of the history, and it comes back into one table."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from services.adapters.postgres.migrate import downgrade, upgrade
from tests.conftest import asyncpg_dsn, scratch_database
from tests.harness import Servers

pytestmark = pytest.mark.integration

INBOX = """
INSERT INTO inbox_events (rail, rail_event_id, event_type, object_id, change_key, payload,
                          status, reason, received_at, next_attempt_at)
VALUES ('stripe', 'evt_1', 'transfer.created', 'tr_1', 'tr_1:transfer.created', '\\x7b7d',
        'applied', NULL, '2025-03-31 23:59:59+00', NULL),
       ('stripe', 'evt_2', 'payout.paid', 'po_2', 'po_2:payout.paid', '\\x7b7d',
        'parked', 'no settlement yet', '2025-04-01 00:00:01+00', '2025-04-01 00:01:00+00'),
       ('stripe', NULL, NULL, NULL, NULL, '\\x00', 'rejected', 'not JSON',
        '2025-04-02 00:00:00+00', NULL)
"""
ROWS = """SELECT tableoid::regclass::text AS part, id, rail_event_id, status
            FROM inbox_events WHERE received_at < '2026-01-01' ORDER BY id"""
ADD = """INSERT INTO inbox_events (rail, rail_event_id, change_key, payload, status)
         VALUES ('stripe', $1, $2, '\\x7b7d', 'received') RETURNING id"""
MISFILED = """INSERT INTO inbox_events (rail, rail_event_id, payload, status, received_at)
              VALUES ('stripe', 'evt_9', '\\x7b7d', 'received', '2025-04-02')"""
# Fill factor of each inbox month, and how many months of the inbox there are.
FILL = """SELECT array_agg(DISTINCT array_to_string(c.reloptions, ',')), count(*)
            FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
           WHERE i.inhparent = 'inbox_events'::regclass"""
STORED = [
    ("inbox_events_y2025m03", 1, "evt_1", "applied"),
    ("inbox_events_y2025m04", 2, "evt_2", "parked"),
    ("inbox_events_y2025m04", 3, None, "rejected"),
]


@pytest.fixture
async def at_0011(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_inbox_months_", migrated=False) as url:
        await asyncio.to_thread(upgrade, url, "0011")
        await fetch(url, INBOX)
        yield url


async def fetch(url: str, query: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return await conn.fetch(query, *args)
    finally:
        await conn.close()


async def rows(url: str) -> list[tuple[str, int, str | None, str]]:
    return [(r["part"], r["id"], r["rail_event_id"], r["status"]) for r in await fetch(url, ROWS)]


async def test_rows_move_into_their_months_keep_their_keys_and_come_back(at_0011: str) -> None:
    await asyncio.to_thread(upgrade, at_0011)
    assert await rows(at_0011) == STORED
    # The identity goes on after the copied ids; a month's keys refuse a second row.
    assert (await fetch(at_0011, ADD, "evt_3", "c3"))[0]["id"] == 4
    for event, change in (("evt_3", "c4"), ("evt_4", "c3")):
        with pytest.raises(asyncpg.UniqueViolationError):
            await fetch(at_0011, ADD, event, change)
    # A row dated in one month and filed under another (this one) is refused.
    with pytest.raises(asyncpg.CheckViolationError, match="inbox_events_received_month"):
        await fetch(at_0011, MISFILED)

    await asyncio.to_thread(downgrade, at_0011, "0011")
    assert await rows(at_0011) == [("inbox_events", *row[1:]) for row in STORED]
    # One table again, whose keys hold across months.
    with pytest.raises(asyncpg.UniqueViolationError):
        await fetch(at_0011, ADD, "evt_4", "tr_1:transfer.created")
    assert (await fetch(at_0011, ADD, "evt_5", "c5"))[0]["id"] > 4

    await asyncio.to_thread(upgrade, at_0011)
    assert await rows(at_0011) == STORED
    assert (await fetch(at_0011, "SELECT count(*) FROM inbox_events"))[0][0] == 5


async def test_its_months_are_kept_ahead_with_the_history_and_room_for_updates(
    at_0011: str,
) -> None:
    await asyncio.to_thread(upgrade, at_0011)
    [(fill, months)] = await fetch(at_0011, FILL)
    # March 2025 to this month and twelve ahead, each with 0008's room for the row's updates.
    now = datetime.now(UTC)
    assert fill == ["fillfactor=50"] and months == (now.year - 2025) * 12 + now.month - 3 + 1 + 12
    [(made,)] = await fetch(at_0011, "SELECT settle_ensure_month_partitions(13)")
    assert made == 4  # the thirteenth month ahead, of each history table, the inbox's too
    [(fill, more)] = await fetch(at_0011, FILL)
    assert (fill, more) == (["fillfactor=50"], months + 1)

    await asyncio.to_thread(downgrade, at_0011, "0011")
    [(made,)] = await fetch(at_0011, "SELECT settle_ensure_month_partitions(14)")
    assert made == 3  # the inbox is one table again; the append-only history is not
    [(options,)] = await fetch(
        at_0011, "SELECT reloptions FROM pg_class WHERE relname = 'inbox_events'"
    )
    assert options == ["fillfactor=50"]
