"""The inbox partitioned by month (migration 0012) on the real PostgreSQL: a redelivery or a
twin is recognised in its own month by the unique keys and in a later month, within the
rail's redelivery horizon (or, near the turn, stamped by a clock behind in the month before),
by the same INSERT; the answer to the rail is the same either way; a duplicate stored by a
race across the turn of a month still moves its settlement once; and a webhook received in a
month without a partition is refused for the rail to send again."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from services.domain.rail_event import InboxStatus
from services.domain.settlement import SettlementStatus as S
from services.inbox.errors import ClaimedEventChanged
from services.inbox.events import parse_event
from services.inbox.intake import Arrival, insert_events, stored_event
from services.inbox.store import Recorded, record_many
from tests.integration.inbox_support import (
    Inbox,
    event_id,
    inbox_rows,
    moves,
    nets,
    pool,
    rail_event,
    settlement,
)

pytestmark = pytest.mark.integration
__all__ = ["pool"]

LAST_SECOND_OF_MARCH = datetime(2026, 3, 31, 23, 59, 59, 500000, tzinfo=UTC)
FIRST_SECOND_OF_APRIL = datetime(2026, 4, 1, 0, 0, 0, 500000, tzinfo=UTC)
PARTITION = "SELECT tableoid::regclass::text FROM inbox_events WHERE rail_event_id = $1"


async def paid_once(pool: asyncpg.Pool, sid: str) -> None:
    """The settlement moved to paid exactly once, its payout booked once."""
    assert await moves(pool, sid) == ["accepted", "dispatching", "submitted", "paid"]
    assert await nets(pool, sid) == {"funding": -900, "paid_out": 900}


async def test_a_redelivery_in_the_same_month_and_the_next_is_a_duplicate(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference="tr_month1")
    body = rail_event("transfer.created", "tr_month1", sid)
    inbox.clock.at = LAST_SECOND_OF_MARCH
    first, again = await inbox.post(body), await inbox.post(body)
    inbox.clock.at = FIRST_SECOND_OF_APRIL
    next_month = await inbox.post(body)
    answers = [(r.status_code, r.json()["duplicate"]) for r in (first, again, next_month)]
    assert answers == [(200, False), (200, True), (200, True)]
    assert len(await inbox_rows(pool, event_id(body))) == 1
    assert await pool.fetchval(PARTITION, event_id(body)) == "inbox_events_y2026m03"
    await paid_once(pool, sid)


async def test_a_twin_across_the_turn_of_a_month_is_a_duplicate(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference="tr_month2")
    body, twin = (rail_event("transfer.created", "tr_month2", sid) for _ in range(2))
    inbox.clock.at = LAST_SECOND_OF_MARCH
    assert (await inbox.post(body)).json()["duplicate"] is False
    inbox.clock.at = FIRST_SECOND_OF_APRIL
    assert (await inbox.post(twin)).json()["duplicate"] is True
    assert await inbox_rows(pool, event_id(twin)) == []
    await paid_once(pool, sid)


async def test_a_redelivery_stamped_by_a_clock_behind_into_the_month_before_is_a_duplicate(
    pool: asyncpg.Pool,
) -> None:
    """The original is stored just after the turn by one replica; another, whose clock is a
    second behind, stamps the redelivery in the month before."""
    inbox = Inbox(pool)
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference="tr_month6")
    body = rail_event("transfer.created", "tr_month6", sid)
    inbox.clock.at = FIRST_SECOND_OF_APRIL
    assert (await inbox.post(body)).json()["duplicate"] is False
    inbox.clock.at = LAST_SECOND_OF_MARCH
    assert (await inbox.post(body)).json()["duplicate"] is True
    assert await pool.fetchval(PARTITION, event_id(body)) == "inbox_events_y2026m04"
    await paid_once(pool, sid)


async def test_a_redelivery_a_horizon_later_two_months_on_is_a_duplicate(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference="tr_month3")
    body = rail_event("transfer.created", "tr_month3", sid)
    inbox.clock.at = datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert (await inbox.post(body)).json()["duplicate"] is False
    # Stripe sends an event again for as long as it keeps it: 30 days, here into March.
    inbox.clock.at += timedelta(days=30)
    assert inbox.clock.at.month == 3
    assert (await inbox.post(body)).json()["duplicate"] is True
    assert len(await inbox_rows(pool, event_id(body))) == 1
    await paid_once(pool, sid)


async def test_a_duplicate_stored_by_a_race_across_months_moves_its_settlement_once(
    pool: asyncpg.Pool,
) -> None:
    """Two deliveries of one event in flight together at the turn of a month: neither
    statement sees the other's row, and the months' keys differ, so both are stored. The
    apply is a guarded transition on the settlement's row: the second finds it paid."""
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference="tr_month4")
    body = rail_event("transfer.created", "tr_month4", sid)
    event = parse_event(body)
    original, redelivery = [await pool.acquire() for _ in range(2)]
    try:
        async with original.transaction():
            assert await insert_events(original, [Arrival(event, body, LAST_SECOND_OF_MARCH)])
            async with redelivery.transaction():
                stored = await insert_events(
                    redelivery, [Arrival(event, body, FIRST_SECOND_OF_APRIL)]
                )
                assert list(stored) == [event.event_id]
    finally:
        await asyncio.gather(*(pool.release(c) for c in (original, redelivery)))
    inbox = Inbox(pool, as_stored=False)
    inbox.clock.at = FIRST_SECOND_OF_APRIL
    await inbox.worker.drain()
    rows = sorted(await inbox_rows(pool, event.event_id), key=lambda r: r["received_at"])
    assert [r["status"] for r in rows] == ["applied", "applied"]
    assert rows[0]["reason"] is None
    assert rows[1]["reason"] == "settlement already paid; nothing to change"
    assert {r["settlement_id"] for r in rows} == {uuid.UUID(sid)}
    await paid_once(pool, sid)


async def test_a_webhook_received_in_a_month_without_a_partition_is_refused_for_a_retry(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    body = rail_event("transfer.created", "tr_month5", None)
    inbox.clock.at = datetime(2040, 1, 15, tzinfo=UTC)  # years past the months made ahead
    response = await inbox.post(body)
    assert response.status_code == 503  # the rail delivers it again
    assert await inbox_rows(pool, event_id(body)) == []


async def test_outcomes_of_rows_received_in_two_months_are_recorded_in_each_month(
    pool: asyncpg.Pool,
) -> None:
    arrivals = []
    for n, at in enumerate((LAST_SECOND_OF_MARCH, FIRST_SECOND_OF_APRIL)):
        sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=f"tr_rec{n}")
        body = rail_event("transfer.created", f"tr_rec{n}", sid)
        arrivals.append(Arrival(parse_event(body), body, at))
    async with pool.acquire() as conn, conn.transaction():
        ids = await insert_events(conn, arrivals)
        claimed = [stored_event(a, ids[a.event.event_id]) for a in arrivals]
        parked = [
            Recorded(e, InboxStatus.PARKED, "held", None, FIRST_SECOND_OF_APRIL) for e in claimed
        ]
        await record_many(conn, parked, FIRST_SECOND_OF_APRIL)
        # Recorded again as if still received: the guard finds neither row so.
        with pytest.raises(ClaimedEventChanged):
            await record_many(conn, parked, FIRST_SECOND_OF_APRIL)
    rows = await pool.fetch(
        "SELECT tableoid::regclass::text AS month, status, attempts FROM inbox_events"
        " WHERE rail_event_id = ANY($1::text[]) ORDER BY received_at",
        [a.event.event_id for a in arrivals],
    )
    assert [tuple(r) for r in rows] == [
        ("inbox_events_y2026m03", "parked", 1),
        ("inbox_events_y2026m04", "parked", 1),
    ]
