"""`settle reconcile` on the real PostgreSQL and a served rail simulator: a ledger and a rail
that agree give a clean run; a transfer made at the rail by someone else is unknown_at_rail
with its id; a second run over the same window stores no break twice; an unreachable rail
fails the run, never a clean one.

Each test gets a database of its own (copied from a migrated template) and its own simulator:
a run judges every settlement it can see.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from railsim.core import RailSim
from railsim.http import create_app
from services.adapters.stripe.source import RailSource
from services.domain.reconciliation import RunKind, RunStatus
from services.domain.settlement import SettlementStatus as S
from services.reconcile.engine import reconcile
from services.reconcile.nostro_pass import LAG
from services.reconcile.store import EMPTY_ANSWER
from services.reconcile.windows import Window
from tests.conftest import asyncpg_dsn, create_database, drop_database, unique
from tests.harness import Servers
from tests.integration.check_support import SETTLE, World, template
from tests.integration.railsim_support import serving, stripe_client, transfer_params
from tools.infra.procs import free_ports

pytestmark = pytest.mark.integration
__all__ = ["template"]


@pytest.fixture
async def world(infra: Servers, template: str) -> AsyncIterator[World]:
    """Two settlements accepted, sent to the simulator and paid, through the real code."""
    name = unique("settle_recon_")
    url = await create_database(infra.database_url, name, template)
    pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
    sim = RailSim()
    try:
        async with serving(create_app(sim)) as sim_url:
            w = World(url, pool, sim, sim_url, infra.kafka_bootstrap, "", "", "", "", "")
            w.paid = await w.accept()
            for sid in (w.paid, await w.accept()):
                await w.dispatch(sid)
                await w.move(sid, S.PAID)
            yield w
    finally:
        await pool.close()
        await drop_database(infra.database_url, name)


async def settle_reconcile(
    world: World, *args: str, rail_url: str | None = None, **settings: str
) -> tuple[int, dict[str, Any]]:
    """`settle reconcile --json` on this world's database (with these settings besides):
    its exit status and its JSON."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
    env |= {"SETTLE_DATABASE_URL": world.url, "SETTLE_KAFKA_BOOTSTRAP": world.bootstrap}
    env |= settings
    process = await asyncio.create_subprocess_exec(
        SETTLE,
        "reconcile",
        "--json",
        "--rail-url",
        rail_url or world.sim_url,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await process.communicate()
    return await process.wait(), json.loads(out)


async def sources(world: World, run_id: int) -> dict[str, tuple[int, str | None]]:
    """What the run recorded of each source: rows returned, error."""
    rows = await world.pool.fetch(
        "SELECT source, rows_returned, error FROM reconciliation_sources WHERE run_id = $1", run_id
    )
    return {r["source"]: (r["rows_returned"], r["error"]) for r in rows}


async def run_status(world: World, run_id: int) -> str:
    status: str = await world.pool.fetchval(
        "SELECT status FROM reconciliation_runs WHERE id = $1", run_id
    )
    return status


async def test_a_ledger_and_rail_that_agree_give_a_clean_run(world: World) -> None:
    status, report = await settle_reconcile(world)
    assert status == 0, report
    assert report["ok"] is True and report["status"] == "completed"
    assert report["breaks"] == [] and set(report["counts"].values()) == {0}
    assert report["window"]["kind"] == "intraday"
    assert await run_status(world, report["run_id"]) == "completed"
    assert await sources(world, report["run_id"]) == {"ledger": (2, None), "rail": (2, None)}


async def test_a_transfer_made_at_the_rail_directly_is_unknown_at_rail(world: World) -> None:
    async with stripe_client(world.sim_url) as client:
        stray = await client.v1.transfers.create_async(transfer_params(str(uuid.uuid4())))
    status, report = await settle_reconcile(world)
    assert status == 1, report
    assert report["ok"] is False and report["status"] == "completed"
    assert report["counts"]["unknown_at_rail"] == 1
    assert sum(report["counts"].values()) == 1
    (found,) = report["breaks"]
    assert (found["type"], found["rail_object_id"], found["settlement_id"]) == (
        "unknown_at_rail",
        stray.id,
        None,
    )
    assert found["status"] == "open"


async def test_a_second_run_over_the_same_window_adds_no_break(world: World) -> None:
    # A second transfer for a paid settlement, made without its key: a duplicate.
    async with stripe_client(world.sim_url) as client:
        await client.v1.transfers.create_async(transfer_params(world.paid, "acct_1Q2w3E", 700))
    # Both runs must read the duplicate's balance move before their cut-off, which trails a
    # run's end by LAG (rounded down to a whole second): else the second run judges a move
    # the first, as a first run, only recorded, and the two differ by a balance break.
    await asyncio.sleep(LAG.total_seconds() + 1)
    today = datetime.now(UTC).date().isoformat()
    first_status, first = await settle_reconcile(world, "--day", today)
    second_status, second = await settle_reconcile(world, "--day", today)
    assert (first_status, second_status) == (1, 1)
    assert first["window"] == second["window"] and first["run_id"] != second["run_id"]
    assert first["breaks"] == second["breaks"], json.dumps([first, second], indent=1)
    assert [(b["type"], b["settlement_id"]) for b in second["breaks"]] == [
        ("duplicate_at_rail", world.paid)
    ]
    rows = await world.pool.fetch("SELECT first_run_id, last_run_id FROM reconciliation_breaks")
    assert [tuple(r) for r in rows] == [(first["run_id"], second["run_id"])]


async def test_an_unreachable_rail_fails_the_run_and_exits_2(world: World) -> None:
    closed = f"http://127.0.0.1:{free_ports()}"  # nothing listens there
    status, report = await settle_reconcile(world, rail_url=closed)
    assert status == 2, report
    assert report["ok"] is False and report["status"] == "failed"
    assert "rail could not be read" in report["error"]
    assert await run_status(world, report["run_id"]) == "failed"
    ((rows, error),) = (await sources(world, report["run_id"])).values()
    assert rows == 0 and error is not None and "rail could not be read" in error
    # A failed run is no starting point: the next intraday window starts where none completed.
    completed = await world.pool.fetchval(
        "SELECT count(*) FROM reconciliation_runs WHERE status = 'completed'"
    )
    assert completed == 0


async def test_a_rail_answering_nothing_for_money_sent_fails_the_run(world: World) -> None:
    # Another rail, empty: the ledger sent two transfers in the window, it lists none. With
    # no grace, each would read as missing_at_rail if the silence were taken as an answer.
    async with serving(create_app(RailSim())) as empty:
        status, report = await settle_reconcile(world, "--grace", "0", rail_url=empty)
    assert status == 2, report
    assert report["status"] == "failed" and EMPTY_ANSWER in report["error"]
    assert report["breaks"] == []
    recorded = await sources(world, report["run_id"])
    assert recorded["rail"] == (0, report["error"])
    assert await world.pool.fetchval("SELECT count(*) FROM reconciliation_breaks") == 0


async def test_a_settlement_paid_in_the_window_for_a_transfer_made_before_it_is_read_by_id(
    world: World,
) -> None:
    # Two settlements sent, then a window opening a second later: the list returns neither
    # transfer, so each is fetched by the id its settlement's reference names.
    sent = [await world.accept() for _ in range(2)]
    for sid in sent:
        await world.dispatch(sid)
    await asyncio.sleep(1.1)
    start = datetime.now(UTC)
    for sid in sent:
        await world.move(sid, S.PAID)
    window = Window(RunKind.INTRADAY, start, datetime.now(UTC))
    rail = RailSource("sk_test_x", api_base=world.sim_url)
    try:
        outcome = await reconcile(world.pool, rail, window, grace=0, page_size=1)
    finally:
        await rail.aclose()
    assert (outcome.status, outcome.error, outcome.breaks) == (RunStatus.COMPLETED, None, [])
    assert await sources(world, outcome.run_id) == {"ledger": (2, None), "rail": (2, None)}


async def test_each_item_break_type_is_found_with_its_name_and_ids(world: World) -> None:
    # Planted: a settlement the rail never saw; one the rail paid in another currency to another
    # account while the ledger still says submitted; one paid a different amount; a second
    # transfer for a paid settlement; and a transfer no settlement explains.
    missing, elsewhere, short = world.accept(), world.accept(), world.accept()
    missing, elsewhere, short = await missing, await elsewhere, await short
    for sid in (missing, elsewhere, short):
        await world.move(sid, S.SUBMITTED)
    other_currency = {**transfer_params(elsewhere, "acct_elsewhere", 700), "currency": "usd"}
    async with stripe_client(world.sim_url) as client:
        wrong = await client.v1.transfers.create_async(other_currency)  # type: ignore[arg-type]
        less = await client.v1.transfers.create_async(transfer_params(short, "acct_1Q2w3E", 699))
        twin = await client.v1.transfers.create_async(
            transfer_params(world.paid, "acct_1Q2w3E", 700)
        )
        stray = await client.v1.transfers.create_async(transfer_params(str(uuid.uuid4())))
    status, report = await settle_reconcile(world, "--grace", "0", "--no-heal")
    assert status == 1, report
    found = {(b["type"], b["settlement_id"], b["rail_object_id"]) for b in report["breaks"]}
    assert found == {
        ("missing_at_rail", missing, None),
        ("currency_mismatch", elsewhere, wrong.id),
        ("destination_mismatch", elsewhere, wrong.id),
        ("status_drift", elsewhere, wrong.id),
        ("amount_mismatch", short, less.id),
        ("status_drift", short, less.id),
        ("duplicate_at_rail", world.paid, twin.id),
        ("unknown_at_rail", None, stray.id),
    }
    by_type = {b["type"]: b for b in report["breaks"] if b["settlement_id"] == elsewhere}
    assert (by_type["currency_mismatch"]["expected"], by_type["currency_mismatch"]["actual"]) == (
        "EUR",
        "USD",
    )
    assert by_type["destination_mismatch"]["actual"] == "acct_elsewhere"
    assert all(b["status"] == "open" and b["lineage"] for b in report["breaks"])


async def test_a_missing_transfer_that_appears_heals_its_break_at_the_next_run(
    world: World,
) -> None:
    late = await world.accept()
    await world.move(late, S.SUBMITTED)  # the ledger says sent; the rail shows nothing yet
    # The service's grace setting is the command's too.
    status, first = await settle_reconcile(world, SETTLE_RECONCILE_GRACE_SECONDS="0")
    assert status == 1, first
    assert [(b["type"], b["settlement_id"]) for b in first["breaks"]] == [("missing_at_rail", late)]
    async with stripe_client(world.sim_url) as client:
        await client.v1.transfers.create_async(transfer_params(late, "acct_1Q2w3E", 700))
    # A run started by hand heals as the operator who started it, not as the service.
    status, second = await settle_reconcile(world, "--grace", "0", "--operator", "carol")
    assert status == 0, second
    row = await world.pool.fetchrow(
        "SELECT id, status, resolved_by, resolution_reason FROM reconciliation_breaks"
        " WHERE break_type = 'missing_at_rail' AND settlement_id = $1",
        uuid.UUID(late),
    )
    assert (row["status"], row["resolved_by"]) == ("healed", "carol")
    assert "agreeing" in row["resolution_reason"]
    audited = await world.pool.fetch(
        "SELECT actor FROM operator_actions WHERE target = $1 AND action = 'break.heal'",
        f"break:{row['id']}",
    )
    assert [a["actor"] for a in audited] == ["carol"]


async def test_one_transfer_named_by_two_settlements_is_a_duplicate_in_the_ledger(
    world: World,
) -> None:
    # A second settlement made to name the first one's transfer (a bad manual fix, say):
    # read a page at a time, the two are never on one page.
    twin = await world.accept()
    await world.move(twin, S.PAID)
    await world.pool.execute(
        "UPDATE settlements SET rail_reference = (SELECT rail_reference FROM settlements"
        " WHERE id = $1) WHERE id = $2",
        uuid.UUID(world.paid),
        uuid.UUID(twin),
    )
    reference = await world.pool.fetchval(
        "SELECT rail_reference FROM settlements WHERE id = $1", uuid.UUID(world.paid)
    )
    rail = RailSource("sk_test_x", api_base=world.sim_url)
    try:
        window = Window(RunKind.INTRADAY, datetime(2020, 1, 1, tzinfo=UTC), datetime.now(UTC))
        outcome = await reconcile(world.pool, rail, window, grace=0, page_size=1, heal=False)
    finally:
        await rail.aclose()
    first, second = sorted([world.paid, twin])
    found = [b for b in outcome.breaks if b.break_type.value == "duplicate_in_ledger"]
    assert [(b.settlement_id, b.rail_object_id, b.expected) for b in found] == [
        (second, reference, first)
    ]
