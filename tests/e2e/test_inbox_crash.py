"""The inbox as a process: SIGKILLed while it applies a stream of simulator webhooks, then
redelivered to, it applies each change once and the books balance."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.faults import Faults
from railsim.params import Kind
from railsim.replies import Delivery
from railsim.webhooks import signature_header
from services.domain.settlement import SettlementStatus as S
from services.settlement.transitions import apply_transition
from tests.conftest import assert_books_balance, asyncpg_dsn, scratch_database
from tests.e2e.relay_process import process
from tests.harness import Servers
from tests.integration.inbox_support import T0, settlement
from tests.waiting import eventually
from tools.infra.procs import free_ports

pytestmark = pytest.mark.e2e
SECRET = "whsec_inbox_e2e"
COUNT = 120


@pytest.fixture
async def database(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_inbox_e2e_") as url:
        yield url


async def rail_history(pool: asyncpg.Pool) -> tuple[dict[str, str], list[Delivery]]:
    """COUNT settlements sent to the simulator: final status each should reach, and webhooks."""
    clock = ManualClock()
    sim = RailSim(clock=clock, faults=Faults(webhook_twin=0.2, webhook_duplicate=0.2, seed=7))
    expected: dict[str, str] = {}
    deliveries: list[Delivery] = []
    for n in range(COUNT):
        reverse = n % 4 == 0
        destination = "acct_reverse_1" if reverse else "acct_ok_1"
        sid = await settlement(pool, S.DISPATCHING, destination=destination)
        reply = sim.create(
            Kind.TRANSFER,
            [
                ("amount", "900"),
                ("currency", "usd"),
                ("destination", destination),
                ("metadata[settlement_id]", sid),
            ],
            idempotency_key=sid,
        )
        deliveries += reply.webhooks
        if n % 2:  # the relay recorded the rail's answer before the webhook came
            async with pool.acquire() as conn, conn.transaction():
                await apply_transition(
                    conn, sid, S.SUBMITTED, actor="relay", now=T0, rail_reference=reply.created_id
                )
        expected[sid] = "reversed" if reverse else "paid"
    clock.advance(60)
    deliveries += sim.take_webhooks()
    return expected, deliveries


async def post_all(url: str, deliveries: list[Delivery]) -> list[Delivery]:
    """Post every delivery, 8 at a time, signed now; the ones that did not get a 200."""
    failed: list[Delivery] = []
    gate = asyncio.Semaphore(8)
    async with httpx.AsyncClient(base_url=url, timeout=5) as client:

        async def one(d: Delivery) -> None:
            async with gate:
                headers = {
                    "Stripe-Signature": signature_header(d.payload, SECRET, int(time.time()))
                }
                try:
                    response = await client.post(
                        "/v1/webhooks/stripe", content=d.payload, headers=headers
                    )
                    if response.status_code != 200:
                        failed.append(d)
                except httpx.TransportError:
                    failed.append(d)

        await asyncio.gather(*(one(d) for d in deliveries))
    return failed


async def wait_ready(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=1) as client, asyncio.timeout(30):
        while True:
            try:
                if (await client.get("/readyz")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.1)


async def test_sigkill_mid_stream_then_redelivery_applies_each_change_once(
    database: str, tmp_path: Path
) -> None:
    pool = await asyncpg.create_pool(asyncpg_dsn(database), min_size=1, max_size=4)
    try:
        # The counts below are over the whole database: it must start with nothing in it.
        assert await pool.fetchval("SELECT count(*) FROM settlements") == 0
        expected, deliveries = await rail_history(pool)
        port = free_ports(2)
        admin_port = port + 1
        url, admin = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin_port}"
        env = {**os.environ, "SETTLE_DATABASE_URL": database, "STRIPE_WEBHOOK_SECRET": SECRET}
        args = ["inbox", "--port", str(port), "--admin-port", str(admin_port)]
        log = tmp_path / "inbox.log"
        with process(args, env, log) as inbox:
            await wait_ready(admin)
            stream = asyncio.create_task(post_all(url, deliveries))
            # Killed once it has applied some, mid-way through applying the rest.
            applied = "SELECT count(*) >= 40 FROM inbox_events WHERE status = 'applied'"
            await eventually(lambda: pool.fetchval(applied), 30, "40 events applied")
            inbox.send_signal(signal.SIGKILL)
            inbox.wait()
            missed = await stream
        assert missed, "the kill came after every webhook was answered"
        with process(args, env, log):
            await wait_ready(admin)
            # The rail redelivers what got no 200, and (at least once) everything again.
            assert await post_all(url, missed) == []
            assert await post_all(url, deliveries) == []
            settled = (
                "SELECT NOT EXISTS (SELECT 1 FROM inbox_events"
                " WHERE status IN ('received', 'parked'))"
            )
            await eventually(lambda: pool.fetchval(settled), 30, "every event applied")
        await check_books(pool, expected)
    finally:
        await pool.close()


async def check_books(pool: asyncpg.Pool, expected: dict[str, str]) -> None:
    rows = await pool.fetch("SELECT id::text, status FROM settlements")
    assert {r["id"]: r["status"] for r in rows} == expected
    per_status = await pool.fetch(
        """SELECT to_status, count(*) AS n, count(DISTINCT settlement_id) AS settlements
             FROM settlement_transitions GROUP BY to_status"""
    )
    assert all(r["n"] == r["settlements"] for r in per_status), "a move was made twice"
    assert await pool.fetchval("SELECT count(*) FROM inbox_events WHERE status = 'applied'") == (
        await pool.fetchval("SELECT count(DISTINCT change_key) FROM inbox_events")
    )
    await assert_books_balance(pool)
    nets = await pool.fetch(
        """SELECT e.settlement_id::text AS sid, split_part(p.account_id, ':', 2) AS kind,
                  sum(p.amount) AS net
             FROM postings p JOIN journal_entries e ON e.id = p.entry_id
            GROUP BY 1, 2 HAVING sum(p.amount) <> 0"""
    )
    by_settlement: dict[str, dict[str, int]] = {}
    for r in nets:
        by_settlement.setdefault(r["sid"], {})[r["kind"]] = r["net"]
    for sid, final in expected.items():
        want = {"funding": -900, "paid_out": 900} if final == "paid" else {}
        assert by_settlement.get(sid, {}) == want, sid
