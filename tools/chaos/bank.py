"""The SEPA rail's part of a chaos run (`settle chaos --rails sepa` or `sim,sepa`): the
settings the checks read the bank with, the bank's days passed at the end so that every
return and every held statement comes in, and the last reconciliation of the bank account.

After the batch is final, the bank simulator is moved on `DAYS_AFTER` business days (more
than its latest return and its longest-held statement), and the run waits until the inbox
has stored and read every report the bank delivered; then the check judges, and one last
reconciliation against every statement must find nothing open: no debit without its
settlement, none twice, no statement missing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx

from services.adapters.postgres.database import create_pool
from services.adapters.sepa.bank import Bank
from services.domain.reconciliation import RunStatus
from services.platform.service_settings import Settings
from services.reconcile.bank_run import reconcile_bank
from services.reconcile.bank_source import BankStatements

DAYS_AFTER = 7  # business days: the chaos profile returns within 5 and holds statements 3
READ_TIMEOUT_S = 120.0
BANK_SECONDS = 30.0
POLL_S = 1.0
UNREAD = """
SELECT (SELECT count(*) FROM bank_reports WHERE status = 'stored')
     + (SELECT count(*) FROM inbox_events
         WHERE rail = 'sepa' AND status IN ('received', 'parked'))
"""
READ_UP_TO = "SELECT position FROM bank_cursors WHERE rail = 'sepa' AND listing = 'reports'"


async def bank_days_pass(settings: Settings, bank_url: str, say: Callable[[str], None]) -> None:
    """Move the bank on DAYS_AFTER business days, then wait until the inbox has read all it
    delivered (or READ_TIMEOUT_S passes)."""
    async with httpx.AsyncClient(base_url=bank_url, timeout=BANK_SECONDS) as client:
        answer = await client.post("/_control/advance", json={"days": DAYS_AFTER})
        answer.raise_for_status()
    delivered_up_to = await _last_delivered(bank_url)
    say(f"bank moved on {DAYS_AFTER} business days; waiting for the inbox to read its reports")
    pool = await create_pool(settings, max_size=1)
    try:
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            read_up_to = await pool.fetchval(READ_UP_TO)
            unread = await pool.fetchval(UNREAD)
            if read_up_to == delivered_up_to and unread == 0:
                return
            await asyncio.sleep(POLL_S)
        say("[yellow]the inbox had not read every bank report in time[/]")
    finally:
        await pool.close()


async def _last_delivered(bank_url: str) -> str | None:
    """The cursor past the last report the bank delivered, as the inbox's cursor stands once it
    has fetched them all (None: the bank delivered none)."""
    bank = Bank(bank_url, timeout=BANK_SECONDS)
    last: str | None = None
    try:
        async for page in bank.listing_pages("reports"):
            last = page.next
    finally:
        await bank.aclose()
    return last


async def bank_verdict(settings: Settings) -> dict[str, Any]:
    """One last reconciliation of the bank account against every statement it issued."""
    bank = Bank(settings.sepa_bank_url, timeout=BANK_SECONDS)
    try:
        statements = await BankStatements.from_bank(bank)
    finally:
        await bank.aclose()
    pool = await create_pool(settings, max_size=2)
    try:
        final = await reconcile_bank(pool, statements, grace=0)
    finally:
        await pool.close()
    tally = statements.tally
    return {
        "statements": tally.statements,
        "entries": tally.entries,
        "transfers_debited": len(statements.objects),
        "final_run": {
            "run_id": final.run_id,
            "status": final.status.value,
            "open_breaks": final.open_breaks,
            "breaks": sorted({b.break_type.value for b in final.breaks}),
            "pending": len(final.pending),
            "error": final.error,
        },
        "ok": final.status is RunStatus.COMPLETED and final.open_breaks == 0 and not final.pending,
    }
