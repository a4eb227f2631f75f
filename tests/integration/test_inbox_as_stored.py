"""Webhooks applied in the transaction that stores them, on the real PostgreSQL: the mixed
stream ends as the rail reported with each change once; an apply that fails or waits on a
locked settlement still leaves the webhook stored, answered and applied later by the worker;
a process that dies before the commit answers nobody, and the redelivery is applied once."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
import pytest

from services.domain.settlement import SettlementStatus as S
from services.inbox.apply import Outcome, apply_events
from services.inbox.store import StoredEvent
from services.settlement.transitions import TransitionConflict
from tests.conftest import assert_books_balance
from tests.integration.inbox_support import (
    Inbox,
    event_id,
    inbox_rows,
    moves,
    nets,
    pool,
    rail_event,
    settlement,
    status_of,
)
from tests.integration.test_inbox_batches import (
    CASES,
    PAID,
    check_each_change_once,
    deliveries,
    settlements,
)
from tests.integration.test_inbox_webhooks import counter

pytestmark = pytest.mark.integration
__all__ = ["pool"]


async def test_a_large_mixed_stream_is_applied_as_it_is_stored(pool: asyncpg.Pool) -> None:
    groups: list[list[StoredEvent]] = []
    real = apply_events

    async def spy(
        conn: asyncpg.Connection, events: Sequence[StoredEvent], now: datetime, **found: Any
    ) -> list[Outcome]:
        groups.append(list(events))
        return await real(conn, events, now, **found)

    inbox = Inbox(pool, apply=spy)
    made = await settlements(pool)
    posts, again = deliveries(made)
    unknown = [rail_event("transfer.created", f"tr_{uuid.uuid4().hex}", None) for _ in range(5)]
    foreign = [rail_event("transfer.created", f"tr_{uuid.uuid4().hex}", made[n][0]) for n in (1, 7)]
    posts += unknown + foreign

    answers = []
    for start in range(0, len(posts), 64):  # concurrent posts share one transaction
        answers += await asyncio.gather(*(inbox.post(b) for b in posts[start : start + 64]))
    assert [a.status_code for a in answers] == [200] * len(posts)
    assert sum(a.json()["duplicate"] for a in answers) == again
    # Every settlement is where the rail left it once the answers are in: no worker ran.
    for n, (sid, _) in enumerate(made):
        assert await status_of(pool, sid) in CASES[n % 6][3], n
        assert await nets(pool, sid) in (PAID, {})
    assert any(max(Counter(e.object_id for e in group).values()) >= 2 for group in groups), (
        "no group held several events of one settlement"
    )
    assert await inbox.worker.drain() == 0  # nothing left received; the parked are not due
    await check_each_change_once(pool, [inbox.metrics], made)
    await assert_books_balance(pool)


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.DataError("a row the books cannot hold"),
        TransitionConflict("settlement changed under its lock"),
        RuntimeError("a bug in applying"),
    ],
    ids=["refused", "conflict", "bug"],
)
async def test_a_failing_apply_leaves_the_webhook_stored_answered_and_applied_later(
    pool: asyncpg.Pool, error: Exception
) -> None:
    real = apply_events
    failing = [True]

    async def fail_once(
        conn: asyncpg.Connection, events: Sequence[StoredEvent], now: datetime, **found: Any
    ) -> list[Outcome]:
        if failing[0]:
            failing[0] = False
            await real(conn, events, now, **found)  # its writes are rolled back with the failure
            raise error
        return await real(conn, events, now, **found)

    inbox = Inbox(pool, apply=fail_once)
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=f"tr_{uuid.uuid4()}")
    obj = await pool.fetchval(
        "SELECT rail_reference FROM settlements WHERE id = $1", uuid.UUID(sid)
    )
    body = rail_event("transfer.created", obj, sid)
    answer = await inbox.post(body)
    assert answer.status_code == 200 and answer.json()["duplicate"] is False
    [row] = await inbox_rows(pool, event_id(body))
    assert (row["status"], row["attempts"]) == ("received", 0)
    assert await moves(pool, sid) == ["accepted", "dispatching", "submitted"]
    assert counter(inbox, "settle_inbox_left_to_worker_total") == 1
    assert await inbox.worker.drain() == 1
    assert await moves(pool, sid) == ["accepted", "dispatching", "submitted", "paid"]
    [row] = await inbox_rows(pool, event_id(body))
    assert row["status"] == "applied"
    assert counter(inbox, "settle_inbox_applied_total", event_type="transfer.created") == 1


async def test_a_locked_settlement_does_not_hold_the_answer(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    obj = f"tr_{uuid.uuid4().hex}"
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=obj)
    body = rail_event("transfer.created", obj, sid)
    async with pool.acquire() as holder, holder.transaction():
        # Another writer (a relay, a worker's large batch) holds the settlement meanwhile.
        await holder.execute("SELECT 1 FROM settlements WHERE id = $1 FOR UPDATE", uuid.UUID(sid))
        started = time.monotonic()
        async with asyncio.timeout(5):
            answer = await inbox.post(body)
        waited = time.monotonic() - started
    assert answer.status_code == 200 and waited < 2.0
    [row] = await inbox_rows(pool, event_id(body))
    assert row["status"] == "received"
    assert await inbox.worker.drain() == 1
    assert await status_of(pool, sid) == "paid"


async def test_a_process_dying_before_the_commit_answers_nobody_and_the_redelivery_applies(
    pool: asyncpg.Pool,
) -> None:
    real = apply_events
    dying = [True]

    async def die_once(
        conn: asyncpg.Connection, events: Sequence[StoredEvent], now: datetime, **found: Any
    ) -> list[Outcome]:
        outcomes = await real(conn, events, now, **found)
        if dying[0]:
            dying[0] = False
            conn.terminate()  # the session ends with the transaction open, as on SIGKILL
        return outcomes

    inbox = Inbox(pool, apply=die_once)
    obj = f"tr_{uuid.uuid4().hex}"
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=obj)
    body = rail_event("transfer.created", obj, sid)
    first = await inbox.post(body)
    assert first.status_code == 503  # never answered 2xx: the rail delivers it again
    assert await inbox_rows(pool, event_id(body)) == []
    assert await status_of(pool, sid) == "submitted"
    again = await inbox.post(body)
    assert again.status_code == 200 and again.json()["duplicate"] is False
    assert await moves(pool, sid) == ["accepted", "dispatching", "submitted", "paid"]
    [row] = await inbox_rows(pool, event_id(body))
    assert (row["status"], row["attempts"]) == ("applied", 1)
