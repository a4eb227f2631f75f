"""The dispatcher's SQL on the real PostgreSQL against the instruction's state machine: each
event's statement, run on an instruction in every status, changes exactly the statuses the
table names as the event's sources, and leaves them where the table says."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from services.domain.instruction import (
    InstructionEvent,
    InstructionStatus,
    sources_of,
    target_of,
)
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.relay import dispatch_sql as sql
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.test_ledger_books import WINDOWS, request

pytestmark = [pytest.mark.integration, pytest.mark.money]
FENCE = 5
LONG_AGO = datetime(2000, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
async def pool(infra: Servers) -> AsyncIterator[asyncpg.Pool]:
    # A database of its own: pass 2's statement takes every due instruction it can see.
    async with scratch_database(infra.database_url, "settle_guards_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=2)
        yield pool
        await pool.close()


@pytest.fixture(scope="module")
async def one_per_status(pool: asyncpg.Pool) -> dict[InstructionStatus, uuid.UUID]:
    """An instruction in each status, due for pass 2, held under FENCE, last written long ago."""
    results = await Ledger(pool, Books(WINDOWS)).accept_many(
        [request(unique("t"), amount=300) for _ in InstructionStatus]
    )
    sids = [uuid.UUID(json.loads(r.body)["id"]) for r in results]
    for sid, status in zip(sids, InstructionStatus, strict=True):
        await pool.execute(
            "UPDATE rail_instructions SET status = $2, fence = $3, rail_reference = 'tr_' || $1, "
            "lease_until = now() - interval '1 minute', updated_at = $4 "
            "WHERE settlement_id = $1::uuid",
            str(sid),
            str(status),
            FENCE,
            LONG_AGO,
        )
    return dict(zip(InstructionStatus, sids, strict=True))


async def write(conn: asyncpg.Connection, event: InstructionEvent, sids: list[uuid.UUID]) -> None:
    """What the dispatcher runs for `event` on these instructions, each under FENCE."""
    if event is InstructionEvent.CLAIM:
        await conn.fetch(sql.CLAIM_PENDING, sids, 30.0, "w", "sim")
    elif event is InstructionEvent.RECLAIM:
        await conn.fetch(sql.RECLAIM_DUE, 30.0, "w", 0.0, 1_000, False, 86_400.0, 0.0, "sim")
    elif event is InstructionEvent.ACCEPT:
        await conn.fetch(
            sql.RECORD_TRANSFERRED_MANY,
            sids,
            [FENCE] * len(sids),
            [f"tr_new_{sid}" for sid in sids],
        )
    elif event is InstructionEvent.SCHEDULE_RETRY:
        for sid in sids:
            await conn.fetchval(sql.SCHEDULE_RETRY, sid, FENCE, 5.0, "rate_limit", "retryable")
    else:
        for sid in sids:
            await conn.execute(sql.RECORD_FINAL, sid, FENCE, target_of(event), "x", "refused")


@pytest.mark.parametrize("event", list(InstructionEvent))
async def test_each_events_statement_moves_exactly_the_tables_sources(
    pool: asyncpg.Pool,
    one_per_status: dict[InstructionStatus, uuid.UUID],
    event: InstructionEvent,
) -> None:
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            await write(conn, event, list(one_per_status.values()))
            rows = await conn.fetch(
                "SELECT settlement_id, status, updated_at > $2 AS written "
                "FROM rail_instructions WHERE settlement_id = ANY($1::uuid[])",
                list(one_per_status.values()),
                LONG_AGO,
            )
        finally:
            await tx.rollback()
    after = {r["settlement_id"]: (r["written"], r["status"]) for r in rows}
    for status, sid in one_per_status.items():
        if status in sources_of(event):
            assert after[sid] == (True, target_of(event)), (event, status)
        else:
            assert after[sid] == (False, status), (event, status)
