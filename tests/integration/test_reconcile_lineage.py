"""A break's lineage on the real PostgreSQL and a served rail simulator: `settle reconcile
--json` names every part of a planted break with the right ids, and reading the lineage of
many breaks costs the same few queries as reading one.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from services.domain.breaks import BreakType
from services.domain.reconciliation import Break, RunKind
from services.reconcile import lineage, store
from services.reconcile.lineage import lineage_of
from tests.integration.check_support import World, template
from tests.integration.inbox_support import Inbox, rail_event
from tests.integration.railsim_support import stripe_client, transfer_params
from tests.integration.test_reconcile_engine import settle_reconcile, world

pytestmark = pytest.mark.integration
__all__ = ["template", "world"]

# A lineage's parts, in the order a document keeps them.
PARTS = [
    "break_id",
    "settlement",
    "transitions",
    "outbox",
    "instruction",
    "inbox",
    "postings",
    "rail_objects",
]


async def column(world: World, sql: str, sid: str) -> list[object]:
    """One column of the rows `sql` selects for settlement `sid`, in its order."""
    return [r[0] for r in await world.pool.fetch(sql, uuid.UUID(sid))]


async def test_a_breaks_lineage_names_each_of_its_parts(world: World) -> None:
    sid = await world.accept()
    await world.dispatch(sid)
    sent = await world.pool.fetchval(
        "SELECT rail_reference FROM settlements WHERE id = $1", uuid.UUID(sid)
    )
    async with stripe_client(world.sim_url) as client:
        extra = await client.v1.transfers.create_async(transfer_params(sid, "acct_1Q2w3E", 700))
    # The rail's confirmation of the first transfer, and an event about the extra one that
    # names no settlement: found by the settlement, and by the rail object.
    inbox = Inbox(world.pool)
    await inbox.deliver(
        rail_event("transfer.created", sent, sid, amount=700, currency="eur"),
        rail_event("transfer.updated", extra.id, None, amount=700, currency="eur"),
    )
    today = datetime.now(UTC).date().isoformat()
    status, report = await settle_reconcile(world, "--day", today)
    assert status == 1, report
    (found,) = [b for b in report["breaks"] if b["settlement_id"] == sid]
    assert (found["type"], found["rail_object_id"]) == ("duplicate_at_rail", extra.id)
    trail = found["lineage"]
    assert set(trail) == set(PARTS)

    assert trail["settlement"]["id"] == sid and trail["settlement"]["status"] == "paid"
    assert trail["settlement"]["rail_reference"] == sent
    assert [(t["sequence"], t["from_status"], t["to_status"]) for t in trail["transitions"]] == [
        (1, None, "accepted"),
        (2, "accepted", "dispatching"),
        (3, "dispatching", "submitted"),
        (4, "submitted", "paid"),
    ]
    events = await column(
        world, "SELECT event_id FROM outbox WHERE settlement_id = $1 ORDER BY sequence", sid
    )
    assert [o["event_id"] for o in trail["outbox"]] == [str(e) for e in events]
    assert len(events) == 3  # the move to dispatching publishes nothing
    key, attempts = await world.pool.fetchrow(
        "SELECT idempotency_key, attempts FROM rail_instructions WHERE settlement_id = $1",
        uuid.UUID(sid),
    )
    instruction = trail["instruction"]
    assert (instruction["idempotency_key"], instruction["attempts"]) == (key, attempts)
    assert attempts == 1 and instruction["rail_reference"] == sent
    assert [(e["object_id"], e["event_type"], e["settlement_id"]) for e in trail["inbox"]] == [
        (sent, "transfer.created", sid),
        (extra.id, "transfer.updated", None),
    ]
    entries = await column(
        world,
        """SELECT p.id FROM postings p JOIN journal_entries e ON e.id = p.entry_id
            WHERE e.settlement_id = $1 ORDER BY e.occurred_at, p.id""",
        sid,
    )
    assert [p["id"] for p in trail["postings"]] == entries and len(entries) == 6
    assert {p["kind"] for p in trail["postings"]} == {"accepted", "submitted", "paid"}
    assert sum(p["amount"] for p in trail["postings"]) == 0
    assert {
        o["id"]: (o["named_by"], o["expected"], o["actual"]) for o in trail["rail_objects"]
    } == {
        extra.id: (["break"], 1, 2),
        sent: (["settlement", "instruction"], None, None),
    }


async def plant(world: World, count: int) -> list[str]:
    """`count` settlements sent to the rail, each with a stored duplicate_at_rail break; the
    breaks' stored keys."""
    now = datetime.now(UTC)
    run_id = await store.start_run(world.pool, RunKind.RECHECK, now, now.replace(year=2100), now)
    breaks = []
    for n in range(count):
        sid = await world.accept()
        await world.dispatch(sid)
        item = Break(BreakType.DUPLICATE_AT_RAIL, sid, f"tr_extra{n}", "count", 1, 2, None, "EUR")
        breaks.append(item)
    await store.upsert_breaks(world.pool, run_id, breaks, now)
    return [store.stored_key(b) for b in breaks]


async def queries(
    conn: asyncpg.Connection, refs: Sequence[lineage.Ref]
) -> tuple[int, dict[lineage.Ref, Any]]:
    """How many queries reading the lineage of `keys` sent, and the lineage read."""
    sent: list[str] = []

    def log(record: asyncpg.connection.LoggedQuery) -> None:
        sent.append(record.query)

    conn.add_query_logger(log)
    try:
        found = await lineage_of(conn, refs)
        await asyncio.sleep(0)  # asyncpg calls its loggers on the loop's next turn
    finally:
        conn.remove_query_logger(log)
    return len(sent), found


async def test_the_queries_of_a_lineage_do_not_grow_with_the_breaks(world: World) -> None:
    keys = await plant(world, 12)
    async with world.pool.acquire() as conn:
        one, single = await queries(conn, keys[:1])
        many, every = await queries(conn, keys)
        ids = [trail["break_id"] for trail in every.values()]
        by_id, read_by_id = await queries(conn, ids)
    assert one == many == by_id == 7
    assert set(every) == set(keys) and set(read_by_id) == set(ids)
    assert every[keys[0]] == single[keys[0]]
    assert all(list(trail) == PARTS for trail in every.values())
    # Each break's lineage is its own settlement's, not a neighbour's.
    for key, trail in every.items():
        assert trail["settlement"]["id"] == json.loads(key)[0]
        assert trail["instruction"]["attempts"] == 1
        assert {t["to_status"] for t in trail["transitions"]} == {
            "accepted",
            "dispatching",
            "submitted",
        }


async def test_lineage_is_read_in_batches_of_ids(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = await plant(world, 5)
    monkeypatch.setattr(lineage, "BATCH", 2)
    async with world.pool.acquire() as conn:
        count, found = await queries(conn, [*keys, "no such break"])
    assert count == 3 * 7 and set(found) == set(keys)


async def test_a_break_without_a_settlement_is_explained_by_its_rail_object(world: World) -> None:
    now = datetime.now(UTC)
    run_id = await store.start_run(world.pool, RunKind.RECHECK, now, now.replace(year=2100), now)
    strays = [
        Break(
            BreakType.UNKNOWN_AT_RAIL,
            None,
            f"tr_stray{n}",
            "settlement_id",
            None,
            None,
            None,
            "EUR",
        )
        for n in (1, 2)
    ]
    await store.upsert_breaks(world.pool, run_id, strays, now)
    # An event about each stray object, and one about another settlement's object.
    await Inbox(world.pool).deliver(
        rail_event("transfer.created", "tr_stray1", None),
        rail_event("transfer.created", "tr_stray2", None),
        rail_event("transfer.created", "tr_other1", world.paid),
    )
    keys = [store.stored_key(b) for b in strays]
    found = await lineage_of(world.pool, keys)  # both in one batch
    for n, key in enumerate(keys, start=1):
        trail = found[key]
        assert trail["settlement"] is None and trail["instruction"] is None
        assert trail["transitions"] == trail["outbox"] == trail["postings"] == []
        inbox = [(e["object_id"], e["settlement_id"]) for e in trail["inbox"]]
        assert inbox == [(f"tr_stray{n}", None)]
        assert trail["rail_objects"] == [
            {
                "id": f"tr_stray{n}",
                "named_by": ["break"],
                "field": "settlement_id",
                "expected": None,
                "actual": None,
            }
        ]
