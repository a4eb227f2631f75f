"""`settle reconcile --rail sepa [--statement FILE]`: the SEPA rail's bank account against the
ledger: every camt.053 statement the bank has delivered (and its camt.054 notifications of the
days past the last statement), or one camt.053 file (001.02 or 001.08) from anywhere. Its JSON
says, per source, how many statements, notifications, entries and transactions it read, the
charges (and how many this run booked), and the balances it found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.platform.service_settings import Settings

BANK_SECONDS = 30.0


async def run_bank(
    settings: Settings,
    statement: Path | None,
    grace: int,
    *,
    read_only: bool,
    lineage: bool,
    actor: str,
) -> tuple[Any, dict[Any, Any], dict[str, Any]]:
    """One run of the SEPA rail: its outcome, the lineage of its breaks, what was read. It
    heals (audited under `actor`) and books the bank's charges only reading the bank itself,
    and not `read_only`."""
    from services.adapters.postgres.database import create_pool
    from services.adapters.sepa.bank import Bank
    from services.reconcile import store
    from services.reconcile.bank_run import reconcile_bank
    from services.reconcile.bank_source import BankStatements
    from services.reconcile.lineage import lineage_of

    if statement is not None:
        statements = BankStatements.open(statement)
    else:
        bank = Bank(settings.sepa_bank_url, timeout=BANK_SECONDS)
        try:
            statements = await BankStatements.from_bank(bank)
        finally:
            await bank.aclose()
    pool = await create_pool(settings, max_size=2)
    try:
        outcome = await reconcile_bank(
            pool, statements, grace=grace, heal=not read_only, actor=actor
        )
        reported = [store.stored_key(b) for b in outcome.report().breaks] if lineage else []
        tally = statements.tally
        read = {
            statements.source: {
                "statements": tally.statements,
                "notifications": tally.notifications,
                "entries": tally.entries,
                "transactions": tally.transactions,
                "transfers_debited": len(statements.objects),
                "charges": tally.charges,
                "charges_booked": tally.charges_booked,
                "balances": tally.balances,
            }
        }
        return outcome, await lineage_of(pool, reported), read
    finally:
        await pool.close()
