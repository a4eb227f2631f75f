"""The nostro view inside a run, on the real PostgreSQL and a served rail simulator: a first run
records the rail's balance as its opening and judges nothing; a run after movements the
ledger booked too raises no balance break; a transfer made at the rail directly, which the
ledger never booked, is a balance_mismatch of exactly its amount; the closing balance holds
what moved before its cut-off only, a failed run's balance opens no later run, and a balance
that moves during every reading is not recorded.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from railsim.core import RailSim
from railsim.http import create_app
from railsim.params import Kind
from services.adapters.stripe.source import RailSource
from services.domain.breaks import BreakStatus, BreakType
from services.domain.reconciliation import Break, RunKind, RunStatus
from services.domain.settlement import SettlementStatus as S
from services.reconcile import nostro_store, store
from services.reconcile.closing import close_break
from services.reconcile.engine import reconcile
from services.reconcile.nostro_pass import LAG, closing_balance
from services.reconcile.nostro_store import Balance
from services.reconcile.outcome import Outcome
from services.reconcile.windows import Window
from tests.integration.check_support import World, template
from tests.integration.railsim_support import serving, stripe_client, transfer_params
from tests.integration.test_reconcile_engine import world

pytestmark = pytest.mark.integration
__all__ = ["template", "world"]

SENT = 700  # what World.accept sends, in EUR
STRAY = 1050  # what transfer_params sends, in EUR


async def run(world: World, rail_url: str | None = None) -> Outcome:
    """One reconciliation run over the last hour, in process."""
    rail = RailSource("sk_test_x", api_base=rail_url or world.sim_url)
    now = datetime.now(UTC)
    try:
        return await reconcile(
            world.pool, rail, Window(RunKind.INTRADAY, now - timedelta(hours=1), now)
        )
    finally:
        await rail.aclose()


async def past_the_cut_off() -> None:
    """Wait until what happened so far is before the next run's balance cut-off (a whole
    second, LAG before the run's end)."""
    await asyncio.sleep(LAG.total_seconds() + 1.1)


async def stray_transfer(world: World) -> str:
    """A transfer made at the rail directly, naming a settlement the ledger never had."""
    async with stripe_client(world.sim_url) as client:
        made = await client.v1.transfers.create_async(transfer_params(str(uuid.uuid4())))
    return made.id


def balance_breaks(outcome: Outcome) -> list[Break]:
    return [b for b in outcome.breaks if b.break_type is BreakType.BALANCE_MISMATCH]


async def recorded(world: World, run_id: int) -> dict[str, int]:
    """The balance the run recorded, per currency."""
    rows = await world.pool.fetch(
        "SELECT currency, balance FROM reconciliation_balances WHERE run_id = $1", run_id
    )
    return {r["currency"]: r["balance"] for r in rows}


async def test_the_first_run_records_an_opening_balance_and_judges_nothing(world: World) -> None:
    # The ledger never booked this one, but a first run has no balance to measure from.
    await stray_transfer(world)
    await past_the_cut_off()
    outcome = await run(world)
    assert outcome.status is RunStatus.COMPLETED, outcome.error
    assert balance_breaks(outcome) == []
    assert await recorded(world, outcome.run_id) == {"EUR": -(2 * SENT + STRAY)}


async def test_a_run_after_movements_the_ledger_booked_raises_no_balance_break(
    world: World,
) -> None:
    await past_the_cut_off()
    first = await run(world)
    paid, failed = await world.accept(), await world.accept("acct_refuse_1")
    for sid in (paid, failed):
        await world.dispatch(sid)
    await world.move(paid, S.PAID)
    await past_the_cut_off()
    second = await run(world)
    assert second.status is RunStatus.COMPLETED, second.error
    assert balance_breaks(second) == []
    assert await recorded(world, first.run_id) == {"EUR": -2 * SENT}
    assert await recorded(world, second.run_id) == {"EUR": -3 * SENT}


async def test_a_transfer_the_ledger_does_not_have_is_a_balance_mismatch(world: World) -> None:
    await past_the_cut_off()
    await run(world)
    await stray_transfer(world)
    await past_the_cut_off()
    second = await run(world)
    assert second.status is RunStatus.COMPLETED, second.error
    # What left the rail's balance for payees (actual) against what the ledger sent (expected).
    assert balance_breaks(second) == [
        Break(BreakType.BALANCE_MISMATCH, None, None, "balance", 0, STRAY, STRAY, "EUR")
    ]
    stored = await world.pool.fetchrow(
        "SELECT status, reason FROM reconciliation_breaks WHERE break_type = 'balance_mismatch'"
    )
    assert tuple(stored) == ("open", f"balance:+{STRAY}")


async def test_a_different_balance_break_after_a_resolved_one_is_open_again(
    world: World,
) -> None:
    await past_the_cut_off()
    await run(world)
    await stray_transfer(world)
    await past_the_cut_off()
    assert len(balance_breaks(await run(world))) == 1
    first_id = await world.pool.fetchval(
        "SELECT id FROM reconciliation_breaks WHERE break_type = 'balance_mismatch'"
    )
    async with world.pool.acquire() as conn:
        await close_break(
            conn, first_id, BreakStatus.RESOLVED, actor="ops", reason="known", now=datetime.now(UTC)
        )
    # Another stray, of another amount: the next balance break is not silenced by the first.
    async with stripe_client(world.sim_url) as client:
        await client.v1.transfers.create_async(transfer_params(str(uuid.uuid4()), amount=300))
    await past_the_cut_off()
    third = await run(world)
    (again,) = balance_breaks(third)
    assert (again.actual, third.status_of(again)) == (300, BreakStatus.OPEN)
    latest = await world.pool.fetchrow(
        "SELECT status, previous_id FROM reconciliation_breaks"
        " WHERE break_type = 'balance_mismatch' ORDER BY id DESC LIMIT 1"
    )
    assert tuple(latest) == ("open", first_id)


async def test_the_closing_balance_holds_only_what_moved_before_its_cut_off(world: World) -> None:
    await past_the_cut_off()
    cut_off = datetime.now(UTC)
    await asyncio.sleep(1.1)
    await stray_transfer(world)  # a second later: after the cut-off, so not in its balance
    rail = RailSource("sk_test_x", api_base=world.sim_url)
    try:
        closing = await closing_balance(rail, cut_off)
    finally:
        await rail.aclose()
    assert closing is not None
    assert closing.as_of == datetime.fromtimestamp(math.floor(cut_off.timestamp()), UTC)
    assert closing.by_currency == {"EUR": -2 * SENT}


async def test_a_failed_runs_balance_is_no_runs_opening(world: World) -> None:
    await past_the_cut_off()
    first = await run(world)
    as_of = await world.pool.fetchval(
        "SELECT as_of FROM reconciliation_balances WHERE run_id = $1", first.run_id
    )
    # A run that read a balance one second later, then failed: its reading stands for nothing.
    now = datetime.now(UTC)
    failed = await store.start_run(world.pool, RunKind.INTRADAY, now - timedelta(hours=1), now, now)
    later = Balance(as_of + timedelta(seconds=1), {"EUR": 5})
    await nostro_store.record_balance(world.pool, failed, later, quiet=True)
    assert await store.finish_run(world.pool, failed, now, "the rail went away") is RunStatus.FAILED
    await past_the_cut_off()
    second = await run(world)
    assert second.status is RunStatus.COMPLETED, second.error
    assert balance_breaks(second) == []


def busy(app: Starlette, sim: RailSim) -> Starlette:
    """`app`, with a transfer made at the rail just before each balance it answers: money
    moves during every reading."""

    async def moving(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/v1/balance":
            made = sim.create(
                Kind.TRANSFER, [("amount", "100"), ("currency", "eur"), ("destination", "acct_ok")]
            )
            assert made.status == 200
        await app(scope, receive, send)

    return moving  # type: ignore[return-value]


async def test_a_balance_that_moves_during_every_reading_is_neither_recorded_nor_judged(
    world: World,
) -> None:
    await past_the_cut_off()
    await run(world)
    async with serving(busy(create_app(world.sim), world.sim)) as moving:
        second = await run(world, moving)
    assert second.status is RunStatus.COMPLETED, second.error
    assert balance_breaks(second) == []
    assert await recorded(world, second.run_id) == {}
