"""A bench database pre-filled with history on the real PostgreSQL: every table a settlement
touches holds its rows, the books balance as `settle check` reads them, and the rows kept
only for a while (keys, webhooks) are there in the shares the services leave, and the outbox
is empty."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from services.ledger.key_retention import DEFAULT_RETENTION
from tests.conftest import assert_books_balance, asyncpg_dsn, scratch_database
from tests.harness import Servers
from tools.bench.prefill import KEYS_KEPT, Filled, prefill
from tools.bench.prefill_history import MIX_PER_100, history_steps
from tools.check.database import read_ledger_wide, read_page, snapshot
from tools.check.invariants import books_balance, nothing_lost, webhooks_once

pytestmark = pytest.mark.integration
TENANT, COUNT, BATCH = "history1", 2_000, 700  # three batches, the last one short
# Short enough that most settlements fall in the key window.
HISTORY = timedelta(days=4)


@pytest.fixture
async def filled(infra: Servers) -> AsyncIterator[tuple[asyncpg.Pool, Filled]]:
    async with scratch_database(infra.database_url, "settle_prefill_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=2, max_size=2)
        try:
            done: list[int] = []
            async with pool.acquire() as one, pool.acquire() as other:
                result = await prefill(
                    [one, other],
                    TENANT,
                    COUNT,
                    batch=BATCH,
                    history=HISTORY,
                    progress=lambda n, total, s: done.append(n),
                )
            # Two connections share the three batches; the count only ever grows.
            assert len(done) == 3 and done == sorted(done) and done[-1] == COUNT
            yield pool, result
        finally:
            await pool.close()


def expected_rows() -> dict[str, int]:
    """Rows per table that COUNT settlements in the `MIX_PER_100` shares must leave."""
    per_final = {status.value: COUNT * share // 100 for status, share in MIX_PER_100.items()}
    steps = history_steps(TENANT, "USD")
    entries = sum(per_final[s.final] for s in steps if s.entry_kind)
    return {
        "settlements": COUNT,
        "settlement_transitions": sum(per_final[s.final] for s in steps),
        "journal_entries": entries,
        "postings": 2 * entries,
        "rail_instructions": COUNT,
        "inbox_events": sum(per_final[s.final] for s in steps if s.webhook),
    }


async def test_every_table_holds_the_history_and_the_books_balance(
    filled: tuple[asyncpg.Pool, Filled],
) -> None:
    pool, result = filled
    assert result.settlements == COUNT and result.database_bytes > 0 and result.seconds > 0
    for table, rows in expected_rows().items():
        assert await pool.fetchval(f"SELECT count(*) FROM {table}") == rows, table
    statuses = dict(await pool.fetch("SELECT status, count(*) FROM settlements GROUP BY 1"))
    assert statuses == {s.value: COUNT * share // 100 for s, share in MIX_PER_100.items()}
    assert await pool.fetchval("SELECT count(DISTINCT tenant) FROM settlements") == 1
    assert await pool.fetchval("SELECT count(*) FROM entries_to_balance") == 0
    await assert_books_balance(pool)
    # What `settle check` reads from the database holds on the history as on a live run's.
    async with pool.acquire() as conn, snapshot(conn):
        ledger_wide = await read_ledger_wide(conn, outbox_bound_s=60, inbox_bound_s=60)
        _, facts = await read_page(conn, ledger_wide, None, page_size=COUNT + 1)  # one page
    assert len(facts.settlements) == COUNT
    for check in (books_balance, nothing_lost, webhooks_once):
        verdict = check(facts)
        assert verdict.ok, verdict


async def test_keys_outbox_and_webhooks_are_kept_as_the_services_keep_them(
    filled: tuple[asyncpg.Pool, Filled],
) -> None:
    pool, _ = filled
    now = datetime.now(UTC)
    keys = await pool.fetch("SELECT created_at, settlement_id FROM idempotency_keys")
    assert 0 < len(keys) < COUNT
    assert all(now - k["created_at"] < KEYS_KEPT + timedelta(minutes=5) for k in keys)
    # Some past the ledger's retention, so key cleanup has work; most still replayable.
    past = [k for k in keys if now - k["created_at"] > DEFAULT_RETENTION]
    assert 0 < len(past) < len(keys) / 2
    unknown = await pool.fetchval(
        "SELECT count(*) FROM idempotency_keys k LEFT JOIN settlements s "
        "ON s.id = k.settlement_id AND s.idempotency_key = k.key WHERE s.id IS NULL"
    )
    assert unknown == 0
    # Publishing an event deletes its row: finished history leaves none in the outbox.
    assert await pool.fetchval("SELECT count(*) FROM outbox") == 0
    instructions = dict(
        await pool.fetch("SELECT status, count(*) FROM rail_instructions GROUP BY 1")
    )
    assert instructions == {"transferred": COUNT * 95 // 100, "failed": COUNT * 5 // 100}
    applied = await pool.fetchval("SELECT count(*) FROM inbox_events WHERE status = 'applied'")
    assert applied == expected_rows()["inbox_events"]
