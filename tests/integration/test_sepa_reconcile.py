"""The SEPA rail's bank account reconciled against the bank simulator's camt.053 statements,
on the real PostgreSQL: paid, rejected and returned settlements agree with the statements; a
debit no settlement explains is unknown_at_rail under its EndToEndId, the same transfer in a
second file duplicate_at_rail; a statement held back is a statement_gap that heals when it
arrives; `settle reconcile --rail sepa --statement FILE --json` reads a file from anywhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from banksim.payment_files import Transfer, one_transfer_file
from services.adapters.sepa.bank import Bank
from services.adapters.sepa.pain001 import CreditTransfer, Debtor, build_pain001
from services.domain.breaks import BreakType
from services.domain.sepa import end_to_end_id
from services.inbox.bank_poller import BankReportPoller
from services.inbox.metrics import create_metrics as inbox_metrics
from services.inbox.worker import InboxWorker, RetryPolicy
from services.reconcile import ledger_source
from services.reconcile.bank_run import reconcile_bank
from services.reconcile.bank_source import BankStatements
from services.relay.bank_files import FileDispatcher, FilePolicy
from services.relay.metrics import create_metrics
from services.relay.policy import DispatchPolicy
from tests.bank_process import running_bank
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.test_sepa_bank_loop import accept

pytestmark = [pytest.mark.integration, pytest.mark.money]

FAST = DispatchPolicy(backoff_base=0.0, lease_seconds=30.0, call_seconds=5.0)
DEBTOR = Debtor("settle platform", "DE89370400440532013000")
POLICY = FilePolicy(DEBTOR)
FIXTURE = Path(__file__).parent.parent / "fixtures" / "sepa" / "camt.053.001.02.xml"


@pytest.fixture(scope="module")
async def database(infra: Servers) -> AsyncIterator[str]:
    async with scratch_database(infra.database_url, "settle_bankrec_") as url:
        yield url


@pytest.fixture
async def pool(database: str) -> AsyncIterator[asyncpg.Pool]:
    pool = await asyncpg.create_pool(asyncpg_dsn(database), min_size=1, max_size=6)
    yield pool
    await pool.close()


@pytest.fixture
def bank_url(tmp_path: Path) -> AsyncIterator[str]:
    with running_bank(tmp_path, "--day-seconds", "3600", "--start-date", "2026-12-01") as url:
        yield url


@pytest.fixture
async def own_books(
    infra: Servers, bank_url: str
) -> AsyncIterator[tuple[asyncpg.Pool, Bank, httpx.AsyncClient]]:
    """A database of the test's own, a bank simulator, and its control interface."""
    async with scratch_database(infra.database_url, "settle_bankown_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
        bank = Bank(bank_url, timeout=5.0)
        control = httpx.AsyncClient(base_url=bank_url)
        try:
            yield pool, bank, control
        finally:
            await control.aclose()
            await bank.aclose()
            await pool.close()


async def pay_and_apply(
    pool: asyncpg.Pool, bank: Bank, references: list[str], policy: FilePolicy = POLICY
) -> list[str]:
    """Settlements paid through the bank in one file; their ids."""

    async def bank_time() -> datetime:
        return (await bank.clock()).time

    sids = await accept(pool, references)
    files = FileDispatcher(pool, bank, create_metrics(), unique("w"), policy, bank_time, FAST)
    assert await files.build() is not None
    assert await files.upload_due() == 1
    return sids


async def catch_up(pool: asyncpg.Pool, bank: Bank) -> None:
    worker = InboxWorker(pool, inbox_metrics(), RetryPolicy(3, 0.1, 1.0))
    await BankReportPoller(pool, bank).poll()
    await worker.drain()


def types(outcome: object) -> dict[BreakType, set[str | None]]:
    found: dict[BreakType, set[str | None]] = {}
    for b in outcome.report().breaks:  # type: ignore[attr-defined]
        found.setdefault(b.break_type, set()).add(b.rail_object_id)
    return found


async def test_the_statements_agree_then_a_second_file_and_a_gap_are_breaks_a_foreign_debit_not(
    pool: asyncpg.Pool, bank_url: str
) -> None:
    bank = Bank(bank_url, timeout=5.0)
    control = httpx.AsyncClient(base_url=bank_url)
    try:
        sids = await pay_and_apply(pool, bank, [unique("p-"), "reject:AC04", "return:AC06:1"])
        await control.post("/_control/advance", json={"days": 2})
        await catch_up(pool, bank)
        clean = await reconcile_bank(pool, await BankStatements.from_bank(bank), grace=0)
        assert clean.open_breaks == 0, clean.report()

        # Money another system moved from the account, and our transfer paid twice.
        foreign = "FOREIGN-E2E-1"
        await control.post(
            "/v1/files", content=one_transfer_file("OTHER-SYSTEM-1", Transfer(foreign))
        )
        twice = CreditTransfer(
            end_to_end_id(sids[0]),
            4_200,
            "Jeanne Dupont",
            "FR1420041010050500013M02606",
            "again",
            (await bank.clock()).business_date,
        )
        again = build_pain001(DEBTOR, [twice], batch_booking=False, created_at=datetime.now(UTC))
        assert (await control.post("/v1/files", content=again.data)).status_code == 201
        await control.post("/_control/advance", json={"days": 1})  # their day's statement
        # The next day's statement is held back: the one after it shows a gap.
        await control.post("/_control/faults", json={"statement_missing": 1})
        await control.post("/_control/advance", json={"days": 1})
        await control.post("/_control/faults", json={"statement_missing": 0})
        await control.post("/_control/advance", json={"days": 1})
        broken = await reconcile_bank(pool, await BankStatements.from_bank(bank), grace=0)
        found = types(broken)
        # Another system's debit is no break of settle's: counted and listed out of scope.
        assert BreakType.UNKNOWN_AT_RAIL not in found
        assert foreign in {o.object_id for o in broken.foreign_listed}
        assert BreakType.DUPLICATE_AT_RAIL in found
        assert BreakType.STATEMENT_GAP in found

        # The held statement arrives: the gap heals, the other breaks stay for an operator.
        await control.post("/_control/advance", json={"days": 3})
        healed = await reconcile_bank(pool, await BankStatements.from_bank(bank), grace=0)
        assert BreakType.STATEMENT_GAP not in types(healed)
        assert healed.healed >= 1
        gaps = await pool.fetch(
            "SELECT status, resolved_by FROM reconciliation_breaks WHERE break_type = $1",
            "statement_gap",
        )
        assert gaps and {(g["status"], g["resolved_by"]) for g in gaps} == {
            ("healed", "reconciler")
        }
        assert BreakType.DUPLICATE_AT_RAIL in types(healed)
    finally:
        await control.aclose()
        await bank.aclose()


async def test_a_transfer_due_after_the_last_statement_is_pending_then_agrees(
    own_books: tuple[asyncpg.Pool, Bank, httpx.AsyncClient],
) -> None:
    pool, bank, control = own_books
    await pay_and_apply(pool, bank, [unique("p-")])  # paid on Tuesday
    await control.post("/_control/advance", json={"days": 1})  # Tuesday's statement
    await catch_up(pool, bank)
    past_cutoff = FilePolicy(DEBTOR, cutoff=time(0, 0))  # due the next business day
    (sid,) = await pay_and_apply(pool, bank, [unique("p-")], past_cutoff)
    (record,) = await ledger_source.by_ids(pool, [sid], ("sepa",))
    assert record.due_on == date(2026, 12, 3)

    # Sent past any grace period (0), but due after Tuesday, the last statement's day.
    early = await reconcile_bank(pool, await BankStatements.from_bank(bank), grace=0)
    assert early.open_breaks == 0, early.report()
    assert [(p.settlement_id, p.would_be) for p in early.pending] == [
        (sid, BreakType.MISSING_AT_RAIL)
    ]

    await control.post("/_control/advance", json={"days": 2})  # booked on Thursday
    await catch_up(pool, bank)
    booked = await reconcile_bank(pool, await BankStatements.from_bank(bank), grace=0)
    assert (booked.open_breaks, booked.pending) == (0, []), booked.report()


def reconcile_file(database: str) -> dict[str, Any]:
    env = {**os.environ, "SETTLE_DATABASE_URL": database}
    settle = Path(sys.executable).parent / "settle"
    done = subprocess.run(
        [str(settle), "reconcile", "--rail", "sepa", "--statement", str(FIXTURE), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stderr  # open breaks
    return dict(json.loads(done.stdout))


async def test_a_camt053_file_from_anywhere_is_read_its_foreign_debits_named_nothing_booked(
    database: str, pool: asyncpg.Pool
) -> None:
    run = reconcile_file(database)
    unknown = [b for b in run["breaks"] if b["type"] == "unknown_at_rail"]
    assert [b["rail_object_id"] for b in unknown] == ["018f3c2a7b4e7c1d9a2b3c4d5e6f7086"]
    (read,) = run["read"].values()
    assert (read["statements"], read["entries"], read["transfers_debited"]) == (1, 3, 1)
    assert {"opening", "closing", "electronic_sequence"} <= read["balances"][0].keys()
    # Its charge is counted, not booked: a file from anywhere may be another account's.
    assert (read["charges"], read["charges_booked"]) == (50, 0)
    assert await pool.fetchval("SELECT count(*) FROM rail_charges") == 0


async def test_the_banks_charges_are_booked_to_the_fee_account_once(
    own_books: tuple[asyncpg.Pool, Bank, httpx.AsyncClient],
) -> None:
    pool, bank, control = own_books
    await control.post("/_control/faults", json={"charge": 1.0, "charge_minor": 35})
    await pay_and_apply(pool, bank, [unique("p-"), unique("p-")])
    await control.post("/_control/advance", json={"days": 1})
    await catch_up(pool, bank)
    read_only = await BankStatements.from_bank(bank)
    await reconcile_bank(pool, read_only, grace=0, heal=False)
    assert read_only.tally.charges_booked == 0
    first = await BankStatements.from_bank(bank)
    await reconcile_bank(pool, first, grace=0)
    again = await BankStatements.from_bank(bank)
    await reconcile_bank(pool, again, grace=0)
    assert (first.tally.charges_booked, again.tally.charges_booked) == (2, 0)
    fees = await pool.fetch(
        "SELECT p.account_id, sum(p.amount) AS total FROM rail_charges c"
        " JOIN postings p ON p.entry_id = c.entry_id GROUP BY 1 ORDER BY 1"
    )
    assert [(f["account_id"], f["total"]) for f in fees] == [
        ("platform:funding:EUR", -70),
        ("platform:rail_fees:EUR", 70),
    ]
    balance = await pool.fetchval(
        "SELECT sum(balance) FROM account_balances WHERE account_id = 'platform:rail_fees:EUR'"
    )
    assert balance == 70
