"""`settle reconcile --statement FILE` on the real PostgreSQL, against the statement the
simulator serves and `settle rail statement` saves: a statement of a run that went well is a
clean run; a line whose amount was edited is an amount_mismatch of its settlement; a paid
transfer's line left out is missing_at_rail; the same file twice gives the same report; a
file that cannot be parsed exits 2 and starts no run.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.integration.check_support import SETTLE, World, template
from tests.integration.test_reconcile_engine import run_status, sources, world

pytestmark = pytest.mark.integration
__all__ = ["template", "world"]


async def settle(world: World, *args: str) -> tuple[int, bytes]:
    """`settle ARGS` on this world's database and simulator: exit status and stdout."""
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


async def saved_statement(world: World, directory: Path) -> Path:
    """Today's statement, saved by `settle rail statement`."""
    today = datetime.now(UTC).date()
    path = directory / "statement.csv"
    status, _ = await settle(
        world,
        "rail",
        "statement",
        "--from",
        today.isoformat(),
        "--to",
        (today + timedelta(days=1)).isoformat(),
        "--out",
        str(path),
    )
    assert status == 0
    return path


async def reconcile_statement(world: World, path: Path) -> tuple[int, dict[str, Any]]:
    """`settle reconcile --json --statement PATH` over today: exit status and report."""
    today = datetime.now(UTC).date().isoformat()
    status, out = await settle(
        world, "reconcile", "--json", "--grace", "0", "--statement", str(path), "--day", today
    )
    return status, json.loads(out)


def edited(path: Path, settlement_id: str, edit: str | None) -> Path:
    """A copy of the statement with the settlement's line replaced by `edit`'s (None: left
    out); `edit` is a format string over the line's fields."""
    lines = path.read_text().splitlines()
    (index,) = [i for i, text in enumerate(lines) if text.endswith(settlement_id)]
    if edit is None:
        del lines[index]
    else:
        lines[index] = edit.format(*lines[index].split(","))
    copy = path.with_name(f"edited-{path.name}")
    copy.write_text("\n".join(lines) + "\n")
    return copy


async def test_the_statement_of_a_run_that_went_well_reconciles_clean(
    world: World, tmp_path: Path
) -> None:
    path = await saved_statement(world, tmp_path)
    header, *lines = path.read_text().splitlines()
    assert header.startswith("balance_transaction_id,created_utc,available_on_utc,currency,gross")
    assert sorted(text.split(",")[4] for text in lines) == ["-7.00", "-7.00"]
    status, report = await reconcile_statement(world, path)
    assert status == 0, report
    assert report["ok"] is True and report["breaks"] == [] and report["pending"] == []
    assert report["window"]["kind"] == "statement"
    assert await run_status(world, report["run_id"]) == "completed"
    recorded = await sources(world, report["run_id"])
    assert recorded == {"ledger": (2, None), "statement:statement.csv": (2, None)}


async def test_a_line_whose_amount_was_edited_is_an_amount_mismatch(
    world: World, tmp_path: Path
) -> None:
    # gross and net (fields 4 and 6) from 7.00 to 7.01: the line still parses
    edit = "{0},{1},{2},{3},-7.01,{5},-7.01,{7},{8},{9},{10},{11}"
    path = edited(await saved_statement(world, tmp_path), world.paid, edit)
    status, report = await reconcile_statement(world, path)
    assert status == 1, report
    (found,) = report["breaks"]
    assert (found["type"], found["settlement_id"]) == ("amount_mismatch", world.paid)
    assert (found["expected"], found["actual"], found["reason"]) == (700, 701, "amount:+1")
    assert found["rail_object_id"].startswith("tr_")


async def test_a_paid_transfer_left_out_of_the_statement_is_missing_at_rail(
    world: World, tmp_path: Path
) -> None:
    path = edited(await saved_statement(world, tmp_path), world.paid, None)
    status, report = await reconcile_statement(world, path)
    assert status == 1, report
    assert [(b["type"], b["settlement_id"], b["rail_object_id"]) for b in report["breaks"]] == [
        ("missing_at_rail", world.paid, None)
    ]
    recorded = await sources(world, report["run_id"])
    assert recorded["statement:edited-statement.csv"] == (1, None)


async def test_the_same_file_twice_gives_the_same_report_byte_for_byte(
    world: World, tmp_path: Path
) -> None:
    edit = "{0},{1},{2},{3},-9.00,{5},-9.00,{7},{8},{9},acct_other,{11}"
    path = edited(await saved_statement(world, tmp_path), world.paid, edit)
    first_status, first = await reconcile_statement(world, path)
    second_status, second = await reconcile_statement(world, path)
    assert (first_status, second_status) == (1, 1)
    assert first.pop("run_id") != second.pop("run_id")
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert [b["type"] for b in first["breaks"]] == ["amount_mismatch", "destination_mismatch"]


async def test_a_statement_that_cannot_be_parsed_exits_2_and_starts_no_run(
    world: World, tmp_path: Path
) -> None:
    edit = "{0},{1},{2},{3},-7.0.0,{5},{6},{7},{8},{9},{10},{11}"
    path = edited(await saved_statement(world, tmp_path), world.paid, edit)
    status, report = await reconcile_statement(world, path)
    assert status == 2
    assert report["ok"] is False and report["error"]["source"] == "statement"
    assert "statement line" in report["error"]["detail"]
    assert await world.pool.fetchval("SELECT count(*) FROM reconciliation_runs") == 0
