"""The SEPA rail end to end against the bank simulator, on the real PostgreSQL: files built,
stored and uploaded by the relay's file dispatcher, reports fetched and stored first by the
inbox's poller, then applied by the inbox's worker. A booked transfer ends paid, a rejected
one failed with its ISO reason, a returned one reversed with its reason three business days
later; each is debited at the bank once, through lost upload answers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import asyncpg
import httpx
import pytest

from services.adapters.sepa.bank import Bank
from services.adapters.sepa.camt053 import closing_balance_agrees, read_camt053
from services.adapters.sepa.pain001 import Debtor
from services.adapters.sepa.pain001_read import read_pain001
from services.adapters.sepa.xsd import check_schema
from services.domain.sepa import end_to_end_id
from services.inbox.bank_poller import BankReportPoller
from services.inbox.metrics import create_metrics as inbox_metrics
from services.inbox.worker import InboxWorker, RetryPolicy
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.intake import parse_settlement_body
from services.relay.bank_files import FileDispatcher, FilePolicy
from services.relay.metrics import create_metrics
from services.relay.policy import DispatchPolicy
from tests.bank_process import running_bank
from tests.conftest import asyncpg_dsn, scratch_database, unique
from tests.harness import Servers
from tests.integration.test_ledger_books import WINDOWS

pytestmark = [pytest.mark.integration, pytest.mark.money]

FAST = DispatchPolicy(backoff_base=0.0, lease_seconds=30.0, call_seconds=5.0)
DEBTOR = Debtor("settle platform", "DE89370400440532013000")
IBAN = "FR1420041010050500013M02606"


@pytest.fixture(scope="module")
async def pool(infra: Servers) -> AsyncIterator[asyncpg.Pool]:
    async with scratch_database(infra.database_url, "settle_bank_") as url:
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=6)
        yield pool
        await pool.close()


@pytest.fixture
def bank_url(tmp_path: Path) -> AsyncIterator[str]:
    # A business day of an hour: the test moves the days on itself.
    with running_bank(tmp_path, "--day-seconds", "3600", "--start-date", "2026-12-01") as url:
        yield url


async def accept(pool: asyncpg.Pool, references: list[str]) -> list[str]:
    tenant = unique("t")
    requests = [
        parse_settlement_body(
            tenant,
            unique("key-"),
            json.dumps(
                {
                    "reference": reference,
                    "payee": "Jeanne Dupont",
                    "destination": IBAN,
                    "amount": 4_200,
                    "currency": "EUR",
                    "rail": "sepa",
                }
            ).encode(),
        )
        for reference in references
    ]
    results = await Ledger(pool, Books(WINDOWS)).accept_many(requests)
    return [str(json.loads(r.body)["id"]) for r in results]


async def statuses(pool: asyncpg.Pool, sids: list[str]) -> list[tuple[str, str | None]]:
    rows = await pool.fetch(
        "SELECT id::text AS sid, status, reason FROM settlements WHERE id = ANY($1::uuid[])",
        sids,
    )
    by_id = {r["sid"]: (r["status"], r["reason"]) for r in rows}
    return [by_id[sid] for sid in sids]


def saved_as_received(bank_url: str, tmp_path: Path, uploaded: dict[str, bytes]) -> None:
    """`settle rail files` saves each file as uploaded, `settle rail statement --rail sepa`
    every statement, each valid by the camt.053.001.08 XSD and closing at its opening plus
    its entries."""
    env = {**os.environ, "SETTLE_SEPA_BANK_URL": bank_url}
    settle = str(Path(sys.executable).parent / "settle")
    files, statements = tmp_path / "files", tmp_path / "statements"
    for args in (["files", "--out", str(files)], ["statement", "--out", str(statements)]):
        done = subprocess.run(
            [settle, "rail", *args, "--rail", "sepa"], env=env, capture_output=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
    assert {p.stem: p.read_bytes() for p in files.iterdir()} == uploaded
    saved = sorted(statements.iterdir())
    assert saved
    for path in saved:
        check_schema(path.read_bytes())
        for statement in read_camt053(path.read_bytes()).statements:
            assert closing_balance_agrees(statement), path.name


async def test_booked_paid_rejected_failed_and_returned_reversed_each_debited_once(
    pool: asyncpg.Pool, bank_url: str, tmp_path: Path
) -> None:
    bank = Bank(bank_url, timeout=5.0)

    async def bank_time() -> datetime:
        return (await bank.clock()).time

    files = FileDispatcher(
        pool, bank, create_metrics(), unique("w"), FilePolicy(DEBTOR), bank_time, FAST
    )
    worker = InboxWorker(pool, inbox_metrics(), RetryPolicy(3, 0.1, 1.0))
    poller = BankReportPoller(pool, bank, wake=worker.wake)
    control = httpx.AsyncClient(base_url=bank_url)
    try:
        sids = await accept(pool, [unique("pay-"), "reject:AC04", "return:MD07:3"])
        paid, _, returned = sids
        # Every upload's answer is lost: the dispatcher uploads the same file until DU01.
        await control.post("/_control/faults", json={"lost_answer": 1})
        msg_id = await files.build()
        assert msg_id is not None
        assert await files.upload_due() == 1
        await control.post("/_control/faults", json={"lost_answer": 0})
        assert await files.upload_due() == 1  # the same bytes: DU01, the bank has it
        assert await statuses(pool, sids) == [("submitted", None)] * 3

        await control.post("/_control/advance", json={"days": 1})
        assert await poller.poll() > 0
        await worker.drain()
        (paid_now, rejected_now, returned_now) = await statuses(pool, sids)
        assert paid_now[0] == "paid" and returned_now[0] == "paid"
        assert rejected_now[0] == "failed" and "AC04" in (rejected_now[1] or "")

        await control.post("/_control/advance", json={"days": 3})
        await poller.poll()
        await worker.drain()
        (paid_after, _, returned_after) = await statuses(pool, sids)
        assert paid_after[0] == "paid"
        assert returned_after[0] == "reversed" and "MD07" in (returned_after[1] or "")

        effects = (await control.get("/v1/effects")).json()
        assert effects["debits"] == {end_to_end_id(sid): 1 for sid in (paid, returned)}
        received = (await control.get("/v1/files")).json()["files"]
        assert [f["msg_id"] for f in received] == [msg_id]
        uploaded = (await control.get(f"/v1/files/{received[0]['file_id']}")).content
        stored = await pool.fetchval("SELECT content FROM bank_files WHERE msg_id = $1", msg_id)
        assert uploaded == bytes(stored)
        assert {t.end_to_end_id for t in read_pain001(uploaded).transfers} == {
            end_to_end_id(sid) for sid in sids
        }
        kinds = await pool.fetch("SELECT kind, status FROM bank_reports")
        assert {r["status"] for r in kinds} == {"applied"}
        assert {"pain.002", "camt.054", "camt.053"} <= {r["kind"] for r in kinds}
        saved_as_received(bank_url, tmp_path, {msg_id: bytes(stored)})
    finally:
        await control.aclose()
        await bank.aclose()


async def test_a_hostile_or_malformed_report_is_parked_with_its_reason_and_applies_nothing(
    pool: asyncpg.Pool,
) -> None:
    hostile = (
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        b"<Document>&x;</Document>"
    )
    broken = b"<Document><BkToCstmrStmt>"
    ids = [unique("r-"), unique("r-")]
    for report_id, content in zip(ids, (hostile, broken), strict=True):
        await pool.execute(
            "INSERT INTO bank_reports (report_id, rail, kind, msg_id, content, status,"
            " received_at) VALUES ($1, 'sepa', 'camt.053', $1, $2, 'stored', now())",
            report_id,
            content,
        )
    rows_before = await pool.fetchval("SELECT count(*) FROM inbox_events WHERE rail = 'sepa'")
    bank = Bank("http://127.0.0.1:9", timeout=1.0)  # read_stored never calls the bank
    try:
        assert await BankReportPoller(pool, bank).read_stored() == 2
    finally:
        await bank.aclose()
    rows = await pool.fetch(
        "SELECT status, reason FROM bank_reports WHERE report_id = ANY($1) ORDER BY report_id",
        ids,
    )
    assert {r["status"] for r in rows} == {"parked"}
    reasons = " ".join(r["reason"] for r in rows)
    assert "DOCTYPE" in reasons and "not well-formed" in reasons
    rows_after = await pool.fetchval("SELECT count(*) FROM inbox_events WHERE rail = 'sepa'")
    assert rows_after == rows_before
