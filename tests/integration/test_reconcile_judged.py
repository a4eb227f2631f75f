"""The window judged in one statement (staging_sql.JUDGED), on the real PostgreSQL, against
compare() itself: over settlements and objects that agree or differ in each way compare knows,
every settlement SQL leaves unpaged is one compare finds nothing in (no break, nothing
pending), every one compare finds something in is paged, the objects no window settlement
owns are the same as the API run's stream reads, and the count of settlements holds.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from services.domain.breaks import BreakType
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import Break, LedgerRecord, RailObject, RunKind
from services.reconcile import store
from services.reconcile.compare import compare
from services.reconcile.staging import Staging
from tests.conftest import asyncpg_dsn, create_database, drop_database, unique
from tests.harness import Servers
from tests.integration.check_support import template

pytestmark = pytest.mark.integration
__all__ = ["template"]

NOW = datetime.now(UTC)
T, P = PayoutMethod.TRANSFER, PayoutMethod.PAYOUT
# (status, amount, amount_reversed, destination, reference) of each settlement, by name
LEDGER = {
    "agrees": ("paid", 700, 0, "acct_1", "tr_agrees"),
    "amount": ("paid", 700, 0, "acct_1", "tr_amount"),
    "currency": ("paid", 700, 0, "acct_1", "tr_currency"),
    "destination": ("paid", 700, 0, "acct_1", "tr_destination"),
    "unstated": ("paid", 700, 0, "acct_1", "tr_unstated"),
    "reversed": ("reversed", 700, 700, "acct_1", "tr_reversed"),
    "partly": ("partly_reversed", 700, 300, "acct_1", "tr_partly"),
    "partly_short": ("partly_reversed", 700, 300, "acct_1", "tr_partly_short"),
    "drift": ("paid", 700, 0, "acct_1", "tr_drift"),
    "submitted": ("submitted", 700, 0, "acct_1", "tr_submitted"),
    "accepted": ("accepted", 700, 0, "acct_1", "tr_accepted"),
    "missing": ("paid", 700, 0, "acct_1", "tr_missing"),
    "twice": ("paid", 700, 0, "acct_1", "tr_twice"),
    "elsewhere": ("paid", 700, 0, "acct_1", "tr_elsewhere"),
    "victim": ("paid", 700, 0, "acct_1", "tr_victim"),
    "anonymous": ("paid", 700, 0, "acct_1", "tr_anonymous"),
    "claimed": ("paid", 700, 0, "acct_1", "tr_claimed"),
    "claimed_too": ("paid", 700, 0, "acct_1", "tr_claimed"),
    "open_break": ("paid", 700, 0, "acct_1", "tr_open_break"),
    "payout": ("paid", 700, 0, "ba_1", "po_payout"),
    "failed": ("failed", 700, 0, "ba_1", "po_failed"),
    "named_late": ("paid", 700, 0, "acct_1", "tr_named_late"),
    "older": ("paid", 700, 0, "acct_1", "tr_older"),
    "uncompared": ("reversed", 700, 700, "acct_1", "tr_uncompared"),
}
IDS = {name: str(uuid.uuid5(uuid.NAMESPACE_URL, name)) for name in LEDGER}


def obj(
    object_id: str,
    named: str | None,
    *,
    kind: PayoutMethod = T,
    amount: int = 700,
    reversed_: int = 0,
    currency: str = "EUR",
    destination: str | None = "acct_1",
    status: str | None = None,
) -> RailObject:
    created = int(NOW.timestamp()) - 60
    sid = IDS.get(named, named) if named else None
    return RailObject(
        object_id, kind, amount, reversed_, currency, destination, status, created, sid
    )


# (listed, object): the objects of the window, and one from before it
OBJECTS = [
    (True, obj("tr_agrees", "agrees")),
    (True, obj("tr_amount", "amount", amount=701)),
    (True, obj("tr_currency", "currency", currency="USD")),
    (True, obj("tr_destination", "destination", destination="acct_2")),
    (True, obj("tr_unstated", "unstated", destination=None)),
    (True, obj("tr_reversed", "reversed", reversed_=700)),
    (True, obj("tr_partly", "partly", reversed_=300)),
    (True, obj("tr_partly_short", "partly_short", reversed_=200)),
    (True, obj("tr_drift", "drift", reversed_=700)),
    (True, obj("tr_submitted", "submitted")),
    (True, obj("tr_accepted", "accepted")),
    (True, obj("tr_twice", "twice")),
    (True, obj("tr_twice_again", "twice")),
    (True, obj("tr_elsewhere", "victim")),  # victim's own object agrees, but not alone
    (True, obj("tr_victim", "victim")),
    (True, obj("tr_anonymous", None)),
    (True, obj("tr_claimed", "claimed")),
    (True, obj("tr_open_break", "open_break")),
    (True, obj("po_payout", None, kind=P, destination="ba_1", status="paid")),
    (True, obj("po_failed", None, kind=P, destination="ba_1", status="failed")),
    (True, obj("tr_named_late", "named_late")),
    (True, obj("tr_stray_names_late", "named_late")),
    (True, obj("tr_stray", str(uuid.uuid4()))),
    (True, obj("tr_foreign", None)),
    (False, obj("tr_older", "older")),
]


@pytest.fixture
async def pool(infra: Servers, template: str) -> AsyncIterator[asyncpg.Pool]:
    """The ledger of LEDGER, every settlement created and moved a minute ago."""
    name = unique("settle_recon_judged_")
    url = await create_database(infra.database_url, name, template)
    pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
    try:
        for key, (status, amount, taken, destination, reference) in LEDGER.items():
            await _book(pool, IDS[key], status, amount, taken, destination, reference)
        yield pool
    finally:
        await pool.close()
        await drop_database(infra.database_url, name)


async def test_what_sql_leaves_unpaged_compare_finds_nothing_in(pool: asyncpg.Pool) -> None:
    start, end = NOW - timedelta(hours=1), NOW + timedelta(minutes=1)
    first = await store.start_run(pool, RunKind.STATEMENT, start, end, NOW)
    opened = Break(
        BreakType.STATUS_DRIFT, IDS["open_break"], None, "status", "paid", "x", None, "EUR"
    )
    await store.upsert_breaks(pool, first, [opened], NOW)
    judged, plain = [await _staged(pool, start, end, judge) for judge in (True, False)]
    paged, judged_loose, unpaged = await _read(judged, start, end)
    everything, plain_loose, _ = await _read(plain, start, end)
    assert judged_loose == plain_loose == {"tr_stray", "tr_foreign"}
    assert unpaged + len(paged) == len(LEDGER)
    for sid, (record, objects) in everything.items():
        report = compare([record], objects.values(), int(NOW.timestamp()), 0)
        found = (report.breaks, report.pending)
        if sid in paged:
            assert paged[sid] == (record, objects)
        elif sid != IDS["uncompared"]:
            assert found == ((), ()), (sid, found)
    skipped = {k for k, sid in IDS.items() if sid not in paged}
    assert skipped == {"agrees", "unstated", "reversed", "partly", "older", "uncompared"}


async def _staged(pool: asyncpg.Pool, start: datetime, end: datetime, judge: bool) -> Staging:
    run_id = await store.start_run(pool, RunKind.STATEMENT, start, end, NOW)
    staged = Staging(pool, run_id, ["stripe"])
    await staged.copy_in(OBJECTS)
    await staged.analyze()
    if judge:
        staged.judge([IDS["uncompared"]])
    return staged


async def _read(
    staged: Staging, start: datetime, end: datetime
) -> tuple[dict[str, tuple[LedgerRecord, dict[str, RailObject]]], set[str], int]:
    """The settlements paged with their objects, the unowned objects' ids, and the unpaged."""
    paged = {r.settlement_id: (r, o) async for page in staged.owned(start, end, 5) for r, o in page}
    loose = {o.object_id async for page in staged.unowned(start, end, 5) for o in page}
    await staged.drop()
    return paged, loose, staged.unpaged


async def _book(
    pool: asyncpg.Pool,
    sid: str,
    status: str,
    amount: int,
    taken: int,
    destination: str,
    reference: str,
) -> None:
    at = NOW - timedelta(minutes=1)
    await pool.execute(
        """INSERT INTO settlements (id, tenant, reference, idempotency_key, payee, destination,
               amount, currency, rail, status, version, rail_reference, created_at, updated_at,
               amount_reversed)
           VALUES ($1::uuid, 't', $1, $1, 'p', $2, $3, 'EUR', 'stripe', $4, 2, $5, $6, $6, $7)""",
        sid,
        destination,
        amount,
        status,
        reference,
        at,
        taken,
    )
    moves = [(1, None, "accepted")] + ([(2, "accepted", status)] if status != "accepted" else [])
    for sequence, source, target in moves:
        await pool.execute(
            """INSERT INTO settlement_transitions (settlement_id, sequence, from_status,
                   to_status, actor, occurred_at) VALUES ($1, $2, $3, $4, 'test', $5)""",
            uuid.UUID(sid),
            sequence,
            source,
            target,
            at,
        )
