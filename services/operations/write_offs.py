"""The books corrected from a break by a platform entry: a write-off or an adjustment.

    write_off  the break's own amount, signed by its type (services/domain/break_work.py),
               between the platform's funding and its write_offs account; the break
               resolved as `write_off`
    adjust     the operator's amount between the platform's funding and the platform
               account they name (rail_fees, write_offs, suspense); the break stays open

Each is one transaction: the break locked, the entry booked, the break's status change (its
own audit row, `break.resolve`) and the action's audit row naming the entry, all or nothing.
The entry belongs to no settlement, so a settlement's postings still say only where its own
money is.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.break_work import (
    BreakAction,
    Direction,
    adjust_postings,
    check_applies,
    ledger_sent,
    write_off_loss,
    write_off_postings,
)
from services.domain.breaks import ResolutionKind
from services.domain.postings import PlatformAccount, Posting
from services.domain.settlement import SettlementStatus
from services.operations.action_base import Operator
from services.operations.audit import record_action
from services.operations.break_rules import facts_of, obeying
from services.operations.breaks import BreakView, close_as, locked_break, view_document
from services.operations.errors import Refused
from services.operations.platform_entries import book_platform_entry, postings_document
from services.reconcile.store import StoredBreak

WRITE_OFF_ENTRY, ADJUST_ENTRY = "write_off", "adjustment"
WRONG_CURRENCY = "wrong_currency"
DOWN = "PostgreSQL is unreachable; nothing was booked"
SETTLEMENT = "SELECT status, amount, amount_reversed FROM settlements WHERE id = $1 FOR SHARE"


class Adjustment(NamedTuple):
    """What an operator's adjustment books, as its request was read."""

    account: PlatformAccount
    direction: Direction
    amount: int  # minor units, positive
    currency: str


async def write_off(conn: asyncpg.Connection, break_id: str, by: Operator) -> dict[str, Any]:
    """Write off an open break's amount and resolve it, audited; Refused (`no_amount`,
    `break_closed`) or NotFound change nothing."""
    with unavailable_when_down(DOWN):
        async with conn.transaction():
            view = await locked_break(conn, break_id)
            sent = await _sent(conn, view.item)
            with obeying():
                loss = write_off_loss(facts_of(view.item), view.difference, sent)
            postings = write_off_postings(loss, str(view.item.currency))
            closed = await close_as(
                conn,
                break_id,
                ResolutionKind.WRITE_OFF,
                reason=by.reason,
                operator=by.name,
                now=by.now,
                approver=by.approver,
            )
            entry = await book_platform_entry(conn, WRITE_OFF_ENTRY, postings, by.now)
            await _audit(conn, BreakAction.WRITE_OFF, closed, entry, postings, by)
    return _answer(closed, entry, WRITE_OFF_ENTRY, postings, by.now)


async def adjust(
    conn: asyncpg.Connection, break_id: str, asked: Adjustment, by: Operator
) -> dict[str, Any]:
    """Book the operator's adjustment against an open break, audited; Refused
    (`break_closed`, `wrong_currency`) or NotFound change nothing."""
    with unavailable_when_down(DOWN):
        async with conn.transaction():
            view = await locked_break(conn, break_id)
            with obeying():
                check_applies(BreakAction.ADJUST, facts_of(view.item))
            if view.item.currency not in (None, asked.currency):
                raise Refused(
                    f"break {break_id} is in {view.item.currency}, not {asked.currency}",
                    code=WRONG_CURRENCY,
                    field="currency",
                )
            postings = adjust_postings(asked.account, asked.direction, asked.amount, asked.currency)
            entry = await book_platform_entry(conn, ADJUST_ENTRY, postings, by.now)
            await _audit(conn, BreakAction.ADJUST, view, entry, postings, by)
    return _answer(view, entry, ADJUST_ENTRY, postings, by.now)


async def _sent(conn: asyncpg.Connection, item: StoredBreak) -> int | None:
    """What the ledger says the break's settlement paid out, if it names one."""
    if item.settlement_id is None:
        return None
    row = await conn.fetchrow(SETTLEMENT, uuid.UUID(item.settlement_id))
    if row is None:
        return None
    return ledger_sent(SettlementStatus(row["status"]), row["amount"], row["amount_reversed"])


async def _audit(
    conn: asyncpg.Connection,
    action: BreakAction,
    after: BreakView,
    entry: uuid.UUID,
    postings: list[Posting],
    by: Operator,
) -> int:
    return await record_action(
        conn,
        actor=by.name,
        action=action.value,
        target=f"break:{after.item.id}",
        detail={
            "entry_id": str(entry),
            "postings": postings_document(postings),
            "reason": by.reason,
            "break_type": after.item.break_type.value,
        },
        before={"status": "open"},
        after={
            "status": after.item.status.value,
            "resolution_kind": after.resolution_kind and after.resolution_kind.value,
        },
        now=by.now,
        approved_by=by.approver,
    )


def _answer(
    view: BreakView, entry: uuid.UUID, kind: str, postings: list[Posting], now: datetime
) -> dict[str, Any]:
    return {
        "break": view_document(view, now),
        "entry": {"id": str(entry), "kind": kind, "postings": postings_document(postings)},
    }
