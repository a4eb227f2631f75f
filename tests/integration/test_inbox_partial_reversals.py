"""Partial reversals and returned payouts on the real PostgreSQL: each part of a reversal is
booked once and only for what it adds, a duplicate or an older part books nothing, and a
payout that paid and came back ends reversed whichever of its events arrives first."""

from __future__ import annotations

import json
import time
import uuid

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railsim.objects import event, json_bytes
from services.domain.settlement import SettlementStatus as S
from tests.integration.inbox_support import (
    DESTINATION,
    Inbox,
    moves,
    nets,
    pool,
    settlement,
    status_of,
)

pytestmark = pytest.mark.integration
__all__ = ["pool"]
AMOUNT = 900  # what inbox_support's settlements are for


def reversed_by(transfer: str, sid: str, amount_reversed: int) -> bytes:
    """transfer.reversed as Stripe sends it: the transfer, with its cumulative amount reversed."""
    obj = {
        "id": transfer,
        "object": "transfer",
        "amount": AMOUNT,
        "currency": "usd",
        "destination": DESTINATION,
        "amount_reversed": amount_reversed,
        "reversed": amount_reversed == AMOUNT,
        "metadata": {"settlement_id": sid},
    }
    return json_bytes(event("transfer.reversed", obj, int(time.time())))


def payout_event(type_: str, payout: str, sid: str, *, created: int, arrival: int) -> bytes:
    """A payout event created at `created` for a payout due at the bank at `arrival`."""
    obj = {
        "id": payout,
        "object": "payout",
        "amount": AMOUNT,
        "currency": "usd",
        "destination": DESTINATION,
        "arrival_date": arrival,
        "metadata": {"settlement_id": sid},
    }
    return json_bytes(event(type_, obj, created))


async def entries(pool: asyncpg.Pool, sid: str) -> list[str]:
    """The kinds of the settlement's journal entries, sorted."""
    rows = await pool.fetch(
        "SELECT kind FROM journal_entries WHERE settlement_id = $1",
        uuid.UUID(sid),
    )
    return sorted(r["kind"] for r in rows)


async def amount_reversed(pool: asyncpg.Pool, sid: str) -> int:
    return int(
        await pool.fetchval("SELECT amount_reversed FROM settlements WHERE id = $1", uuid.UUID(sid))
    )


async def test_two_partial_reversals_then_the_rest_book_exactly_the_reversed_parts(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    tr = f"tr_{uuid.uuid4().hex}"
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, S.PAID, rail_reference=tr)

    await inbox.deliver(reversed_by(tr, sid, 300))
    assert (await status_of(pool, sid), await amount_reversed(pool, sid)) == (
        "partly_reversed",
        300,
    )
    assert await nets(pool, sid) == {"funding": -600, "paid_out": 600}

    await inbox.deliver(reversed_by(tr, sid, 700))
    assert (await status_of(pool, sid), await amount_reversed(pool, sid)) == (
        "partly_reversed",
        700,
    )
    assert await nets(pool, sid) == {"funding": -200, "paid_out": 200}

    await inbox.deliver(reversed_by(tr, sid, AMOUNT))
    assert (await status_of(pool, sid), await amount_reversed(pool, sid)) == ("reversed", AMOUNT)
    assert await nets(pool, sid) == {}
    assert (await moves(pool, sid))[-3:] == ["partly_reversed", "partly_reversed", "reversed"]
    assert await entries(pool, sid) == [
        "accepted",
        "paid",
        "partly_reversed:300",
        "partly_reversed:700",
        "reversed",
        "submitted",
    ]
    legs = await pool.fetch(
        """SELECT e.kind, p.amount FROM postings p JOIN journal_entries e ON e.id = p.entry_id
            WHERE e.settlement_id = $1 AND p.account_id LIKE '%:funding:%'
              AND e.kind <> 'accepted'""",
        uuid.UUID(sid),
    )
    assert sorted((r["kind"], r["amount"]) for r in legs) == [
        ("partly_reversed:300", 300),
        ("partly_reversed:700", 400),
        ("reversed", 200),
    ]


async def test_a_duplicate_or_an_older_partial_reversal_books_nothing(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    tr = f"tr_{uuid.uuid4().hex}"
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, S.PAID, rail_reference=tr)
    first = reversed_by(tr, sid, 300)
    await inbox.deliver(first, first, reversed_by(tr, sid, 300))  # redelivered, and a twin
    assert (
        await pool.fetchval("SELECT count(*) FROM inbox_events WHERE object_id = $1", tr) == 1
    )  # the twin is the same change: stored once
    await inbox.deliver(reversed_by(tr, sid, 600), reversed_by(tr, sid, 300))
    assert (await status_of(pool, sid), await amount_reversed(pool, sid)) == (
        "partly_reversed",
        600,
    )
    assert await nets(pool, sid) == {"funding": -300, "paid_out": 300}
    assert (await moves(pool, sid)).count("partly_reversed") == 2


async def test_an_older_reversal_arriving_after_a_newer_one_is_applied_as_a_no_op(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    tr = f"tr_{uuid.uuid4().hex}"
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=tr)
    late = reversed_by(tr, sid, 200)
    await inbox.deliver(reversed_by(tr, sid, 500))  # before transfer.created: through paid
    await inbox.deliver(late)
    row = await pool.fetchrow(
        "SELECT status, reason FROM inbox_events WHERE rail_event_id = $1",
        json.loads(late)["id"],
    )
    assert row["status"] == "applied" and "500 back" in row["reason"]
    assert await moves(pool, sid) == [
        "accepted",
        "dispatching",
        "submitted",
        "paid",
        "partly_reversed",
    ]
    assert await nets(pool, sid) == {"funding": -400, "paid_out": 400}


async def test_more_reversed_than_the_settlement_is_a_mismatch_and_books_nothing(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    tr = f"tr_{uuid.uuid4().hex}"
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, S.PAID, rail_reference=tr)
    body = reversed_by(tr, sid, AMOUNT + 1)
    await inbox.deliver(body)
    row = await pool.fetchrow(
        "SELECT status, mismatch FROM inbox_events WHERE rail_event_id = $1",
        json.loads(body)["id"],
    )
    assert row["status"] == "mismatch"
    assert json.loads(row["mismatch"]) == [
        {"field": "amount_reversed", "expected": AMOUNT, "received": AMOUNT + 1}
    ]
    assert await status_of(pool, sid) == "paid"


@pytest.mark.parametrize("failure_first", [True, False])
async def test_a_payout_failing_after_its_arrival_is_reversed_only_once_seen_paid(
    pool: asyncpg.Pool, failure_first: bool
) -> None:
    inbox = Inbox(pool)
    po = f"po_{uuid.uuid4().hex}"
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=po)
    arrival = int(time.time())
    paid = payout_event("payout.paid", po, sid, created=arrival - 1, arrival=arrival)
    returned = payout_event("payout.failed", po, sid, created=arrival + 5, arrival=arrival)
    await inbox.deliver(*((returned, paid) if failure_first else (paid, returned)))
    assert await nets(pool, sid) == {}  # the money is back in funding either way
    if failure_first:
        # Nothing had said it arrived: no `paid` is told for it, and a late paid is too late.
        assert await moves(pool, sid) == ["accepted", "dispatching", "submitted", "failed"]
    else:
        assert await moves(pool, sid) == [
            "accepted",
            "dispatching",
            "submitted",
            "paid",
            "reversed",
        ]


async def test_a_payout_failing_by_its_arrival_date_never_paid_and_ends_failed(
    pool: asyncpg.Pool,
) -> None:
    inbox = Inbox(pool)
    po = f"po_{uuid.uuid4().hex}"
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=po)
    arrival = int(time.time())
    failed = payout_event("payout.failed", po, sid, created=arrival, arrival=arrival)
    await inbox.deliver(
        failed, payout_event("payout.paid", po, sid, created=arrival, arrival=arrival)
    )
    assert await status_of(pool, sid) == "failed" and await nets(pool, sid) == {}


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sets(st.sampled_from([300, 600, AMOUNT]), min_size=1), st.data())
async def test_partial_reversals_in_any_order_and_duplication_end_at_the_largest_on_postgres(
    pool: asyncpg.Pool, parts: set[int], data: st.DataObject
) -> None:
    inbox = Inbox(pool)
    tr = f"tr_{uuid.uuid4().hex}"
    sid = await settlement(pool, S.DISPATCHING, S.SUBMITTED, rail_reference=tr)
    bodies = [created_body(tr, sid)] + [reversed_by(tr, sid, n) for n in sorted(parts)]
    order = data.draw(st.permutations([b for b in bodies for _ in range(2)]), "deliveries")
    await inbox.deliver(*order)
    back = max(parts)
    assert await amount_reversed(pool, sid) == back
    assert await status_of(pool, sid) == ("reversed" if back == AMOUNT else "partly_reversed")
    left = AMOUNT - back
    assert await nets(pool, sid) == ({"funding": -left, "paid_out": left} if left else {})


def created_body(transfer: str, sid: str) -> bytes:
    """transfer.created for the transfer, as Stripe sends it."""
    obj = {
        "id": transfer,
        "object": "transfer",
        "amount": AMOUNT,
        "currency": "usd",
        "amount_reversed": 0,
        "metadata": {"settlement_id": sid},
    }
    return json_bytes(event("transfer.created", obj, int(time.time())))
