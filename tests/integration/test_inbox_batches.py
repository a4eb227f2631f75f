"""Batched intake and apply on the real PostgreSQL: a large mixed stream (many settlements,
out-of-order, duplicated and twin events, several events of one settlement in one batch,
unknown and foreign objects) posted concurrently and applied by two workers at once ends in
the states the rail reported, each change applied once, and balanced books. These webhooks
are stored only, as rows a process left before applying them are (`test_inbox_as_stored`
applies the same stream as it is stored)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

import asyncpg
import pytest

from services.domain.settlement import SettlementStatus as S
from services.domain.settlement import publishes_event
from services.inbox.apply import Outcome, apply_events
from services.inbox.metrics import InboxMetrics, create_metrics
from services.inbox.store import StoredEvent
from services.inbox.worker import InboxWorker, RetryPolicy
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.settlement.transitions import Move, apply_transitions
from tests.conftest import assert_books_balance, unique
from tests.integration.inbox_support import (
    T0,
    Inbox,
    event_id,
    inbox_rows,
    nets,
    pool,
    rail_event,
    settlement,
    status_of,
)
from tests.integration.test_ledger_books import WINDOWS, request

pytestmark = pytest.mark.integration
__all__ = ["pool"]
COUNT = 120
PAID = {"funding": -900, "paid_out": 900}

# Per settlement, by n % 6: object kind, recorded by the relay first, the rail's history
# (in delivery order) and the final statuses it may end in.
CASES: list[tuple[str, bool, tuple[str, ...], set[str]]] = [
    ("tr", False, ("transfer.created",), {"paid"}),
    ("tr", True, ("transfer.reversed", "transfer.created"), {"reversed"}),
    ("tr", False, ("transfer.created", "transfer.reversed"), {"reversed"}),
    ("po", True, ("payout.created", "payout.paid"), {"paid"}),
    ("po", True, ("payout.failed",), {"failed"}),
    # A paid payout that came back; see decision.py on why either end is sound.
    ("po", False, ("payout.paid", "payout.failed"), {"reversed", "failed"}),
]


async def settlements(pool: asyncpg.Pool) -> list[tuple[str, str]]:
    """COUNT settlements of two tenants on their way to the rail: (id, rail object id)."""
    tenants = [unique("tb"), unique("tb")]
    results = await Ledger(pool, Books(WINDOWS)).accept_many(
        [request(tenants[n % 2], amount=900, currency="USD") for n in range(COUNT)]
    )
    sids = [uuid.UUID(json.loads(r.body)["id"]) for r in results]
    objects = [f"{CASES[n % 6][0]}_{uuid.uuid4().hex}" for n in range(COUNT)]
    async with pool.acquire() as conn, conn.transaction():
        sent = await apply_transitions(
            conn, [Move(sid, S.DISPATCHING) for sid in sids], actor="relay", now=T0
        )
        recorded = [
            Move(sid, S.SUBMITTED, rail_reference=obj)
            for n, (sid, obj) in enumerate(zip(sids, objects, strict=True))
            if CASES[n % 6][1]
        ]
        answered = await apply_transitions(conn, recorded, actor="relay", now=T0)
    assert all(sent) and all(answered)
    return [(str(sid), obj) for sid, obj in zip(sids, objects, strict=True)]


def deliveries(made: list[tuple[str, str]]) -> tuple[list[bytes], int]:
    """Every body to post, in order, and how many of them are redeliveries or twins."""
    posts: list[bytes] = []
    again = 0
    for n, (sid, obj) in enumerate(made):
        bodies = [rail_event(t, obj, sid) for t in CASES[n % 6][2]]
        posts += bodies
        if n % 3 == 0:  # the same event id again
            posts.append(bodies[-1])
            again += 1
        if n % 4 == 0:  # the same change under a new event id
            posts.append(rail_event(CASES[n % 6][2][-1], obj, sid))
            again += 1
    return posts, again


async def test_a_large_mixed_stream_applied_by_two_batching_workers(pool: asyncpg.Pool) -> None:
    batches: list[list[StoredEvent]] = []
    real = apply_events

    async def spy(
        conn: asyncpg.Connection, events: Sequence[StoredEvent], now: datetime
    ) -> list[Outcome]:
        batches.append(list(events))
        return await real(conn, events, now)

    inbox = Inbox(pool, as_stored=False)
    made = await settlements(pool)
    posts, again = deliveries(made)
    unknown = [rail_event("transfer.created", f"tr_{uuid.uuid4().hex}", None) for _ in range(5)]
    # Another object announced for settlements that went out as something else.
    foreign = [rail_event("transfer.created", f"tr_{uuid.uuid4().hex}", made[n][0]) for n in (1, 7)]
    posts += unknown + foreign

    answers = []
    for start in range(0, len(posts), 64):  # concurrent posts share group inserts
        answers += await asyncio.gather(*(inbox.post(b) for b in posts[start : start + 64]))
    assert [a.status_code for a in answers] == [200] * len(posts)
    assert sum(a.json()["duplicate"] for a in answers) == again

    metrics = [create_metrics(), create_metrics()]
    workers = [
        InboxWorker(pool, m, RetryPolicy(3, 1.0, 60.0), clock=inbox.clock, batch_size=40, apply=spy)
        for m in metrics
    ]
    await asyncio.gather(*(w.drain() for w in workers))

    assert any(max(Counter(e.object_id for e in batch).values()) >= 2 for batch in batches), (
        "no batch held several events of one settlement"
    )

    for n, (sid, _) in enumerate(made):
        final = await pool.fetchval("SELECT status FROM settlements WHERE id = $1", uuid.UUID(sid))
        assert final in CASES[n % 6][3], (n, final)
        assert await nets(pool, sid) == (PAID if final == "paid" else {})
    await check_each_change_once(pool, metrics, made)
    await assert_books_balance(pool)


async def check_each_change_once(
    pool: asyncpg.Pool, metrics: list[InboxMetrics], made: list[tuple[str, str]]
) -> None:
    ids = [uuid.UUID(sid) for sid, _ in made]
    moves = await pool.fetch(
        """SELECT settlement_id, array_agg(to_status ORDER BY sequence) AS path,
                  array_agg(sequence ORDER BY sequence) AS seqs,
                  array_agg(from_status ORDER BY sequence) AS sources
             FROM settlement_transitions WHERE settlement_id = ANY($1) GROUP BY 1""",
        ids,
    )
    events = {
        r["settlement_id"]: r["seqs"]
        for r in await pool.fetch(
            """SELECT settlement_id, array_agg(sequence ORDER BY sequence) AS seqs FROM outbox
                WHERE settlement_id = ANY($1) GROUP BY 1""",
            ids,
        )
    }
    for m in moves:
        assert len(set(m["path"])) == len(m["path"]), f"a move was made twice: {m['path']}"
        assert m["seqs"] == list(range(1, len(m["seqs"]) + 1))
        published = [
            n
            for n, source, target in zip(m["seqs"], m["sources"], m["path"], strict=True)
            if publishes_event(S(source) if source else None, S(target))
        ]
        assert events[m["settlement_id"]] == published  # one event per published move
    rows = Counter(r["status"] for r in await pool.fetch("SELECT status FROM inbox_events"))
    changes = sum(
        len([t for t in CASES[n % 6][2] if t != "payout.created"]) for n in range(len(made))
    )
    ignored = sum("payout.created" in CASES[n % 6][2] for n in range(len(made)))
    assert rows == {"applied": changes, "ignored": ignored, "parked": 5, "mismatch": 2}
    mismatched = [m.registry.get_sample_value("settle_inbox_mismatched_total") for m in metrics]
    assert sum(v or 0 for v in mismatched) == 2
    applied = [
        sum(
            s.value
            for metric in m.applied.collect()
            for s in metric.samples
            if s.name.endswith("_total")
        )
        for m in metrics
    ]
    assert all(applied), f"both workers should have applied some: {applied}"
    assert sum(applied) == changes  # each change applied once, across both workers


async def test_a_body_the_database_refuses_does_not_fail_its_group(pool: asyncpg.Pool) -> None:
    inbox = Inbox(pool)
    made = [(await settlement(pool, S.DISPATCHING), f"tr_{uuid.uuid4().hex}") for _ in range(6)]
    good = [rail_event("transfer.created", obj, sid) for sid, obj in made]
    # An object id its change key's unique index cannot hold (a B-tree entry is at most about
    # 2.7 kB, and random text does not compress below that).
    huge = "tr_" + "".join(uuid.uuid4().hex for _ in range(250))
    bad = json.dumps(
        {
            "id": f"evt_{uuid.uuid4().hex}",
            "type": "transfer.created",
            "created": 1,
            "data": {"object": {"id": huge, "metadata": {}}},
        }
    ).encode()
    answers = await asyncio.gather(*(inbox.post(b) for b in [*good[:3], bad, *good[3:]]))
    assert [a.status_code for a in answers] == [200, 200, 200, 503, 200, 200, 200]
    await inbox.worker.drain()
    for sid, _ in made:
        assert await status_of(pool, sid) == "paid"


async def test_a_failing_batch_is_applied_one_event_per_transaction(pool: asyncpg.Pool) -> None:
    real = apply_events
    sizes: list[int] = []

    async def refuse_batches(
        conn: asyncpg.Connection, events: Sequence[StoredEvent], now: datetime
    ) -> list[Outcome]:
        sizes.append(len(events))
        if len(events) > 1:
            raise asyncpg.DataError("a row this batch cannot hold")
        return await real(conn, events, now)

    inbox = Inbox(pool, as_stored=False, apply=refuse_batches)
    made = [(await settlement(pool, S.DISPATCHING), f"tr_{uuid.uuid4().hex}") for _ in range(4)]
    for sid, obj in made:
        assert (await inbox.post(rail_event("transfer.created", obj, sid))).status_code == 200
    assert await inbox.worker.drain() == 4
    assert sizes == [4, 1, 1, 1, 1]  # tried as one batch, then as batches of one
    for sid, _ in made:
        assert await status_of(pool, sid) == "paid"
        assert (
            await pool.fetchval(
                "SELECT count(*) FROM settlement_transitions WHERE "
                "settlement_id = $1 AND to_status = 'paid'",
                uuid.UUID(sid),
            )
        ) == 1


@pytest.mark.parametrize(
    ("error", "status"),
    [
        # Data the books cannot hold is refused again on every attempt: dead at once.
        (asyncpg.DataError("a row the books cannot hold"), "dead"),
        # A lock held too long may pass: parked for a later attempt.
        (asyncpg.LockNotAvailableError("a row the books cannot hold"), "parked"),
    ],
    ids=["refused-dead", "timeout-parked"],
)
async def test_an_event_that_fails_even_alone_is_set_aside_and_the_rest_applied(
    pool: asyncpg.Pool, error: Exception, status: str
) -> None:
    real = apply_events
    made = [(await settlement(pool, S.DISPATCHING), f"tr_{uuid.uuid4().hex}") for _ in range(3)]
    poison = made[1][1]

    async def refuse_one(
        conn: asyncpg.Connection, events: Sequence[StoredEvent], now: datetime
    ) -> list[Outcome]:
        if any(e.object_id == poison for e in events):
            raise error
        return await real(conn, events, now)

    inbox = Inbox(pool, as_stored=False, apply=refuse_one)
    bodies = [rail_event("transfer.created", obj, sid) for sid, obj in made]
    for body in bodies:
        assert (await inbox.post(body)).status_code == 200
    assert await inbox.worker.drain() == 3
    assert [await status_of(pool, sid) for sid, _ in made] == ["paid", "dispatching", "paid"]
    (row,) = await inbox_rows(pool, event_id(bodies[1]))
    assert row["status"] == status
    assert row["reason"].startswith("apply failed: a row the books cannot hold")
