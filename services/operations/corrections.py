"""A settlement put right from a reconciliation break, when the rail agrees at that moment.

    correct  the break's settlement moved, by a new step of the settlement state machine, to
             where the rail shows it is (`"as"`: reversed, failed or paid): a paid
             settlement whose money never left is reversed, never rewritten
    match    the break's unknown rail object recorded as a settlement's rail reference

The rail is asked first, the way a review resolution asks it (services/operations/rail_lookup.py).
Then, in one transaction: the break locked, the settlement locked through the one guarded
write path (`TransitionBatch`, with its postings and event), the decision taken on the rows
as locked (services/operations/verdict.py), the break resolved (its own audit row) and the
action's audit row: all of it or, when refused, nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.break_work import (
    ILLEGAL_CORRECTION,
    BreakAction,
    Correction,
    check_applies,
    correction_target,
)
from services.domain.breaks import ResolutionKind
from services.domain.instruction import InstructionStatus
from services.domain.reconciliation import RailObject
from services.domain.settlement import SettlementStatus
from services.operations import review
from services.operations.action_base import Operator
from services.operations.audit import record_action
from services.operations.break_rules import facts_of, obeying
from services.operations.breaks import BreakView, close_as, locked_break, show_break, view_document
from services.operations.errors import Refused
from services.operations.rail_lookup import RailLookup
from services.operations.verdict import correct_verdict, match_verdict, reference_free
from services.settlement.transition_rows import LockedSettlement
from services.settlement.transitions import TransitionBatch

OBJECT_CLAIMED = "object_claimed"
DOWN = "PostgreSQL is unreachable; nothing was corrected"
CLAIMED = "SELECT id FROM settlements WHERE rail_reference = $1 AND id <> $2 LIMIT 1"


async def correct(
    conn: asyncpg.Connection,
    rail: RailLookup,
    break_id: str,
    correction: Correction,
    by: Operator,
) -> dict[str, Any]:
    """Move the break's settlement to `correction` if the state machine allows it and the
    rail agrees now, and resolve the break, audited; Refused, NotFound or RailUnavailable
    change nothing."""
    view = await show_break(conn, break_id)
    with obeying():
        check_applies(BreakAction.CORRECT, facts_of(view.item))
    row = await review.settlement_row(conn, str(view.item.settlement_id))
    with obeying():  # refused before the rail is asked when the rows alone refuse it
        correction_target(SettlementStatus(row["status"]), correction)
    known = {row["rail_reference"], row["instruction_reference"], view.item.rail_object_id}
    objects = await rail.objects_for(
        review.instruction_of(row), {k for k in known if k}, row["instruction_created_at"]
    )
    with unavailable_when_down(DOWN):
        async with conn.transaction():
            locked, batch, instruction = await _locked(conn, break_id, BreakAction.CORRECT, row)
            with obeying():
                target = correction_target(locked.status, correction)
            item = review.under_review(row, locked.status, instruction)
            reference = correct_verdict(item, target, objects)
            before = _snapshot(locked)
            moved = batch.move(
                locked.id, target, actor=by.name, reason=by.reason, rail_reference=reference
            )
            if moved is None:
                raise Refused(
                    f"settlement {locked.id} cannot go to {target}", code=ILLEGAL_CORRECTION
                )
            await batch.write(conn, by.now)
            closed = await close_as(conn, break_id, ResolutionKind.CORRECT, **_closing(by))
            detail = {"as": correction.value, "postings": [p._asdict() for p in moved.postings]}
            await _audit(conn, BreakAction.CORRECT, closed, objects, detail, before, locked, by)
    return _answer(closed, locked, by)


async def match(
    conn: asyncpg.Connection,
    rail: RailLookup,
    break_id: str,
    settlement_id: str,
    by: Operator,
) -> dict[str, Any]:
    """Record the break's rail object as the settlement's rail reference, if the rail shows it
    of the settlement's amount and currency now, and resolve the break, audited; Refused,
    NotFound or RailUnavailable change nothing."""
    view = await show_break(conn, break_id)
    with obeying():
        check_applies(BreakAction.MATCH, facts_of(view.item))
    object_id = str(view.item.rail_object_id)
    row = await review.settlement_row(conn, settlement_id)
    # Refused before the rail is asked when the settlement has another reference already.
    reference_free(str(row["id"]), row["rail_reference"], object_id)
    objects = await rail.objects_for(
        review.instruction_of(row), {object_id}, row["instruction_created_at"]
    )
    with unavailable_when_down(DOWN):
        async with conn.transaction():
            locked, batch, instruction = await _locked(conn, break_id, BreakAction.MATCH, row)
            claimed = await conn.fetchval(CLAIMED, object_id, locked.id)
            if claimed is not None:
                raise Refused(
                    f"{object_id} is settlement {claimed}'s rail reference", code=OBJECT_CLAIMED
                )
            item = review.under_review(row, locked.status, instruction)
            match_verdict(item, locked.rail_reference, object_id, objects)
            before = _snapshot(locked)
            recorded = batch.record_rail_reference(locked.id, object_id, actor=by.name)
            await batch.write(conn, by.now)
            closed = await close_as(conn, break_id, ResolutionKind.MATCH, **_closing(by))
            detail = {"rail_object_id": object_id, "recorded": recorded is not None}
            await _audit(conn, BreakAction.MATCH, closed, objects, detail, before, locked, by)
    return _answer(closed, locked, by)


async def _locked(
    conn: asyncpg.Connection, break_id: str, action: BreakAction, row: asyncpg.Record
) -> tuple[LockedSettlement, TransitionBatch, InstructionStatus]:
    """The break (still taking `action`), its settlement and the settlement's instruction,
    locked in that order until the transaction ends."""
    view = await locked_break(conn, break_id)
    with obeying():
        check_applies(action, facts_of(view.item))
    batch = await TransitionBatch.lock(conn, [row["id"]])
    instruction = InstructionStatus(await conn.fetchval(review.LOCK_INSTRUCTION, row["id"]))
    return batch.settlements[row["id"]], batch, instruction


def _closing(by: Operator) -> dict[str, Any]:
    return {"reason": by.reason, "operator": by.name, "now": by.now, "approver": by.approver}


def _snapshot(locked: LockedSettlement) -> dict[str, object]:
    """A settlement as the audit row records it, before or after."""
    return {
        "settlement_id": str(locked.id),
        "status": str(locked.status),
        "version": locked.version,
        "rail_reference": locked.rail_reference,
    }


async def _audit(
    conn: asyncpg.Connection,
    action: BreakAction,
    closed: BreakView,
    objects: Sequence[RailObject],
    detail: dict[str, Any],
    before: dict[str, object],
    locked: LockedSettlement,
    by: Operator,
) -> int:
    return await record_action(
        conn,
        actor=by.name,
        action=action.value,
        target=f"break:{closed.item.id}",
        detail={
            **detail,
            "reason": by.reason,
            "settlement_id": str(locked.id),
            "rail_objects": sorted(o.object_id for o in objects),
        },
        before={**before, "break_status": "open"},
        after={**_snapshot(locked), "break_status": closed.item.status.value},
        now=by.now,
        approved_by=by.approver,
    )


def _answer(closed: BreakView, locked: LockedSettlement, by: Operator) -> dict[str, Any]:
    return {"break": view_document(closed, by.now), "settlement": _snapshot(locked)}
