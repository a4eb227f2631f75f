"""Revision 0009 on the real PostgreSQL: an unbalanced journal entry is still refused at
commit however its postings arrive, and a statement booking many balanced entries runs the
balance check once instead of once per posting."""

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

# Entries and all their legs in one statement, as booking and the transition write do.
POST_TOGETHER = """
WITH entries AS (
    INSERT INTO journal_entries (id, tenant, kind, occurred_at)
    SELECT DISTINCT e, $1, 'e', now() FROM unnest($2::uuid[]) AS e
)
INSERT INTO postings (entry_id, account_id, amount, currency)
SELECT l.entry, l.account, l.amount, split_part(l.account, ':', 3)
  FROM unnest($2::uuid[], $3::text[], $4::bigint[]) AS l(entry, account, amount)
"""
OPEN_ENTRY = """INSERT INTO journal_entries (id, tenant, kind, occurred_at)
                VALUES ($1, $2, 'e', now())"""
POST_ONE = """INSERT INTO postings (entry_id, account_id, amount, currency)
              VALUES ($1, $2, $3, 'USD')"""
# The calls this transaction made so far, by function (track_functions = 'pl' counts them).
CALLS = """SELECT funcname, calls FROM pg_stat_xact_user_functions
            WHERE funcname LIKE 'settle_%balanced'"""

Legs = dict[uuid.UUID, list[tuple[str, int]]]


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(asyncpg_dsn(database_url))
    yield conn
    await conn.close()


@pytest.fixture
async def fresh_db(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_bal_", migrated=False) as url:
        yield url


async def open_accounts(db: asyncpg.Connection) -> tuple[str, str, str]:
    """A new tenant with a funding and a payable USD account."""
    tenant = unique("t")
    funding, payable = f"{tenant}:funding:USD", f"{tenant}:payable:USD"
    await db.executemany(
        "INSERT INTO accounts (id, tenant, kind, currency) VALUES ($1, $2, $3, 'USD')",
        [(funding, tenant, "funding"), (payable, tenant, "payable")],
    )
    return tenant, funding, payable


async def post_together(db: asyncpg.Connection, tenant: str, legs: Legs) -> None:
    """Write the entries of `legs` and every one of their postings in one statement."""
    flat = [(entry, account, amount) for entry, lines in legs.items() for account, amount in lines]
    entries, accounts, amounts = (list(column) for column in zip(*flat, strict=True))
    await db.execute(POST_TOGETHER, tenant, entries, accounts, amounts)


def moves(funding: str, payable: str, count: int, amount: int = 100) -> Legs:
    """`count` balanced entries, each moving `amount` from funding to payable."""
    return {uuid.uuid4(): [(funding, -amount), (payable, amount)] for _ in range(count)}


async def test_an_unbalanced_entry_among_many_in_one_statement_is_refused(
    db: asyncpg.Connection,
) -> None:
    tenant, funding, payable = await open_accounts(db)
    legs = moves(funding, payable, 5)
    legs[uuid.uuid4()] = [(funding, -700), (payable, 699)]
    with pytest.raises(asyncpg.CheckViolationError, match="does not balance"):
        async with db.transaction():
            await post_together(db, tenant, legs)
    assert await db.fetchval("SELECT count(*) FROM journal_entries WHERE tenant = $1", tenant) == 0


async def test_an_entry_balancing_only_across_currencies_is_refused(
    db: asyncpg.Connection,
) -> None:
    tenant, funding, _ = await open_accounts(db)
    euros = f"{tenant}:payable:EUR"
    await db.execute(
        "INSERT INTO accounts (id, tenant, kind, currency) VALUES ($1, $2, 'payable', 'EUR')",
        euros,
        tenant,
    )
    with pytest.raises(asyncpg.CheckViolationError, match="does not balance"):
        async with db.transaction():
            await post_together(db, tenant, {uuid.uuid4(): [(funding, -700), (euros, 700)]})


async def test_entries_balancing_only_across_a_statement_are_refused(
    db: asyncpg.Connection,
) -> None:
    # Two entries whose legs sum to zero together, but not each on its own.
    tenant, funding, payable = await open_accounts(db)
    legs = {uuid.uuid4(): [(funding, -700)], uuid.uuid4(): [(payable, 700)]}
    with pytest.raises(asyncpg.CheckViolationError, match="does not balance"):
        async with db.transaction():
            await post_together(db, tenant, legs)


async def test_a_leg_added_later_to_a_committed_entry_is_refused(db: asyncpg.Connection) -> None:
    tenant, funding, payable = await open_accounts(db)
    entry = uuid.uuid4()
    async with db.transaction():
        # Legs one statement at a time: unbalanced in between, balanced at commit.
        await db.execute(OPEN_ENTRY, entry, tenant)
        await db.execute(POST_ONE, entry, funding, -300)
        await db.execute(POST_ONE, entry, payable, 300)
    for _ in range(2):  # the note of the first transaction is gone; each is checked anew
        with pytest.raises(asyncpg.CheckViolationError, match="does not balance"):
            await db.execute(POST_ONE, entry, payable, 1)
    assert await db.fetchval("SELECT sum(amount) FROM postings WHERE entry_id = $1", entry) == 0
    assert await db.fetchval("SELECT count(*) FROM entries_to_balance") == 0


async def _check_calls_for_batch(url: str, entries: int) -> dict[str, int]:
    """Post `entries` balanced entries in one statement; the balance functions' calls,
    deferred checks included."""
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await conn.execute("SET track_functions = 'pl'")
        tenant, funding, payable = await open_accounts(conn)
        async with conn.transaction():
            await post_together(conn, tenant, moves(funding, payable, entries))
            await conn.execute("SET CONSTRAINTS ALL IMMEDIATE")  # run the deferred ones now
            return {r["funcname"]: r["calls"] for r in await conn.fetch(CALLS)}
    finally:
        await conn.close()


async def _refuses_an_unbalanced_entry(url: str) -> bool:
    """Whether a one-legged entry, posted in one statement, is refused."""
    conn = await asyncpg.connect(asyncpg_dsn(url))
    try:
        tenant, funding, _ = await open_accounts(conn)
        async with conn.transaction():
            await post_together(conn, tenant, {uuid.uuid4(): [(funding, 5)]})
        return False
    except asyncpg.CheckViolationError:
        return True
    finally:
        await conn.close()


async def test_a_balanced_batch_is_checked_once_and_downgrade_checks_each_posting(
    fresh_db: str,
) -> None:
    await asyncio.to_thread(upgrade, fresh_db)
    assert await _check_calls_for_batch(fresh_db, 50) == {"settle_statement_entries_balanced": 1}
    assert await _refuses_an_unbalanced_entry(fresh_db)
    await asyncio.to_thread(downgrade, fresh_db, "0008")
    # Before 0009: one lookup of the whole entry per posting, at commit.
    assert await _check_calls_for_batch(fresh_db, 50) == {"settle_entry_balanced": 100}
    assert await _refuses_an_unbalanced_entry(fresh_db)
    await asyncio.to_thread(upgrade, fresh_db)
    assert await _check_calls_for_batch(fresh_db, 50) == {"settle_statement_entries_balanced": 1}
    assert await _refuses_an_unbalanced_entry(fresh_db)
