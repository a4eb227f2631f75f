"""One reconciliation of the SEPA rail's bank account: the ledger's SEPA settlements against
the bank's statements and notifications (bank_source.py), through the same comparison,
breaks and records as a run against Stripe, plus the statements' own gaps. A transfer the
bank is not due to book before a day no statement has closed yet is pending, not missing.

Each charge on the statements is booked to the platform's rail fees account, once.
A gap found is stored as a `statement_gap` break; one stored before that the statements now
read no longer show (the missing statement arrived) is healed, audited as the reconciler's.
A break the statements no longer show (the debit appeared, the return was booked) is healed
as in any run; nothing is applied to the ledger here: the bank's reports are applied by the
inbox as they arrive, and a status the statements prove but the ledger lacks stays a break
until the inbox applies it or an operator resolves it.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from services.domain.breaks import BreakStatus, BreakType
from services.platform.clock import Clock, utc_now
from services.reconcile import store
from services.reconcile.bank_source import BankStatements
from services.reconcile.closing import close_break
from services.reconcile.engine import reconcile
from services.reconcile.outcome import Outcome
from services.settlement.rail_charges import book_charges

ACTOR = "reconciler"
FILLED = "the missing statement arrived: the statements follow each other again"


async def reconcile_bank(
    pool: asyncpg.Pool,
    statements: BankStatements,
    *,
    grace: int,
    heal: bool = True,
    clock: Clock = utc_now,
    actor: str = ACTOR,
) -> Outcome:
    """Compare the SEPA settlements with `statements` and record the gaps between them. Only
    a reading of the bank itself, unless `heal` is False, heals breaks (audited under
    `actor`) and books charges: a file from anywhere may be another account's, or one day of
    many."""
    changes = heal and statements.live
    outcome = await reconcile(
        pool,
        statements,
        statements.window(clock()),
        grace=grace,
        clock=clock,
        heal=changes,
        booked_through=statements.booked_through(),
        actor=actor,
    )
    if outcome.error is not None:
        return outcome
    gaps = statements.gaps()
    now = clock()
    await store.upsert_breaks(pool, outcome.run_id, gaps, now)
    outcome.breaks += gaps
    found = {store.stored_key(g) for g in gaps}
    outcome.stored |= await store.break_statuses(pool, sorted(found))
    if changes:
        statements.tally.charges_booked = await book_charges(pool, statements.charges, now=now)
        outcome.healed += await _heal_filled_gaps(pool, statements, found, now, actor)
    return outcome


async def _heal_filled_gaps(
    pool: asyncpg.Pool, statements: BankStatements, found: set[str], now: datetime, actor: str
) -> int:
    """Heal the open gaps of the statements' accounts that they no longer show."""
    healed = 0
    accounts = {f"statement:{st.account_iban}:" for st in statements.statements}
    for stored in await store.open_breaks(pool, break_type=BreakType.STATEMENT_GAP):
        if stored.break_key in found or not (stored.rail_object_id or "").startswith(
            tuple(accounts)
        ):
            continue
        async with pool.acquire() as conn:
            await close_break(
                conn, stored.id, BreakStatus.HEALED, actor=actor, reason=FILLED, now=now
            )
        healed += 1
    return healed
