"""Healing lost webhooks on the real PostgreSQL, Kafka, inbox and a served rail simulator that
drops webhooks (transfers paid and reversed, payouts paid and failed): `settle reconcile`
heals each status drift the rail proves through the inbox, after which every settlement is
final and agrees with the rail and `settle check` is green; a late real webhook for a healed
change is a duplicate that books nothing; a drift whose object also differs in amount is
never healed; a second run heals nothing and adds no break.

Each test gets a database, topics, an inbox and a simulator of its own: a run judges every
settlement it can see.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest

from railsim.core import RailSim
from railsim.faults import Faults
from railsim.http import create_app as rail_app
from railsim.objects import event, json_bytes
from railsim.webhooks import WebhookSender, signature_header
from services.adapters.kafka.access import KafkaAccess
from services.adapters.kafka.topics import ensure_topics
from services.adapters.stripe.source import RailSource
from services.domain.breaks import BreakType
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import RunKind
from services.domain.settlement import SettlementStatus as S
from services.inbox.http import create_app as inbox_app
from services.inbox.metrics import create_metrics
from services.inbox.signature import SignatureCheck
from services.inbox.worker import InboxWorker
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.intake import parse_settlement_body
from services.reconcile.engine import reconcile
from services.reconcile.heal import heal_drift
from services.reconcile.proof import EVENT_PREFIX
from services.reconcile.windows import Window
from services.settlement.transitions import apply_transition
from tests.conftest import asyncpg_dsn, create_database, drop_database, unique
from tests.harness import Servers
from tests.integration.check_support import TENANT, World, template
from tests.integration.railsim_support import FAST_RETRIES, serving, stripe_client
from tests.integration.railsim_support import transfer_params as params
from tests.integration.test_ledger_books import WINDOWS
from tests.integration.test_reconcile_engine import settle_reconcile

pytestmark = pytest.mark.integration
__all__ = ["template"]

SECRET = "whsec_heal_test"
# Half the changes' webhooks never sent; seeded so the run drops some of each kind of change.
DROPS = Faults(webhook_drop=0.5, reversal_delay_ms=50, seed=11)
PAID, REVERSED = 8, 4  # transfers paid, and paid then reversed (acct_reverse)
PAID_OUT, FAILED = 3, 2  # payouts paid, and failed (acct_fail)


@dataclass
class Dropping:
    """A world whose rail drops webhooks; the rest reach a served inbox."""

    world: World
    worker: InboxWorker
    sender: WebhookSender
    inbox_url: str

    async def settle_all(self) -> dict[str, S]:
        """Send PAID + REVERSED settlements, wait until every change at the rail was either
        delivered or dropped, apply what arrived; the status each should end in."""
        w = self.world
        wanted = {await w.accept("acct_ok_1"): S.PAID for _ in range(PAID)}
        wanted |= {await w.accept("acct_reverse_1"): S.REVERSED for _ in range(REVERSED)}
        wanted |= {await self.payout("acct_ok_1"): S.PAID for _ in range(PAID_OUT)}
        wanted |= {await self.payout("acct_fail_1"): S.FAILED for _ in range(FAILED)}
        for sid in wanted:
            await w.dispatch(sid)
        # transfer.created each, transfer.reversed for some; payout.created and .paid or .failed
        changes = PAID + 2 * REVERSED + 2 * (PAID_OUT + FAILED)
        for _ in range(400):
            told = self.sender.stats()["sent"] + w.sim.withheld_webhooks()["count"]
            if self.rail_done(wanted) and told == changes and not self.sender.stats()["pending"]:
                break
            await asyncio.sleep(0.025)
        else:
            raise AssertionError(f"the rail did not finish: {self.sender.stats()}")
        await self.worker.drain()
        return wanted

    async def payout(self, destination: str) -> str:
        """A settlement accepted to be paid out (not transferred) to `destination`."""
        body = {
            "reference": unique("ref-"),
            "payee": "payee-7",
            "destination": destination,
            "amount": 700,
            "currency": "EUR",
        }
        req = parse_settlement_body(TENANT, unique("key-"), json.dumps(body).encode())
        ledger = Ledger(self.world.pool, Books(WINDOWS, PayoutMethod.PAYOUT))
        return str(json.loads((await ledger.accept_many([req]))[0].body)["id"])

    def rail_done(self, wanted: dict[str, S]) -> bool:
        """Every reversal and every payout's outcome has happened at the rail."""
        objects = {sid: self.world.sim.objects_for(sid)[0] for sid in wanted}
        return all(
            objects[sid]["amount_reversed"] > 0 for sid in wanted if wanted[sid] is S.REVERSED
        ) and all(
            o["status"] in ("paid", "failed") for o in objects.values() if o["object"] == "payout"
        )

    async def statuses(self, ids: Any) -> dict[str, S]:
        rows = await self.world.pool.fetch(
            "SELECT id::text, status FROM settlements WHERE id = ANY($1::uuid[])", list(ids)
        )
        return {r["id"]: S(r["status"]) for r in rows}

    async def count(self, table: str) -> int:
        return int(await self.world.pool.fetchval(f"SELECT count(*) FROM {table}"))

    async def post(self, body: bytes) -> dict[str, Any]:
        """A webhook posted to the inbox, signed as the rail signs it; the inbox's answer."""
        header = signature_header(body, SECRET, int(time.time()))
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{self.inbox_url}/v1/webhooks/stripe",
                content=body,
                headers={"Stripe-Signature": header, "Content-Type": "application/json"},
            )
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]


@pytest.fixture
async def dropping(infra: Servers, template: str, kafka_bootstrap: str) -> AsyncIterator[Dropping]:
    name = unique("settle_heal_")
    url = await create_database(infra.database_url, name, template)
    prefix = unique("t") + "."
    await ensure_topics(KafkaAccess(kafka_bootstrap), prefix)
    pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=6)
    metrics = create_metrics()
    inbox = inbox_app(pool, SignatureCheck((SECRET,)), metrics, max_body_bytes=65536)
    sim = RailSim(faults=DROPS)
    try:
        async with serving(inbox) as inbox_url:  # type: ignore[arg-type]
            hooks = f"{inbox_url}/v1/webhooks/stripe"
            sender = WebhookSender(hooks, SECRET, policy=FAST_RETRIES)
            async with serving(rail_app(sim, sender)) as sim_url:
                w = World(url, pool, sim, sim_url, kafka_bootstrap, prefix, "", "", "", "")
                yield Dropping(w, InboxWorker(pool, metrics), sender, inbox_url)
    finally:
        await pool.close()
        await drop_database(infra.database_url, name)


async def test_a_run_heals_every_drift_the_dropped_webhooks_left(dropping: Dropping) -> None:
    wanted = await dropping.settle_all()
    before = await dropping.statuses(wanted)
    drifted = {sid for sid, end in wanted.items() if before[sid] is not end}
    assert drifted and len(drifted) < len(wanted), "the seed must drop some webhooks, not all"

    # Read-only: every drift is reported open, nothing moves.
    status, report = await settle_reconcile(dropping.world, "--grace", "0", "--no-heal")
    assert status == 1, report
    assert report["healed"] == 0
    assert {(b["type"], b["status"]) for b in report["breaks"]} == {("status_drift", "open")}
    assert {b["settlement_id"] for b in report["breaks"]} == drifted
    assert await dropping.statuses(wanted) == before

    status, report = await settle_reconcile(dropping.world, "--grace", "0")
    assert status == 0, report
    assert report["healed"] == len(drifted)
    assert {(b["type"], b["status"]) for b in report["breaks"]} == {("status_drift", "healed")}
    assert await dropping.statuses(wanted) == wanted
    audit = await dropping.world.pool.fetch(
        "SELECT actor, action, before, after FROM operator_actions ORDER BY id"
    )
    assert len(audit) == len(drifted)
    for row in audit:
        # Run by hand: audited under whoever ran it (the login name here).
        assert (row["actor"], row["action"]) == (getpass.getuser(), "break.heal")
        assert json.loads(row["before"])["status"] == "open"
        assert json.loads(row["after"])["status"] == "healed"

    # Healed is final: a second run heals nothing and finds nothing new.
    breaks = await dropping.count("reconciliation_breaks")
    status, again = await settle_reconcile(dropping.world, "--grace", "0")
    assert (status, again["healed"], again["breaks"]) == (0, 0, []), again
    assert await dropping.count("reconciliation_breaks") == breaks
    assert await dropping.count("operator_actions") == len(drifted)

    await dropping.world.publish()
    status, check = await dropping.world.settle_check()
    assert status == 0 and check["ok"] is True, check


async def test_a_late_real_webhook_for_a_healed_change_books_nothing(dropping: Dropping) -> None:
    await dropping.settle_all()
    status, report = await settle_reconcile(dropping.world, "--grace", "0")
    assert status == 0 and report["healed"] > 0, report
    healed = {
        (r["object_id"], r["event_type"]): r["settlement_id"]
        for r in await dropping.world.pool.fetch(
            "SELECT object_id, event_type, settlement_id::text FROM inbox_events"
            " WHERE rail_event_id LIKE $1 AND status = 'applied'",
            f"{EVENT_PREFIX}%",
        )
    }
    assert len(healed) == report["healed"]
    withheld = dropping.world.sim.withheld_webhooks()["recent"]
    late = [w for w in withheld if (w["object_id"], w["type"]) in healed]
    assert late, withheld
    postings = await dropping.count("postings")
    transitions = await dropping.count("settlement_transitions")
    rows = await dropping.count("inbox_events")
    for lost in late:
        (obj,) = dropping.world.sim.objects_for(lost["settlement_id"])
        body = event(lost["type"], obj, lost["created"]) | {"id": lost["event_id"]}
        answer = await dropping.post(json_bytes(body))
        assert answer == {"received": lost["event_id"], "duplicate": True}
    assert await dropping.worker.drain() == 0
    assert await dropping.count("postings") == postings
    assert await dropping.count("settlement_transitions") == transitions
    assert await dropping.count("inbox_events") == rows


async def test_a_drift_whose_object_differs_in_amount_is_never_healed(dropping: Dropping) -> None:
    w = dropping.world
    sid = await w.accept("acct_ok_1")  # 700 EUR
    async with stripe_client(w.sim_url) as client:
        paid = await client.v1.transfers.create_async(params(sid, "acct_ok_1", 650))
    async with w.pool.acquire() as conn, conn.transaction():
        moved = await apply_transition(
            conn, sid, S.SUBMITTED, actor="relay", now=datetime.now(UTC), rail_reference=paid.id
        )
    assert moved is not None
    for attempt in range(2):
        status, report = await settle_reconcile(w, "--grace", "0")
        assert status == 1, report
        assert report["healed"] == 0
        found = {(b["type"], b["rail_object_id"], b["status"]) for b in report["breaks"]}
        assert found == {
            ("amount_mismatch", paid.id, "open"),
            ("status_drift", paid.id, "open"),
        }, attempt
    assert await dropping.statuses([sid]) == {sid: S.SUBMITTED}
    assert await dropping.count("operator_actions") == 0
    assert (
        await w.pool.fetchval(
            "SELECT count(*) FROM inbox_events WHERE rail_event_id LIKE $1", f"{EVENT_PREFIX}%"
        )
        == 0
    )


async def test_a_drift_healed_before_is_not_healed_twice(dropping: Dropping) -> None:
    await dropping.settle_all()
    w = dropping.world
    rail = RailSource("sk_test_x", api_base=w.sim_url)
    try:
        window = Window(RunKind.INTRADAY, datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC))
        read_only = await reconcile(w.pool, rail, window, grace=0, heal=False)
        drifts = [b for b in read_only.breaks if b.break_type is BreakType.STATUS_DRIFT]
        assert drifts and read_only.healed == 0
        wires = [await rail.wire(b.rail_object_id or "") for b in drifts]
    finally:
        await rail.aclose()
    tables = ("postings", "inbox_events", "operator_actions")
    pairs = list(zip(drifts, wires, strict=True))
    async with w.pool.acquire() as conn:
        first = [await heal_drift(conn, b, o, datetime.now(UTC)) for b, o in pairs]
        counts = [await dropping.count(t) for t in tables]
        again = [await heal_drift(conn, b, o, datetime.now(UTC)) for b, o in pairs]
    assert all(h.healed and h.event_id for h in first), first
    assert not any(h.healed for h in again), again
    assert all("not open" in h.reason for h in again), again
    assert [await dropping.count(t) for t in tables] == counts


async def test_a_drift_the_rails_own_late_webhook_resolved_is_healed_by_the_next_run(
    dropping: Dropping,
) -> None:
    wanted = await dropping.settle_all()
    status, report = await settle_reconcile(dropping.world, "--grace", "0", "--no-heal")
    assert status == 1 and report["breaks"], report
    drifted = {b["settlement_id"] for b in report["breaks"]}
    # The rail's own webhooks arrive, late: the inbox applies them, no break is healed by it.
    withheld = dropping.world.sim.withheld_webhooks()["recent"]
    for lost in withheld:
        (obj,) = dropping.world.sim.objects_for(lost["settlement_id"])
        body = event(lost["type"], obj, lost["created"]) | {"id": lost["event_id"]}
        await dropping.post(json_bytes(body))
    await dropping.worker.drain()
    assert await dropping.statuses(wanted) == wanted
    assert await dropping.count("reconciliation_breaks WHERE status = 'open'") == len(drifted)

    status, report = await settle_reconcile(dropping.world, "--grace", "0")
    assert status == 0, report
    assert report["breaks"] == [] and report["healed"] == len(drifted)
    assert await dropping.count("reconciliation_breaks WHERE status = 'open'") == 0
    audit = await dropping.world.pool.fetch(
        "SELECT actor, action, after->>'resolution_reason' AS why FROM operator_actions"
    )
    assert len(audit) == len(drifted)
    assert {(r["actor"], r["action"]) for r in audit} == {(getpass.getuser(), "break.heal")}
    assert all("late" in r["why"] for r in audit)
    synthetic = await dropping.count(f"inbox_events WHERE rail_event_id LIKE '{EVENT_PREFIX}%'")
    assert synthetic == 0  # nothing was healed through a synthetic row: the rail's own did it
