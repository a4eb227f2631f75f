"""Applying rail events on the real PostgreSQL: early, reordered, late and unknown events end
in the state the rail last reported, with each posting rule booked once."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.faults import Faults
from railsim.params import Kind
from services.domain.settlement import SettlementStatus as S
from services.settlement.transitions import apply_transition
from tests.integration.inbox_support import (
    T0,
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

pytestmark = [pytest.mark.integration, pytest.mark.money]
__all__ = ["pool"]
PAID = {"funding": -900, "paid_out": 900}


def ref(prefix: str = "tr") -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


async def test_webhook_before_the_api_response_is_matched_by_metadata(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    sid, tr = await settlement(pool, S.DISPATCHING), ref()
    await inbox.deliver(rail_event("transfer.created", tr, sid))
    assert await status_of(pool, sid) == "paid"
    assert (
        await pool.fetchval("SELECT rail_reference FROM settlements WHERE id = $1", uuid.UUID(sid))
        == tr
    )
    # The relay records the rail's answer afterwards: too late to move it, and harmless.
    async with pool.acquire() as conn, conn.transaction():
        late = await apply_transition(
            conn, sid, S.SUBMITTED, actor="relay", now=T0, rail_reference=tr
        )
    assert late is None
    assert await nets(pool, sid) == PAID


async def test_reversal_before_created_steps_through_paid_to_reversed(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    tr = ref()
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=tr)
    await inbox.deliver(rail_event("transfer.reversed", tr, sid))
    assert await moves(pool, sid) == ["accepted", "dispatching", "submitted", "paid", "reversed"]
    await inbox.deliver(rail_event("transfer.created", tr, sid))
    assert await status_of(pool, sid) == "reversed" and await nets(pool, sid) == {}
    entries = await pool.fetch(
        "SELECT kind FROM journal_entries WHERE settlement_id = $1", uuid.UUID(sid)
    )
    assert sorted(e["kind"] for e in entries) == ["accepted", "paid", "reversed", "submitted"]


async def test_payout_failure_after_paid_reverses_the_postings(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    po = ref("po")
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=po)
    await inbox.deliver(rail_event("payout.paid", po, sid))
    assert await nets(pool, sid) == PAID
    await inbox.deliver(rail_event("payout.failed", po, sid))
    assert await status_of(pool, sid) == "reversed" and await nets(pool, sid) == {}


async def test_payout_failed_then_a_late_paid_stays_failed(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    po = ref("po")
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=po)
    await inbox.deliver(rail_event("payout.failed", po, sid), rail_event("payout.paid", po, sid))
    assert await moves(pool, sid) == ["accepted", "dispatching", "submitted", "failed"]
    assert await nets(pool, sid) == {}


async def test_reversal_days_later_is_applied_on_the_day_it_came(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    tr = ref()
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=tr)
    await inbox.deliver(rail_event("transfer.created", tr, sid))
    inbox.clock.advance(days=4)
    await inbox.deliver(rail_event("transfer.reversed", tr, sid))
    when = await pool.fetchval(
        "SELECT occurred_at FROM settlement_transitions WHERE settlement_id = $1 AND "
        "to_status = 'reversed'",
        uuid.UUID(sid),
    )
    assert when == T0 + timedelta(days=4)
    assert await nets(pool, sid) == {}


async def test_unknown_settlement_is_parked_then_applied_once_it_appears(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool, attempts=5)
    tr = ref()
    body = rail_event("transfer.created", tr, None)
    await inbox.deliver(body)
    [row] = await inbox_rows(pool, event_id(body))
    assert row["status"] == "parked" and row["attempts"] == 1 and "no settlement" in row["reason"]
    assert row["next_attempt_at"] > T0
    await inbox.worker.drain()  # not due yet: nothing happens
    assert (await inbox_rows(pool, event_id(body)))[0]["attempts"] == 1
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=tr)
    inbox.clock.advance(seconds=2)
    await inbox.worker.drain()
    [row] = await inbox_rows(pool, event_id(body))
    assert row["status"] == "applied" and row["settlement_id"] == uuid.UUID(sid)
    assert await status_of(pool, sid) == "paid"


async def test_an_event_nobody_claims_is_dead_after_its_budget_with_the_reason(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool, attempts=3)
    body = rail_event("payout.paid", ref("po"), str(uuid.uuid4()))
    await inbox.deliver(body)
    for _ in range(5):
        inbox.clock.advance(minutes=2)
        await inbox.worker.drain()
    [row] = await inbox_rows(pool, event_id(body))
    assert row["status"] == "dead" and row["attempts"] == 3
    assert "given up after 3 attempts" in row["reason"]
    assert inbox.metrics.registry.get_sample_value("settle_inbox_dead_total") == 1


async def test_an_event_for_another_object_of_the_settlement_is_a_mismatch_not_booked(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    sent_as = ref()
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=sent_as)
    other = ref()
    body = rail_event("transfer.created", other, sid)
    await inbox.deliver(body)
    [row] = await inbox_rows(pool, event_id(body))
    assert row["status"] == "mismatch"
    assert json.loads(row["mismatch"]) == [
        {"field": "object", "expected": sent_as, "received": other}
    ]
    assert await status_of(pool, sid) == "submitted"


async def test_simulator_events_with_twins_duplicates_and_a_reversal(pool: asyncpg.Pool) -> None:
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(webhook_twin=1.0, webhook_duplicate=1.0))
    inbox = Inbox(pool)
    sid = await settlement(pool, S.DISPATCHING, destination="acct_reverse_1")
    reply = sim.create(
        Kind.TRANSFER,
        [
            ("amount", "900"),
            ("currency", "usd"),
            ("destination", "acct_reverse_1"),
            ("metadata[settlement_id]", sid),
        ],
        idempotency_key=uuid.uuid4().hex,
    )
    clock.advance(10)
    deliveries = [*reply.webhooks, *sim.take_webhooks()]
    assert [d.event_type for d in deliveries].count("transfer.reversed") == 3
    for delivery in reversed(deliveries):  # the reversal first
        assert (await inbox.post(delivery.payload)).status_code == 200
    await inbox.worker.drain()
    assert await status_of(pool, sid) == "reversed" and await nets(pool, sid) == {}
    assert (await moves(pool, sid)).count("paid") == 1


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from(
        [
            ("transfer.created",),
            ("transfer.created", "transfer.reversed"),
            ("payout.created", "payout.paid"),
            ("payout.created", "payout.failed"),
        ]
    ),
    st.data(),
)
async def test_any_order_and_duplication_ends_the_same_on_postgres(
    pool: asyncpg.Pool, history: tuple[str, ...], data: st.DataObject
) -> None:
    inbox = Inbox(pool)
    obj = ref("po" if history[0].startswith("payout") else "tr")
    early = data.draw(st.booleans(), "webhooks before the relay's record")
    path = (S.DISPATCHING,) if early else (S.DISPATCHING, S.SUBMITTED)
    sid = await settlement(pool, *path, rail_reference=None if early else obj)
    bodies = {t: rail_event(t, obj, sid) for t in history}
    order = data.draw(st.permutations([t for t in history for _ in range(2)]), "deliveries")
    await inbox.deliver(*(bodies[t] for t in order))
    final = {"transfer.reversed": "reversed", "payout.failed": "failed"}.get(history[-1], "paid")
    assert await status_of(pool, sid) == final
    assert await nets(pool, sid) == ({} if final != "paid" else PAID)
