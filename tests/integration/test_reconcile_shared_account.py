"""A rail account settle shares with the rest of a platform, on the real PostgreSQL and a
served rail simulator with a real account's habits: card charges with fees, destination
charges, other systems' transfers, Connect fees and automatic payouts happen beside settle's
transfers. Reconciliation leaves the others' objects out of scope (counted, listed, never a
break), moves the balance by each transaction's net, counts only settle's transfers as payee
money, and so ends with no break at all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from railsim.core import RailSim
from railsim.habits import account_habits
from railsim.http import create_app
from services.domain.reconciliation import RunStatus
from services.domain.settlement import SettlementStatus as S
from tests.conftest import asyncpg_dsn, create_database, drop_database, unique
from tests.harness import Servers
from tests.integration.check_support import World, template
from tests.integration.railsim_support import serving, stripe_client
from tests.integration.test_reconcile_nostro import past_the_cut_off, recorded, run

pytestmark = pytest.mark.integration
__all__ = ["template"]

# Each habit often enough that a few seconds hold several of each, and seldom enough that the
# balance can be read between two movements.
BUSY = account_habits(
    "realistic",
    charge_every=0.8,
    destination_charge_every=1.2,
    other_transfer_every=1.2,
    connect_fee_every=1.5,
    automatic_payout_every=1.5,
    charge_pending_seconds=0.0,
)


@pytest.fixture
async def shared(infra: Servers, template: str) -> AsyncIterator[World]:
    name = unique("settle_shared_")
    url = await create_database(infra.database_url, name, template)
    pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
    sim = RailSim(habits=BUSY)
    try:
        async with serving(create_app(sim)) as sim_url:
            yield World(url, pool, sim, sim_url, infra.kafka_bootstrap, "", "", "", "", "")
    finally:
        await pool.close()
        await drop_database(infra.database_url, name)


async def test_others_money_on_the_account_is_out_of_scope_and_breaks_nothing(
    shared: World,
) -> None:
    await past_the_cut_off()
    first = await run(shared)
    assert first.status is RunStatus.COMPLETED, first.error
    for _ in range(4):
        sid = await shared.accept()
        await shared.dispatch(sid)
        await shared.move(sid, S.PAID)
        await asyncio.sleep(1.0)  # the account's own life goes on meanwhile
    await past_the_cut_off()
    second = await run(shared)
    assert second.status is RunStatus.COMPLETED, second.error
    assert second.breaks == [], second.report()
    assert second.foreign.get("transfer", 0) >= 2 and second.foreign.get("payout", 0) >= 1
    assert await recorded(shared, second.run_id)
    # Both balances quiet: the second was judged from the first, and agreed.
    quiet = await shared.pool.fetch(
        "SELECT DISTINCT run_id FROM reconciliation_balances WHERE quiet ORDER BY run_id"
    )
    assert [r["run_id"] for r in quiet] == [first.run_id, second.run_id]
    async with stripe_client(shared.sim_url) as client:
        moves = await client.v1.balance_transactions.list_async({"limit": 100})
    kinds = {m.type for m in moves.data}
    assert {"charge", "transfer", "payout", "stripe_fee"} <= kinds, kinds
    assert any(m.type == "charge" and m.fee > 0 and m.net == m.amount - m.fee for m in moves.data)
