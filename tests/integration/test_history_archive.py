"""`settle archive` on the real PostgreSQL: whole settled months are detached (their tables
kept, with their rows, for an archiver), audited; a month holding a settlement not in a final
state, an open break or an inbox event still to apply stays attached, and so does every month
after it; so does a month whose events the rail may still redeliver."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime

import asyncpg
import pytest

from services.adapters.postgres.history_months import HISTORY_TABLES
from services.inbox.store import REDELIVERY_HORIZON
from services.operations.archive import plan, refusal
from tests.conftest import asyncpg_dsn, scratch_database
from tests.harness import Servers
from tests.integration.check_support import SETTLE

pytestmark = pytest.mark.integration

MONTHS = ("2020-01-01", "2020-02-01", "2020-03-01")
WEBHOOK = """
INSERT INTO inbox_events (rail, rail_event_id, event_type, payload, status, reason, received_at,
                          received_month)
VALUES ('stripe', $1, 'transfer.created', '\\x7b7d', $2, $3, $4,
        date_trunc('month', $4 AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')
"""


@pytest.fixture
async def history(infra: Servers) -> AsyncIterator[tuple[str, asyncpg.Pool]]:
    """A database with three old months: January settled, February empty, March holding a
    settlement still at the rail."""
    async with scratch_database(infra.database_url, "settle_archive_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=2)
        try:
            for table in HISTORY_TABLES:
                for month in MONTHS:
                    await pool.execute(
                        "SELECT settle_month_partition($1, $2::text::timestamp)", table, month
                    )
            await settle(pool, "paid", datetime(2020, 1, 10, tzinfo=UTC))
            await settle(pool, "submitted", datetime(2020, 3, 5, tzinfo=UTC))
            await pool.execute(
                """INSERT INTO operator_actions (actor, action, target, occurred_at)
                   VALUES ('ops', 'inbox.replay', 'evt_1', '2020-01-15')"""
            )
            await pool.execute(
                WEBHOOK, "evt_jan", "applied", None, datetime(2020, 1, 10, tzinfo=UTC)
            )
            yield url, pool
        finally:
            await pool.close()


async def settle(pool: asyncpg.Pool, status: str, when: datetime) -> uuid.UUID:
    sid, entry, tenant = uuid.uuid4(), uuid.uuid4(), uuid.uuid4().hex[:8]
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute(
            """INSERT INTO settlements (id, tenant, reference, idempotency_key, payee,
                   destination, amount, currency, rail, status, created_at, updated_at)
               VALUES ($1, $2, 'r', 'k', 'p', 'd', 700, 'USD', 'sim', $3, $4, $4)""",
            sid,
            tenant,
            status,
            when,
        )
        await conn.execute(
            """INSERT INTO settlement_transitions (settlement_id, sequence, from_status,
                   to_status, actor, occurred_at)
               VALUES ($1, 1, NULL, 'accepted', 'ledger', $2),
                      ($1, 2, 'accepted', $3, 'relay', $2)""",
            sid,
            when,
            status,
        )
        await conn.execute(
            """INSERT INTO accounts (id, tenant, kind, currency)
               VALUES ($1 || ':funding:USD', $1, 'funding', 'USD'),
                      ($1 || ':payable:USD', $1, 'payable', 'USD')""",
            tenant,
        )
        await conn.execute(
            "INSERT INTO journal_entries VALUES ($1, $2, $3, 'accepted', $4)",
            entry,
            tenant,
            sid,
            when,
        )
        await conn.execute(
            """INSERT INTO postings (entry_id, account_id, amount, currency, occurred_at)
               VALUES ($1, $2 || ':funding:USD', 700, 'USD', $3),
                      ($1, $2 || ':payable:USD', -700, 'USD', $3)""",
            entry,
            tenant,
            when,
        )
    return sid


async def archive(url: str, *args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
    env |= {"SETTLE_DATABASE_URL": url, "SETTLE_KAFKA_BOOTSTRAP": "127.0.0.1:1"}
    process = await asyncio.create_subprocess_exec(
        SETTLE,
        "archive",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return await process.wait(), out.decode(), err.decode()


async def attached(pool: asyncpg.Pool) -> set[str]:
    rows = await pool.fetch(
        """SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent::regclass::text = ANY($1::text[]) AND c.relname LIKE '%y2020m%'""",
        list(HISTORY_TABLES),
    )
    return {r["relname"] for r in rows}


def parts(month: str) -> set[str]:
    return {f"{table}_y{month}" for table in HISTORY_TABLES}


async def test_settled_months_are_detached_and_kept_up_to_an_unfinished_one(
    history: tuple[str, asyncpg.Pool],
) -> None:
    url, pool = history
    status, out, err = await archive(url, "--before", "2020-04", "--dry-run")
    assert status == 1 and "2020-03 refused: 1 settlements not final, 0 open breaks" in err
    assert {line.split()[2] for line in out.splitlines()} == parts("2020m01") | parts("2020m02")
    assert await attached(pool) == parts("2020m01") | parts("2020m02") | parts("2020m03")

    status, out, err = await archive(url, "--before", "2020-04", "--operator", "ops")
    assert status == 1 and "2020-03 refused" in err
    assert {line.split()[1] for line in out.splitlines()} == parts("2020m01") | parts("2020m02")
    assert await attached(pool) == parts("2020m03")
    # Detached, not dropped: the archiver dumps them; the history no longer reads them.
    assert await pool.fetchval("SELECT count(*) FROM postings_y2020m01") == 2
    assert await pool.fetchval("SELECT count(*) FROM settlement_transitions_y2020m01") == 2
    assert await pool.fetchval("SELECT rail_event_id FROM inbox_events_y2020m01") == "evt_jan"
    assert await pool.fetchval("SELECT count(*) FROM inbox_events") == 0
    assert (
        await pool.fetchval("SELECT count(*) FROM postings WHERE occurred_at < '2020-02-01'") == 0
    )
    audit = await pool.fetch(
        "SELECT actor, target FROM operator_actions WHERE action = 'history.archive' ORDER BY id"
    )
    assert [(r["actor"], r["target"]) for r in audit] == [("ops", "2020-01"), ("ops", "2020-02")]


async def test_an_open_break_keeps_its_month_attached_until_closed(
    history: tuple[str, asyncpg.Pool],
) -> None:
    _, pool = history
    march = await pool.fetchval(
        "SELECT settlement_id FROM settlement_transitions WHERE occurred_at >= '2020-03-01'"
    )
    await pool.execute("UPDATE settlements SET status = 'paid' WHERE id = $1", march)
    run = await pool.fetchval(
        """INSERT INTO reconciliation_runs (kind, window_start, window_end, started_at, status)
           VALUES ('intraday', now() - interval '1 hour', now(), now(), 'running') RETURNING id"""
    )
    found = await pool.fetchval(
        """INSERT INTO reconciliation_breaks (break_key, break_type, settlement_id, field,
               expected, actual, reason, first_seen, last_seen, first_run_id, last_run_id)
           VALUES ($1, 'amount_mismatch', $2, 'amount', '700', '500', 'amount:-200', now(),
                   now(), $3, $3) RETURNING id""",
        uuid.uuid4().hex,
        march,
        run,
    )
    async with pool.acquire() as conn:
        refused = (await plan(conn, date(2020, 4, 1))).refused
    assert refused is not None and (refused.unfinished, refused.open_breaks) == (0, 1)
    await pool.execute(
        """UPDATE reconciliation_breaks SET status = 'resolved', resolved_at = now(),
               resolved_by = 'ops', resolution_reason = 'checked' WHERE id = $1""",
        found,
    )
    async with pool.acquire() as conn:
        after = await plan(conn, date(2020, 4, 1))
    assert after.refused is None
    assert [month for month, _ in after.detach] == [date(2020, m, 1) for m in (1, 2, 3)]


async def test_the_current_month_and_later_are_never_archived(
    history: tuple[str, asyncpg.Pool],
) -> None:
    url, pool = history
    now = datetime.now(UTC)
    later = f"{now.year + 1}-{now.month:02d}"
    status, _, err = await archive(url, "--before", later, "--operator", "ops")
    assert status == 2 and "month_not_past" in err
    assert await attached(pool) == parts("2020m01") | parts("2020m02") | parts("2020m03")


async def test_an_inbox_event_still_to_apply_keeps_its_month_attached(
    history: tuple[str, asyncpg.Pool],
) -> None:
    _, pool = history
    await pool.execute(
        WEBHOOK, "evt_feb", "parked", "no settlement yet", datetime(2020, 2, 3, tzinfo=UTC)
    )
    async with pool.acquire() as conn:
        found = await plan(conn, date(2020, 3, 1))
    assert [month for month, _ in found.detach] == [date(2020, 1, 1)]
    assert found.refused is not None
    assert (found.refused.month, found.refused.inbox_open) == (date(2020, 2, 1), 1)
    assert "0 settlements not final, 0 open breaks, 1 inbox events open" in str(found.refused)
    await pool.execute("UPDATE inbox_events SET status = 'dead' WHERE rail_event_id = 'evt_feb'")
    async with pool.acquire() as conn:
        refused = (await plan(conn, date(2020, 3, 1))).refused
    assert refused is not None and refused.inbox_open == 1
    await pool.execute("UPDATE inbox_events SET status = 'applied' WHERE rail_event_id = 'evt_feb'")
    async with pool.acquire() as conn:
        assert (await plan(conn, date(2020, 3, 1))).refused is None


async def test_a_month_the_rail_may_still_redeliver_into_stays_attached(
    history: tuple[str, asyncpg.Pool],
) -> None:
    _, pool = history
    ended = datetime(2020, 2, 1, tzinfo=UTC)
    async with pool.acquire() as conn:
        assert await refusal(conn, date(2020, 1, 1), ended + REDELIVERY_HORIZON) is None
        recent = await refusal(conn, date(2020, 1, 1), ended + REDELIVERY_HORIZON / 2)
    assert recent is not None and recent.redeliverable
    assert str(recent).endswith("0 inbox events open, its events may still be redelivered")
