"""Revision 0010 on the real PostgreSQL: the history moves into monthly partitions with its
rows, ids and guards intact, and back; rows land in their month; the months ahead are kept
created, idempotently and under concurrency; a write into a month with no partition is
refused, never dropped; the hot reads still use their indexes."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from services.adapters.postgres.history_months import HISTORY_TABLES, ensure_months
from services.adapters.postgres.migrate import downgrade, upgrade
from tests.conftest import asyncpg_dsn, scratch_database
from tests.harness import Servers

pytestmark = pytest.mark.integration

SETTLEMENT = uuid.UUID(int=1)
ENTRY = uuid.UUID(int=2)
BOOKED, PAID = "2025-03-31 23:59:59+00", "2025-04-01 00:00:01+00"
HISTORY = f"""
INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination, amount,
                         currency, rail, status, created_at, updated_at)
VALUES ('{SETTLEMENT}', 't', 'r', 'k', 'p', 'acct_1', 700, 'USD', 'sim', 'paid',
        '{BOOKED}', '{PAID}');
INSERT INTO settlement_transitions VALUES
    ('{SETTLEMENT}', 1, NULL, 'accepted', NULL, 'ledger', '{BOOKED}'),
    ('{SETTLEMENT}', 2, 'accepted', 'paid', NULL, 'relay', '{PAID}');
INSERT INTO accounts (id, tenant, kind, currency)
VALUES ('t:funding:USD', 't', 'funding', 'USD'), ('t:payable:USD', 't', 'payable', 'USD');
BEGIN;
INSERT INTO journal_entries VALUES ('{ENTRY}', 't', '{SETTLEMENT}', 'accepted', '{BOOKED}');
INSERT INTO postings (entry_id, account_id, amount, currency)
VALUES ('{ENTRY}', 't:funding:USD', 700, 'USD'), ('{ENTRY}', 't:payable:USD', -700, 'USD');
COMMIT;
INSERT INTO operator_actions (actor, action, target, occurred_at)
VALUES ('ops', 'inbox.replay', 'evt_1', '2024-12-31 23:59:59+00');
"""
WHERE = """SELECT tableoid::regclass::text AS part, * FROM {table} ORDER BY 2, 3"""


@pytest.fixture
async def at_0009(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_months_", migrated=False) as url:
        await asyncio.to_thread(upgrade, url, "0009")
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            await conn.execute(HISTORY)
        finally:
            await conn.close()
        yield url


@pytest.fixture
async def pool(infra: Servers) -> AsyncIterator[asyncpg.Pool]:
    async with scratch_database(infra.database_url, "settle_months_") as url:
        created = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
        try:
            yield created
        finally:
            await created.close()


async def read(url: str, query: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        return await conn.fetch(query)
    finally:
        await conn.close()


async def assert_guarded(url: str) -> None:
    """UPDATE and DELETE refused on every append-only history table; an unbalanced entry
    refused."""
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        appended = {
            "settlement_transitions": "actor",
            "postings": "amount",
            "operator_actions": "actor",
        }
        for table, column in appended.items():
            for change in (f"UPDATE {table} SET {column} = {column}", f"DELETE FROM {table}"):
                with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                    await conn.execute(change)
        with pytest.raises(asyncpg.CheckViolationError, match="does not balance"):
            async with conn.transaction():
                entry = uuid.uuid4()
                await conn.execute(
                    "INSERT INTO journal_entries VALUES ($1, 't', NULL, 'e', now())", entry
                )
                await conn.execute(
                    """INSERT INTO postings (entry_id, account_id, amount, currency)
                       VALUES ($1, 't:funding:USD', 5, 'USD'), ($1, 't:payable:USD', -4, 'USD')""",
                    entry,
                )
    finally:
        await conn.close()


async def test_rows_move_into_their_months_keep_their_guards_and_come_back(at_0009: str) -> None:
    await asyncio.to_thread(upgrade, at_0009)
    transitions = await read(at_0009, WHERE.format(table="settlement_transitions"))
    assert [(r["part"], r["sequence"]) for r in transitions] == [
        ("settlement_transitions_y2025m03", 1),
        ("settlement_transitions_y2025m04", 2),
    ]
    postings = await read(at_0009, "SELECT tableoid::regclass::text AS part, * FROM postings")
    assert sorted((r["id"], r["amount"], r["part"]) for r in postings) == [
        (1, 700, "postings_y2025m03"),
        (2, -700, "postings_y2025m03"),
    ]
    assert {r["occurred_at"] for r in postings} == {datetime(2025, 3, 31, 23, 59, 59, tzinfo=UTC)}
    actions = await read(at_0009, WHERE.format(table="operator_actions"))
    assert [(r["part"], r["id"]) for r in actions] == [("operator_actions_y2024m12", 1)]
    await assert_guarded(at_0009)
    # The identities go on after the copied ids.
    later = await read(
        at_0009,
        "INSERT INTO operator_actions (actor, action, target) VALUES ('o', 'x', 'y') RETURNING id",
    )
    assert later[0]["id"] == 2

    await asyncio.to_thread(downgrade, at_0009, "0009")
    assert await read(at_0009, "SELECT count(*) FROM pg_inherits") == [(0,)]
    back = await read(at_0009, "SELECT id, amount FROM postings ORDER BY id")
    assert [tuple(r) for r in back] == [(1, 700), (2, -700)]
    assert len(await read(at_0009, "SELECT 1 FROM settlement_transitions")) == 2
    assert len(await read(at_0009, "SELECT 1 FROM operator_actions")) == 2
    await assert_guarded(at_0009)

    await asyncio.to_thread(upgrade, at_0009)
    again = await read(at_0009, WHERE.format(table="settlement_transitions"))
    assert [r["part"] for r in again] == [r["part"] for r in transitions]
    await assert_guarded(at_0009)


def next_month_name(table: str) -> str:
    now = datetime.now(UTC)
    year, month = now.year + now.month // 12, now.month % 12 + 1
    return f"{table}_y{year}m{month:02d}"


async def test_a_row_dated_next_month_lands_in_its_partition(pool: asyncpg.Pool) -> None:
    settlement = uuid.uuid4()
    await pool.execute(
        """INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination,
               amount, currency, rail, status, created_at, updated_at)
           VALUES ($1, 't', $2, 'k', 'p', 'd', 5, 'USD', 'sim', 'accepted', now(), now())""",
        settlement,
        str(settlement),
    )
    part = await pool.fetchval(
        """INSERT INTO settlement_transitions (settlement_id, sequence, to_status, actor,
               occurred_at)
           VALUES ($1, 1, 'accepted', 'ledger', date_trunc('month', now()) + interval '40 days')
           RETURNING tableoid::regclass::text""",
        settlement,
    )
    assert part == next_month_name("settlement_transitions")


async def test_months_ahead_are_created_once_however_many_ask(pool: asyncpg.Pool) -> None:
    # The migration made this month and 12 ahead; asking again creates nothing.
    assert await ensure_months(pool) == 0
    # One more month ahead, asked for by four callers at once: made once, for each table.
    created = await asyncio.gather(*(ensure_months(pool, 13) for _ in range(4)))
    assert sorted(created) == [0, 0, 0, len(HISTORY_TABLES)]
    names = await pool.fetch(
        """SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent::regclass::text = ANY($1::text[])""",
        list(HISTORY_TABLES),
    )
    now = datetime.now(UTC)
    first = now.year * 12 + now.month - 1
    ahead = {f"y{m // 12}m{m % 12 + 1:02d}" for m in range(first, first + 14)}
    # This month and 13 ahead, each once per table; none further.
    attached = [r["relname"] for r in names if r["relname"].rsplit("_", 1)[1] >= min(ahead)]
    assert sorted(attached) == sorted(f"{t}_{m}" for t in HISTORY_TABLES for m in ahead)


async def test_a_write_into_a_month_without_a_partition_is_refused(pool: asyncpg.Pool) -> None:
    before = await pool.fetchval("SELECT count(*) FROM operator_actions")
    with pytest.raises(asyncpg.CheckViolationError, match="no partition"):
        await pool.execute(
            """INSERT INTO operator_actions (actor, action, target, occurred_at)
               VALUES ('ops', 'x', 'y', now() + interval '30 years')"""
        )
    assert await pool.fetchval("SELECT count(*) FROM operator_actions") == before


async def test_hot_reads_use_each_months_index_and_a_month_prunes_to_one(
    pool: asyncpg.Pool,
) -> None:
    by_settlement = await plan(
        pool,
        "SELECT * FROM settlement_transitions WHERE settlement_id = $1 ORDER BY sequence",
        uuid.uuid4(),
    )
    by_entry = await plan(pool, "SELECT * FROM postings WHERE entry_id = $1", uuid.uuid4())
    by_account = await plan(
        pool, "SELECT * FROM postings WHERE account_id = $1 ORDER BY id DESC LIMIT 20", "a"
    )
    for found in (by_settlement, by_entry, by_account):
        assert "Seq Scan" not in found and "Index" in found
    one_month = await plan(
        pool,
        """SELECT count(*) FROM postings
            WHERE occurred_at >= date_trunc('month', now()) AND occurred_at < $1""",
        datetime.now(UTC),
    )
    this_month = f"postings_y{datetime.now(UTC):%Y}m{datetime.now(UTC):%m}"
    assert set(re.findall(r"postings_y\d{4}m\d{2}", one_month)) == {this_month}


async def plan(pool: asyncpg.Pool, query: str, *args: object) -> str:
    async with pool.acquire() as conn:
        await conn.execute("SET enable_seqscan = off")  # the tables are empty
        rows = await conn.fetch(f"EXPLAIN (COSTS OFF) {query}", *args)
    return "\n".join(r[0] for r in rows)
