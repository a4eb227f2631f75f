"""Settlement transitions on the real PostgreSQL: guarded, audited, posted by the shared
rules, and published through the outbox in sequence."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import asyncpg
import pytest

from services.contracts import avro
from services.domain.settlement import ReasonRequired
from services.domain.settlement import SettlementStatus as S
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.settlement.transitions import TransitionBatch, apply_transition
from tests.conftest import unique
from tests.integration.test_ledger_books import WINDOWS, request

pytestmark = [pytest.mark.integration, pytest.mark.money]


async def accepted(pool: asyncpg.Pool, amount: int = 900) -> tuple[str, str]:
    ledger = Ledger(pool, Books(WINDOWS))
    tenant = unique("t")
    result = await ledger.accept_many([request(tenant, amount=amount, currency="USD")])
    return tenant, json.loads(result[0].body)["id"]


async def move(pool: asyncpg.Pool, sid: str, target: S, **kw: str) -> object:
    async with pool.acquire() as conn, conn.transaction():
        return await apply_transition(conn, sid, target, actor="test", now=datetime.now(UTC), **kw)


async def nets(pool: asyncpg.Pool, sid: str) -> dict[str, int]:
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            """SELECT p.account_id, sum(p.amount) AS net FROM postings p
               JOIN journal_entries e ON e.id = p.entry_id WHERE e.settlement_id = $1
               GROUP BY p.account_id""",
            sid,
        )
    return {r["account_id"].split(":")[1]: r["net"] for r in rows if r["net"]}


async def test_happy_path_posts_and_publishes_each_step(pool: asyncpg.Pool) -> None:
    _, sid = await accepted(pool, 900)
    for target in (S.DISPATCHING, S.SUBMITTED, S.PAID):
        assert await move(pool, sid, target, rail_reference="tr_1") is not None
    assert await nets(pool, sid) == {"funding": -900, "paid_out": 900}
    async with pool.acquire() as conn:
        history = await conn.fetch(
            "SELECT sequence, to_status FROM settlement_transitions WHERE settlement_id = $1 "
            "ORDER BY sequence",
            sid,
        )
        events = await conn.fetch(
            "SELECT sequence, payload FROM outbox WHERE settlement_id = $1 ORDER BY sequence", sid
        )
        row = await conn.fetchrow(
            "SELECT status, version, rail_reference FROM settlements WHERE id = $1", sid
        )
    assert [(h["sequence"], h["to_status"]) for h in history] == [
        (1, "accepted"),
        (2, "dispatching"),
        (3, "submitted"),
        (4, "paid"),
    ]
    # Every step publishes but the move to dispatching; its number is left out.
    decoded = [avro.decode(e["payload"], "SettlementEvent") for e in events]
    assert [(e["sequence"], e["type"]) for e in decoded] == [
        (1, "created"),
        (3, "submitted"),
        (4, "paid"),
    ]
    assert decoded[-1]["rail_reference"] == "tr_1"
    assert (row["status"], row["version"], row["rail_reference"]) == ("paid", 4, "tr_1")


async def test_illegal_or_repeated_moves_change_nothing(pool: asyncpg.Pool) -> None:
    _, sid = await accepted(pool)
    assert await move(pool, sid, S.PAID) is not None  # confirmation before the rail answered
    assert await move(pool, sid, S.SUBMITTED) is None  # the late API response
    assert await move(pool, sid, S.PAID) is None  # a duplicate webhook
    assert await move(pool, sid, S.FAILED) is None
    assert await nets(pool, sid) == {"funding": -900, "paid_out": 900}


async def test_failure_and_reversal_net_to_zero(pool: asyncpg.Pool) -> None:
    _, failed = await accepted(pool, 300)
    await move(pool, failed, S.DISPATCHING)
    await move(pool, failed, S.SUBMITTED)
    assert await move(pool, failed, S.FAILED, reason="account_closed") is not None
    assert await nets(pool, failed) == {}
    _, reversed_ = await accepted(pool, 400)
    await move(pool, reversed_, S.PAID)
    assert await move(pool, reversed_, S.REVERSED) is not None
    assert await nets(pool, reversed_) == {}
    assert await move(pool, reversed_, S.PAID) is None  # terminal


async def test_needs_review_keeps_money_where_it_was(pool: asyncpg.Pool) -> None:
    _, sid = await accepted(pool, 500)
    await move(pool, sid, S.DISPATCHING)
    await move(pool, sid, S.SUBMITTED)
    assert await move(pool, sid, S.NEEDS_REVIEW, reason="rail unclear") is not None
    assert await nets(pool, sid) == {"funding": -500, "in_transit": 500}
    assert await move(pool, sid, S.FAILED, reason="operator: not paid") is not None
    assert await nets(pool, sid) == {}


async def test_needs_review_without_a_reason_is_refused_and_changes_nothing(
    pool: asyncpg.Pool,
) -> None:
    _, sid = await accepted(pool)
    with pytest.raises(ReasonRequired):
        await move(pool, sid, S.NEEDS_REVIEW)
    with pytest.raises(ReasonRequired):
        await move(pool, sid, S.NEEDS_REVIEW, reason="")
    async with pool.acquire() as conn:
        row = await conn.fetchrow("SELECT status, version FROM settlements WHERE id = $1", sid)
    assert (row["status"], row["version"]) == ("accepted", 1)


async def test_a_rail_reference_is_recorded_once_as_a_step_that_keeps_the_status(
    pool: asyncpg.Pool,
) -> None:
    _, sid = await accepted(pool, 600)
    await move(pool, sid, S.PAID)  # a webhook without the rail's reference
    for reference, recorded in (("tr_first", True), ("tr_second", False)):
        async with pool.acquire() as conn, conn.transaction():
            batch = await TransitionBatch.lock(conn, [uuid.UUID(sid)])
            step = batch.record_rail_reference(uuid.UUID(sid), reference, actor="relay")
            await batch.write(conn, datetime.now(UTC))
        assert (step is not None) == recorded
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            "SELECT status, version, rail_reference FROM settlements WHERE id = $1", sid
        )
        trail = await conn.fetch(
            "SELECT from_status, to_status FROM settlement_transitions WHERE settlement_id = $1 "
            "ORDER BY sequence",
            sid,
        )
        payload = await conn.fetchval(
            "SELECT payload FROM outbox WHERE settlement_id = $1 AND sequence = 3", sid
        )
    assert (row["status"], row["version"], row["rail_reference"]) == ("paid", 3, "tr_first")
    assert [tuple(t) for t in trail][-1] == ("paid", "paid")
    event = avro.decode(payload, "SettlementEvent")
    assert (event["type"], event["status"], event["rail_reference"]) == (
        "rail_reference_recorded",
        "paid",
        "tr_first",
    )
    assert await nets(pool, sid) == {"funding": -600, "paid_out": 600}
