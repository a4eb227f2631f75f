"""`settle reconcile --statement FILE --statement FILE` on the real PostgreSQL, against Stripe's
report-run files of the ledger's own settlements (written here from what the simulator was
told): files of a run that went well reconcile clean, counting the lines of categories settle
does not make; an edited amount is an amount_mismatch, a transfer left out missing_at_rail;
the same files twice give the same report; a reversal whose transfer predates the files is
compared with the transfer the rail's API returns, or left uncompared when the API does not
answer, never missing_at_rail; a duplicate transfer with a reversal is duplicate_at_rail; a
file that is neither report exits 2 and starts no run, a line that cannot be read exits 2
naming it and its run is recorded failed.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from railsim.statement import major_units
from services.domain.settlement import SettlementStatus as S
from tests.integration.check_support import SETTLE, World, template
from tests.integration.railsim_support import stripe_client
from tests.integration.test_reconcile_engine import run_status, sources, world
from tests.unit.test_reconcile_statement import BALANCE_HEADER, PAYOUTS_HEADER

pytestmark = pytest.mark.integration
__all__ = ["template", "world"]
CLOSED_PORT = "http://127.0.0.1:9"  # nothing answers there: the rail's API unreachable


async def settle(world: World, *args: str) -> tuple[int, bytes]:
    """`settle ARGS` on this world's database: exit status and stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
    env |= {
        "SETTLE_DATABASE_URL": world.url,
        "SETTLE_KAFKA_BOOTSTRAP": world.bootstrap,
        "STRIPE_API_BASE": world.sim_url,
    }
    process = await asyncio.create_subprocess_exec(
        SETTLE, *args, env=env, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    return await process.wait(), out


async def reconcile_files(
    world: World, *paths: Path, rail_url: str | None = None
) -> tuple[int, dict[str, Any]]:
    """`settle reconcile --json --statement P...` over today: exit status and report."""
    today = datetime.now(UTC).date().isoformat()
    args = [arg for path in paths for arg in ("--statement", str(path))]
    args += ["--rail-url", rail_url or world.sim_url]
    status, out = await settle(world, "reconcile", "--json", "--grace", "0", "--day", today, *args)
    return status, json.loads(out)


async def transfer_lines(world: World) -> dict[str, str]:
    """Each settlement's transfer as a balance report line, by settlement id."""
    rows = await world.pool.fetch(
        "SELECT id, amount, currency, destination, rail_reference FROM settlements"
        " WHERE status = 'paid' ORDER BY id"
    )
    return {
        str(r["id"]): line(
            "transfer", r["rail_reference"], -r["amount"], str(r["id"]), r["destination"]
        )
        for r in rows
    }


def line(category: str, source: str, amount: int, sid: str = "", account: str = "") -> str:
    """One balance report line of `amount` EUR minor units, created now."""
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    gross = major_units(amount, "EUR")
    return (
        f"txn_{source},{now},{now},{now},{now},eur,{gross},0.00,{gross},{category},{source},"
        f",,,,{account},{sid}"
    )


def files(directory: Path, *lines: str, payouts: tuple[str, ...] = ()) -> tuple[Path, Path]:
    """The balance report with `lines` and the payouts report with `payouts`."""
    balance, paid_out = directory / "balance.csv", directory / "payouts.csv"
    balance.write_text("\n".join([BALANCE_HEADER, *lines]) + "\n")
    paid_out.write_text("\n".join([PAYOUTS_HEADER, *payouts]) + "\n")
    return balance, paid_out


def saved_files(directory: Path) -> list[Path]:
    """The files `settle rail statement` saved in `directory`."""
    return sorted(directory.glob("*.csv"))


def found(report: dict[str, Any]) -> list[tuple[str, str | None, str | None]]:
    return [(b["type"], b["settlement_id"], b["rail_object_id"]) for b in report["breaks"]]


async def test_the_files_of_a_run_that_went_well_reconcile_clean_counting_the_rest(
    world: World, tmp_path: Path
) -> None:
    others = [line("charge", "ch_1", 2500), line("fee", "fee_1", -25), line("refund", "re_1", -500)]
    paths = files(tmp_path, *(await transfer_lines(world)).values(), *others)
    status, report = await reconcile_files(world, *paths)
    assert status == 0, report
    assert report["ok"] is True and report["breaks"] == [] and report["pending"] == []
    assert report["window"]["kind"] == "statement"
    assert report["statement"] == {
        "files": [
            {"file": "balance.csv", "report": "balance_change_from_activity.itemized.3"},
            {"file": "payouts.csv", "report": "payouts.itemized.3"},
        ],
        "lines": 5,
        "out_of_scope": {"charge": 1, "fee": 1, "refund": 1},
        "not_compared": [],
    }
    assert await run_status(world, report["run_id"]) == "completed"
    recorded = await sources(world, report["run_id"])
    assert recorded == {"ledger": (2, None), "statement:balance.csv+payouts.csv": (5, None)}


async def test_the_report_runs_the_simulator_serves_reconcile_clean(
    world: World, tmp_path: Path
) -> None:
    today = datetime.now(UTC).date()
    span = ["--from", today.isoformat(), "--to", (today + timedelta(days=1)).isoformat()]
    # The reports hold whole seconds up to `data_available_end`: the world's transfers, made
    # this second, are in them once it has passed.
    await asyncio.sleep(1.1)
    saved, out = await settle(
        world, "rail", "statement", "--rail", "sim", *span, "--out", str(tmp_path)
    )
    assert saved == 0, out
    paths = saved_files(tmp_path)
    assert [p.name for p in paths] == [
        "balance_change_from_activity.itemized.3.csv",
        "payouts.itemized.3.csv",
    ]
    status, report = await reconcile_files(world, *paths)
    assert status == 0, report
    assert report["breaks"] == [] and report["statement"]["not_compared"] == []
    assert (await sources(world, report["run_id"]))["ledger"] == (2, None)


async def test_an_edited_amount_is_an_amount_mismatch_and_a_missing_line_missing_at_rail(
    world: World, tmp_path: Path
) -> None:
    lines = await transfer_lines(world)
    other = next(sid for sid in lines if sid != world.paid)
    reference = lines[world.paid].split(",")[10]
    edited = line("transfer", reference, -701, world.paid, "acct_1Q2w3E")
    status, report = await reconcile_files(world, *files(tmp_path, edited))
    assert status == 1, report
    assert sorted(found(report)) == [
        ("amount_mismatch", world.paid, reference),
        ("missing_at_rail", other, None),
    ]
    mismatch = next(b for b in report["breaks"] if b["type"] == "amount_mismatch")
    assert (mismatch["expected"], mismatch["actual"], mismatch["reason"]) == (700, 701, "amount:+1")


async def test_the_same_files_twice_give_the_same_report_byte_for_byte(
    world: World, tmp_path: Path
) -> None:
    lines = await transfer_lines(world)
    reference = lines[world.paid].split(",")[10]
    lines[world.paid] = line("transfer", reference, -900, world.paid, "acct_other")
    paths = files(tmp_path, *lines.values())
    first_status, first = await reconcile_files(world, *paths)
    second_status, second = await reconcile_files(world, *paths)
    assert (first_status, second_status) == (1, 1)
    assert first.pop("run_id") != second.pop("run_id")
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert [b["type"] for b in first["breaks"]] == ["amount_mismatch", "destination_mismatch"]


async def test_a_reversal_of_a_transfer_made_before_the_files_is_compared_through_the_api(
    world: World, tmp_path: Path
) -> None:
    lines = await transfer_lines(world)  # the transfers of the files' period
    sid = await world.accept("acct_reverse")  # the simulator reverses it after a while
    await world.dispatch(sid)
    await world.move(sid, S.PAID)
    reference = await world.pool.fetchval(
        "SELECT rail_reference FROM settlements WHERE id = $1", sid
    )
    async with stripe_client(world.sim_url) as client:
        for _ in range(100):
            transfer = await client.v1.transfers.retrieve_async(reference)
            if transfer.amount_reversed == transfer.amount:
                break
            await asyncio.sleep(0.1)
    assert transfer.amount_reversed == 700
    await world.move(sid, S.REVERSED, reason="transfer.reversed")
    paths = files(tmp_path, *lines.values(), line("transfer_reversal", "trr_1", 700, sid))
    status, report = await reconcile_files(world, *paths)
    assert (status, report["breaks"], report["statement"]["not_compared"]) == (0, [], [])
    assert (await sources(world, report["run_id"]))["ledger"] == (3, None)
    status, report = await reconcile_files(world, *paths, rail_url=CLOSED_PORT)
    assert (status, report["breaks"], report["statement"]["not_compared"]) == (0, [], [sid])
    assert (await sources(world, report["run_id"]))["ledger"] == (3, None)


async def test_a_duplicate_transfer_with_a_reversal_is_duplicate_at_rail(
    world: World, tmp_path: Path
) -> None:
    lines = await transfer_lines(world)
    await world.move(world.paid, S.REVERSED, reason="transfer.reversed")
    duplicate = line("transfer", "tr_duplicate", -700, world.paid, "acct_1Q2w3E")
    reversal = line("transfer_reversal", "trr_1", 700, world.paid)
    status, report = await reconcile_files(
        world, *files(tmp_path, *lines.values(), duplicate, reversal)
    )
    assert status == 1, report
    assert found(report) == [("duplicate_at_rail", world.paid, "tr_duplicate")]


async def test_a_line_that_cannot_be_read_exits_2_naming_it_and_fails_its_run(
    world: World, tmp_path: Path
) -> None:
    lines = list((await transfer_lines(world)).values())
    lines[1] = lines[1].replace(",-7.00,0.00,-7.00,", ",-7.0.0,0.00,-7.00,")
    status, report = await reconcile_files(world, *files(tmp_path, *lines))
    assert status == 2
    assert report == {
        "ok": False,
        "error": {
            "source": "statement",
            "detail": "statement line 3: balance.csv: '-7.0.0' is not a decimal amount such as"
            " -12.50",
        },
    }
    runs = await world.pool.fetch("SELECT status FROM reconciliation_runs")
    assert [r["status"] for r in runs] == ["failed"]
    assert await world.pool.fetchval("SELECT count(*) FROM reconciliation_rail_staging") == 0


async def test_a_file_that_is_neither_report_exits_2_and_starts_no_run(
    world: World, tmp_path: Path
) -> None:
    balance, paid_out = files(tmp_path, *(await transfer_lines(world)).values())
    text = balance.read_text().replace(",transfer_metadata[settlement_id]", "", 1)
    balance.write_text(text)
    status, report = await reconcile_files(world, balance, paid_out)
    assert status == 2
    assert report["error"]["source"] == "statement"
    assert "balance.csv lacks transfer_metadata[settlement_id]: ask" in report["error"]["detail"]
    assert await world.pool.fetchval("SELECT count(*) FROM reconciliation_runs") == 0
