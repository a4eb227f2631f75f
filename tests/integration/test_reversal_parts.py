"""A transfer reversed in three parts, on the real PostgreSQL, the inbox and a served rail
simulator: it ends `reversed` with each part booked once, whether each part's webhook
arrives (the inbox applies the cumulative amounts) or every webhook is lost and
reconciliation heals each part from the rail's object as it appears (a later part shows as
more reversed at the rail than in the ledger: proof, healed like a drift)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.faults import Faults
from railsim.http import create_app as rail_app
from railsim.webhooks import WebhookSender
from services.adapters.stripe.source import RailSource
from services.domain.reconciliation import RunKind, RunStatus
from services.domain.settlement import SettlementStatus as S
from services.inbox.http import create_app as inbox_app
from services.inbox.metrics import create_metrics
from services.inbox.signature import SignatureCheck
from services.inbox.worker import InboxWorker
from services.reconcile.engine import reconcile
from services.reconcile.windows import Window
from tests.conftest import asyncpg_dsn, create_database, drop_database, unique
from tests.harness import Servers
from tests.integration.check_support import World, template
from tests.integration.railsim_support import FAST_RETRIES, serving

pytestmark = pytest.mark.integration
__all__ = ["template"]

SECRET = "whsec_parts_test"
IN_THREE = "acct_partial3"
SENT = 700  # what World.accept sends: parts of 233, 233 and 234


@pytest.fixture
async def database(infra: Servers, template: str) -> AsyncIterator[tuple[str, asyncpg.Pool]]:
    name = unique("settle_parts_")
    url = await create_database(infra.database_url, name, template)
    pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
    try:
        yield url, pool
    finally:
        await pool.close()
        await drop_database(infra.database_url, name)


async def reversal_entries(pool: asyncpg.Pool, sid: str) -> list[str]:
    rows = await pool.fetch(
        "SELECT kind FROM journal_entries WHERE settlement_id = $1"
        " AND (kind LIKE 'partly_reversed%' OR kind = 'reversed') ORDER BY occurred_at, kind",
        uuid.UUID(sid),
    )
    return [r["kind"] for r in rows]


async def funded_back(pool: asyncpg.Pool, sid: str) -> int:
    """What the settlement's reversal entries moved back into the tenant's funding."""
    return int(
        await pool.fetchval(
            "SELECT coalesce(sum(p.amount), 0) FROM postings p"
            " JOIN journal_entries e ON e.id = p.entry_id"
            " WHERE e.settlement_id = $1 AND p.account_id LIKE '%:funding:%'"
            " AND (e.kind LIKE 'partly_reversed%' OR e.kind = 'reversed')",
            uuid.UUID(sid),
        )
    )


async def status_of(pool: asyncpg.Pool, sid: str) -> tuple[S, int]:
    row = await pool.fetchrow(
        "SELECT status, amount_reversed FROM settlements WHERE id = $1", uuid.UUID(sid)
    )
    return S(row["status"]), row["amount_reversed"]


async def test_three_parts_whose_webhooks_arrive_are_each_booked_once(
    infra: Servers, database: tuple[str, asyncpg.Pool]
) -> None:
    url, pool = database
    metrics = create_metrics()
    inbox = inbox_app(pool, SignatureCheck((SECRET,)), metrics, max_body_bytes=65536)
    sim = RailSim(faults=Faults(reversal_delay_ms=100))
    async with serving(inbox) as inbox_url:  # type: ignore[arg-type]
        sender = WebhookSender(f"{inbox_url}/v1/webhooks/stripe", SECRET, policy=FAST_RETRIES)
        async with serving(rail_app(sim, sender)) as sim_url:
            w = World(url, pool, sim, sim_url, infra.kafka_bootstrap, "", "", "", "", "")
            sid = await w.accept(IN_THREE)
            await w.dispatch(sid)
            worker = InboxWorker(pool, metrics)
            for _ in range(400):
                (transfer,) = sim.objects_for(sid)
                told = sender.stats()
                if transfer["amount_reversed"] == SENT and told["sent"] == 4:
                    break
                await asyncio.sleep(0.025)
            else:
                raise AssertionError(f"the rail did not reverse all three parts: {transfer}")
            await worker.drain()
    assert await status_of(pool, sid) == (S.REVERSED, SENT)
    assert await reversal_entries(pool, sid) == [
        "partly_reversed:233",
        "partly_reversed:466",
        "reversed",
    ]
    assert await funded_back(pool, sid) == SENT


async def heal(world: World) -> int:
    """One reconciliation run over the last hour that heals what the rail proves."""
    rail = RailSource("sk_test_x", api_base=world.sim_url)
    now = datetime.now(UTC)
    try:
        outcome = await reconcile(
            world.pool, rail, Window(RunKind.INTRADAY, now - timedelta(hours=1), now), grace=0
        )
    finally:
        await rail.aclose()
    assert outcome.status is RunStatus.COMPLETED, outcome.error
    return outcome.healed


async def test_three_parts_whose_webhooks_are_lost_are_healed_each_once(
    infra: Servers, database: tuple[str, asyncpg.Pool]
) -> None:
    url, pool = database
    # The rail's clock a minute behind settle's: when the rail moved the money (each entry's
    # effective date) is never when settle recorded it.
    clock = ManualClock(datetime.now(UTC).timestamp() - 60)
    sim = RailSim(clock=clock, faults=Faults(webhook_drop=1.0, reversal_delay_ms=1000))
    async with serving(rail_app(sim)) as sim_url:
        w = World(url, pool, sim, sim_url, infra.kafka_bootstrap, "", "", "", "", "")
        sid = await w.accept(IN_THREE)
        await w.dispatch(sid)
        seen: list[tuple[S, int]] = []
        for _ in range(3):
            clock.advance(1.0)  # the next part is reversed at the rail; its webhook is lost
            assert await heal(w) == 1
            seen.append(await status_of(pool, sid))
        assert await heal(w) == 0  # nothing left to prove: a run after heals nothing
    assert seen == [(S.PARTLY_REVERSED, 233), (S.PARTLY_REVERSED, 466), (S.REVERSED, SENT)]
    assert await reversal_entries(pool, sid) == [
        "partly_reversed:233",
        "partly_reversed:466",
        "reversed",
    ]
    assert await funded_back(pool, sid) == SENT
    (transfer,) = sim.objects_for(sid)
    parts = sorted(r["created"] for r in transfer["reversals"]["data"])
    dated = await pool.fetch(
        "SELECT effective_at, occurred_at FROM journal_entries WHERE settlement_id = $1"
        " AND (kind LIKE 'partly_reversed%' OR kind = 'reversed') ORDER BY occurred_at",
        uuid.UUID(sid),
    )
    # Each healed part is dated by its reversal's balance transaction, not by the heal.
    assert [r["effective_at"] for r in dated] == [datetime.fromtimestamp(t, UTC) for t in parts]
    assert all(r["occurred_at"] > r["effective_at"] for r in dated)
