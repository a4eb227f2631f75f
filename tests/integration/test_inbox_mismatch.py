"""Webhooks that do not match what was sent, on the real PostgreSQL through the inbox's HTTP
app: a correctly signed event whose amount, currency, destination or account differs from its
settlement is stored, set aside as `mismatch` with both sides and never applied, whichever
path applies it; the rail's own event for the same change is applied as before; an operator
lists mismatches and cannot replay one."""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
import pytest

from services.domain.settlement import SettlementStatus as S
from services.inbox.kept_body import received
from services.settlement.transitions import apply_transition
from tests.integration.inbox_support import (
    DESTINATION,
    OPERATOR_TOKEN,
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

pytestmark = pytest.mark.integration
__all__ = ["pool"]
AUTH = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}

# Each way a signed event can differ from its settlement (900 USD to DESTINATION, sent from
# the platform's own account): what the body carries, and the difference recorded.
DIFFERING: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "amount": ({"amount": 90_000}, {"expected": 900, "received": 90_000}),
    "currency": ({"currency": "eur"}, {"expected": "USD", "received": "eur"}),
    "destination": (
        {"destination": "acct_thief"},
        {"expected": DESTINATION, "received": "acct_thief"},
    ),
    "account": ({"account": DESTINATION}, {"expected": None, "received": DESTINATION}),
}


def ref(prefix: str = "tr") -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def mismatched(inbox: Inbox) -> float:
    value = inbox.metrics.registry.get_sample_value("settle_inbox_mismatched_total")
    return value or 0.0


@pytest.mark.parametrize("as_stored", [True, False], ids=["as_stored", "by_worker"])
@pytest.mark.parametrize("field", DIFFERING)
async def test_a_signed_webhook_that_differs_is_kept_as_mismatch_and_the_rails_own_applies(
    pool: asyncpg.Pool, field: str, as_stored: bool
) -> None:
    inbox = Inbox(pool, as_stored=as_stored)
    tr = ref()
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=tr)
    before = (await moves(pool, sid), await nets(pool, sid))
    carried, sides = DIFFERING[field]
    forged = rail_event("transfer.created", tr, sid, **carried)

    await inbox.deliver(forged)

    [row] = await inbox_rows(pool, event_id(forged))
    assert row["status"] == "mismatch" and received(row["payload"]) == forged
    assert json.loads(row["mismatch"]) == [{"field": field, **sides}]
    assert "does not match what was sent" in row["reason"] and row["applied_at"] is None
    assert (await status_of(pool, sid), await moves(pool, sid), await nets(pool, sid)) == (
        "submitted",
        *before,
    )
    assert mismatched(inbox) == 1
    # Nothing comes back due: a mismatch is final.
    inbox.clock.advance(hours=1)
    assert await inbox.worker.drain() == 0

    # The rail's own event for that change still gets in and is applied as before, once.
    genuine = rail_event("transfer.created", tr, sid)
    assert await answer(inbox, genuine) == (200, False)
    await inbox.worker.drain()
    [applied] = await inbox_rows(pool, event_id(genuine))
    assert applied["status"] == "applied" and applied["mismatch"] is None
    assert await status_of(pool, sid) == "paid"
    assert (await moves(pool, sid)).count("paid") == 1
    assert await answer(inbox, genuine) == (200, True)
    assert await answer(inbox, rail_event("transfer.created", tr, sid)) == (200, True)
    assert (await moves(pool, sid)).count("paid") == 1


async def answer(inbox: Inbox, body: bytes) -> tuple[int, bool | str]:
    """A webhook's status and whether it was a duplicate (else its error code)."""
    got = await inbox.post(body)
    data = got.json()
    return got.status_code, data["duplicate"] if got.status_code == 200 else data["error"]["code"]


async def record_reference(pool: asyncpg.Pool, sid: str, reference: str) -> None:
    """The relay records the rail's answer: the settlement is submitted as `reference`."""
    async with pool.acquire() as conn, conn.transaction():
        moved = await apply_transition(
            conn, sid, S.SUBMITTED, actor="relay", now=T0, rail_reference=reference
        )
    assert moved is not None


@pytest.mark.parametrize("as_stored", [True, False], ids=["as_stored", "by_worker"])
async def test_a_parked_wrong_event_does_not_make_the_rails_own_a_duplicate(
    pool: asyncpg.Pool, as_stored: bool
) -> None:
    """A signed event for the transfer's id, with the wrong amount and no settlement in its
    metadata, comes before the relay records the transfer: it is parked, holding the change.
    The rail's own event for that change is refused for now, not answered as a duplicate; once
    the wrong one is judged a mismatch, the rail's event is stored and applied, once."""
    inbox = Inbox(pool, as_stored=as_stored)
    tr = ref()
    sid = await settlement(pool, S.DISPATCHING)
    forged = rail_event("transfer.created", tr, None, amount=200)
    await inbox.deliver(forged)
    assert [r["status"] for r in await inbox_rows(pool, event_id(forged))] == ["parked"]

    genuine = rail_event("transfer.created", tr, sid)
    refused = await inbox.post(genuine)
    assert (refused.status_code, refused.json()["error"]["code"]) == (503, "change_pending")
    assert refused.headers["Retry-After"] == "60"
    assert await inbox_rows(pool, event_id(genuine)) == []
    assert await answer(inbox, forged) == (200, True)  # its own redelivery is a duplicate

    await record_reference(pool, sid, tr)
    inbox.clock.advance(hours=1)
    await inbox.worker.drain()
    [row] = await inbox_rows(pool, event_id(forged))
    assert row["status"] == "mismatch" and row["change_key"] is None
    assert json.loads(row["mismatch"]) == [{"field": "amount", "expected": 900, "received": 200}]

    assert await answer(inbox, genuine) == (200, False)
    await inbox.worker.drain()
    [applied] = await inbox_rows(pool, event_id(genuine))
    assert applied["status"] == "applied" and applied["change_key"] == f"{tr}:transfer.created"
    assert await status_of(pool, sid) == "paid"
    assert await answer(inbox, genuine) == (200, True)
    assert await answer(inbox, rail_event("transfer.created", tr, sid)) == (200, True)
    assert (await moves(pool, sid)).count("paid") == 1


async def test_a_parked_event_that_goes_dead_gives_its_change_up(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    tr = ref()
    sid = await settlement(pool, S.DISPATCHING)
    stray = rail_event("transfer.created", tr, None, amount=200)
    await inbox.deliver(stray)
    for _ in range(3):
        inbox.clock.advance(hours=1)
        await inbox.worker.drain()
    [row] = await inbox_rows(pool, event_id(stray))
    assert row["status"] == "dead" and row["change_key"] is None

    genuine = rail_event("transfer.created", tr, sid)
    assert await answer(inbox, genuine) == (200, False)
    assert await status_of(pool, sid) == "paid"
    assert await answer(inbox, rail_event("transfer.created", tr, sid)) == (200, True)
    assert (await moves(pool, sid)).count("paid") == 1


async def test_two_event_ids_of_one_parked_change_apply_once(pool: asyncpg.Pool) -> None:
    """The rail's own event, parked before the relay's record, keeps its change: its twin is
    refused until it applies, then is a duplicate; the settlement moves once."""
    inbox = Inbox(pool)
    tr = ref()
    sid = await settlement(pool, S.DISPATCHING)
    first, twin = (rail_event("transfer.created", tr, None) for _ in range(2))
    await inbox.deliver(first)
    assert await answer(inbox, twin) == (503, "change_pending")
    await record_reference(pool, sid, tr)
    inbox.clock.advance(hours=1)
    await inbox.worker.drain()
    assert [r["status"] for r in await inbox_rows(pool, event_id(first))] == ["applied"]
    assert await answer(inbox, twin) == (200, True)
    assert await inbox_rows(pool, event_id(twin)) == []
    assert await status_of(pool, sid) == "paid"
    assert (await moves(pool, sid)).count("paid") == 1


async def test_a_connected_accounts_payout_failure_naming_our_settlement_books_nothing(
    pool: asyncpg.Pool,
) -> None:
    """A payee's own payout, made on its connected account with our settlement id in its
    metadata, fails: Stripe reports it to a Connect endpoint. It is not our money coming back."""
    inbox = Inbox(pool)
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, S.PAID, rail_reference=ref())
    theirs = rail_event(
        "payout.failed", ref("po"), sid, destination="ba_theirs", account=DESTINATION
    )
    await inbox.deliver(theirs)
    [row] = await inbox_rows(pool, event_id(theirs))
    assert row["status"] == "mismatch"
    assert {d["field"] for d in json.loads(row["mismatch"])} == {
        "object",
        "destination",
        "account",
    }
    assert await status_of(pool, sid) == "paid"


async def test_before_the_relays_record_a_differing_event_is_not_applied_either(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    sid = await settlement(pool, S.DISPATCHING)
    booked = await nets(pool, sid)
    forged = rail_event("transfer.created", ref(), sid, amount=1)
    await inbox.deliver(forged)
    [row] = await inbox_rows(pool, event_id(forged))
    assert row["status"] == "mismatch"
    assert json.loads(row["mismatch"]) == [{"field": "amount", "expected": 900, "received": 1}]
    assert (await status_of(pool, sid), await nets(pool, sid)) == ("dispatching", booked)
    row = await pool.fetchrow(
        "SELECT rail_reference FROM settlements WHERE id = $1", uuid.UUID(sid)
    )
    assert row["rail_reference"] is None  # the forged object was not adopted as ours


async def test_an_operator_lists_mismatches_with_both_sides_and_cannot_replay_one(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    tr = ref()
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=tr)
    forged = rail_event("transfer.created", tr, sid, currency="eur")
    await inbox.deliver(forged)

    page = (await inbox.operators.get("/v1/inbox?status=mismatch&limit=200", headers=AUTH)).json()
    [item] = [i for i in page["data"] if i["rail_event_id"] == event_id(forged)]
    assert item["status"] == "mismatch" and item["settlement_id"] == sid
    assert item["mismatch"] == [{"field": "currency", "expected": "USD", "received": "eur"}]

    for target in (str(item["id"]), event_id(forged)):
        refused = await inbox.operators.post(f"/v1/inbox/{target}/replay", headers=AUTH)
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "mismatch_not_replayable"
    [row] = await inbox_rows(pool, event_id(forged))
    assert row["status"] == "mismatch"
    assert (
        await pool.fetchval(
            "SELECT count(*) FROM operator_actions WHERE target = $1", str(item["id"])
        )
        == 0
    )
    assert await status_of(pool, sid) == "submitted"


async def test_the_database_refuses_a_mismatch_without_both_sides(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    body = rail_event("transfer.created", ref(), str(uuid.uuid4()))
    await inbox.deliver(body)  # parked: no such settlement
    for sides in (None, "[]"):
        with pytest.raises(asyncpg.CheckViolationError):
            await pool.execute(
                "UPDATE inbox_events SET status = 'mismatch', mismatch = $2::jsonb "
                "WHERE rail_event_id = $1",
                event_id(body),
                sides,
            )
