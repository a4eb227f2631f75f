"""Settlements under review (`needs_review`), listed, shown and resolved by an operator.

A resolution looks the rail up first, then, in one transaction, locks the settlement (the
guarded write path, `TransitionBatch`) and its rail instruction, decides on the rows as
locked (`verdict.decide`), and writes the settlement's step with its postings and event, the
instruction's guarded update and one `operator_actions` row: all of it or, when refused,
nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.instruction import InstructionStatus, Resolution
from services.domain.payout import PayoutMethod
from services.domain.rail import RailInstruction
from services.domain.reconciliation import RailObject
from services.domain.settlement import SettlementStatus
from services.operations.audit import record_action
from services.operations.errors import NotFound, ReasonMissing, Refused
from services.operations.rail_lookup import RailLookup
from services.operations.verdict import Decision, UnderReview, admissible, decide
from services.settlement.transition_rows import LockedSettlement
from services.settlement.transitions import TransitionBatch, TransitionConflict

MAX_PAGE = 200
ACTION = "review.resolve"

COLUMNS = """s.id, s.tenant, s.reference, s.amount, s.currency, s.status, s.reason, s.version,
       s.rail_reference, s.updated_at, r.status AS instruction_status, r.method,
       r.destination, r.idempotency_key, r.attempts, r.error_class,
       r.rail_reference AS instruction_reference, r.created_at AS instruction_created_at"""
# A settlement under review went there by a transition: the settlements ever referred are
# found through `settlement_transitions_into_review` (migration 0015), never by reading every
# settlement's status.
LIST = f"""
SELECT {COLUMNS}
  FROM (SELECT DISTINCT settlement_id FROM settlement_transitions
         WHERE to_status = 'needs_review' AND settlement_id > $1) AS referred
 CROSS JOIN LATERAL (SELECT * FROM settlements
                      WHERE id = referred.settlement_id AND status = 'needs_review' LIMIT 1) s
  JOIN rail_instructions r ON r.settlement_id = s.id
 ORDER BY s.id LIMIT $2
"""
SHOW = f"""
SELECT {COLUMNS} FROM settlements s JOIN rail_instructions r ON r.settlement_id = s.id
 WHERE s.id = $1
"""
LOCK_INSTRUCTION = "SELECT status FROM rail_instructions WHERE settlement_id = $1 FOR UPDATE"
# A re-armed instruction starts a fresh retry budget; an ambiguous mark stays, so its budget's
# end sends it back to review, never to failed.
RESOLVE_INSTRUCTION = """
UPDATE rail_instructions
   SET status = $3, rail_reference = coalesce($4, rail_reference),
       attempts = CASE WHEN $3 = 'pending' THEN 0 ELSE attempts END,
       lease_until = NULL, next_attempt_at = NULL, updated_at = $5
 WHERE settlement_id = $1 AND status = $2
"""


class Resolved(NamedTuple):
    """An accepted resolution, as written."""

    settlement_id: str
    resolution: Resolution
    settlement: SettlementStatus  # the settlement's status after it
    instruction: InstructionStatus  # the instruction's status after it
    rail_reference: str | None  # the rail object a paid resolution adopted
    action_id: int  # its operator_actions row


def review_item(row: asyncpg.Record) -> dict[str, Any]:
    """A settlement and its instruction as the listing and `show` print them."""
    item = dict(row)
    item["id"] = str(row["id"])
    for key in ("updated_at", "instruction_created_at"):
        item[key] = row[key].isoformat()
    return item


def parse_id(text: str) -> uuid.UUID:
    """A settlement id from text; NotFound when it is not a UUID (no such settlement)."""
    try:
        return uuid.UUID(text)
    except ValueError as e:
        raise NotFound(f"no settlement {text!r}: ids are UUIDs") from e


async def list_review(
    conn: asyncpg.Connection | asyncpg.Pool, after: uuid.UUID | None, limit: int
) -> list[dict[str, Any]]:
    """Settlements under review with id above `after`, by id, at most `limit` (capped)."""
    start = after or uuid.UUID(int=0)
    with unavailable_when_down("PostgreSQL is unreachable; nothing was listed"):
        rows = await conn.fetch(LIST, start, min(limit, MAX_PAGE))
    return [review_item(r) for r in rows]


async def show(conn: asyncpg.Connection | asyncpg.Pool, settlement_id: str) -> dict[str, Any]:
    """One settlement with its instruction, whatever its status; NotFound if there is none."""
    return review_item(await settlement_row(conn, settlement_id))


async def settlement_row(
    conn: asyncpg.Connection | asyncpg.Pool, settlement_id: str
) -> asyncpg.Record:
    """One settlement's row of SHOW (with its instruction); NotFound if there is none."""
    with unavailable_when_down("PostgreSQL is unreachable; nothing was read"):
        row = await conn.fetchrow(SHOW, parse_id(settlement_id))
    if row is None:
        raise NotFound(f"no settlement {settlement_id}")
    return row


async def resolve(
    conn: asyncpg.Connection,
    rail: RailLookup,
    settlement_id: str,
    resolution: Resolution,
    *,
    reason: str,
    operator: str,
    now: datetime,
    approver: str | None = None,
) -> Resolved:
    """Resolve a settlement under review as `resolution` if the rail, asked now, agrees
    (`approver`: the second operator who approved `operator`'s proposal, audited with it);
    Refused, NotFound, ReasonMissing or RailUnavailable change nothing."""
    if not reason.strip():
        raise ReasonMissing()
    row = await settlement_row(conn, settlement_id)
    # Refused before the rail is asked when the rows alone refuse it; decided again below on
    # the rows as locked.
    admissible(under_review(row, row["status"], row["instruction_status"]), resolution)
    known = {r for r in (row["rail_reference"], row["instruction_reference"]) if r}
    objects = await rail.objects_for(instruction_of(row), known, row["instruction_created_at"])
    with unavailable_when_down("PostgreSQL is unreachable; nothing was resolved"):
        async with conn.transaction():
            return await _write(conn, row, resolution, objects, reason, (operator, approver), now)


async def _write(
    conn: asyncpg.Connection,
    row: asyncpg.Record,
    resolution: Resolution,
    objects: Sequence[RailObject],
    reason: str,
    operators: tuple[str, str | None],
    now: datetime,
) -> Resolved:
    operator, approver = operators
    batch = await TransitionBatch.lock(conn, [row["id"]])
    locked = batch.settlements[row["id"]]
    instruction = InstructionStatus(await conn.fetchval(LOCK_INSTRUCTION, row["id"]))
    decision = decide(under_review(row, locked.status, instruction), resolution, objects)
    before = _snapshot(locked, instruction)
    if decision.settlement is not None:
        moved = batch.move(
            row["id"],
            decision.settlement,
            actor=operator,
            reason=reason,
            rail_reference=decision.rail_reference,
        )
        if moved is None:
            raise Refused(f"settlement {row['id']} cannot go to {decision.settlement}")
        await batch.write(conn, now)
    status = await conn.execute(
        RESOLVE_INSTRUCTION,
        row["id"],
        instruction,
        decision.instruction,
        decision.rail_reference,
        now,
    )
    if status != "UPDATE 1":
        raise TransitionConflict(f"rail instruction {row['id']} changed under its lock")
    after = _snapshot(locked, decision.instruction)
    action_id = await record_action(
        conn,
        actor=operator,
        action=ACTION,
        target=f"settlement:{row['id']}",
        detail={
            "as": str(resolution),
            "reason": reason,
            "rail_objects": sorted(o.object_id for o in objects),
        },
        before=before,
        after=after,
        now=now,
        approved_by=approver,
    )
    return _resolved(row, resolution, decision, locked.status, action_id)


def _snapshot(locked: LockedSettlement, instruction: InstructionStatus) -> dict[str, object]:
    """A settlement under review and its instruction, as the audit row records them."""
    return {
        "status": str(locked.status),
        "version": locked.version,
        "instruction": str(instruction),
        "rail_reference": locked.rail_reference,
    }


def _resolved(
    row: asyncpg.Record,
    resolution: Resolution,
    decision: Decision,
    settlement: SettlementStatus,
    action_id: int,
) -> Resolved:
    return Resolved(
        str(row["id"]),
        resolution,
        settlement,
        decision.instruction,
        decision.rail_reference,
        action_id,
    )


def under_review(row: asyncpg.Record, status: str, instruction: str) -> UnderReview:
    """A row of SHOW with the settlement's and instruction's statuses as locked."""
    return UnderReview(
        str(row["id"]),
        SettlementStatus(status),
        row["amount"],
        row["currency"],
        row["destination"],
        InstructionStatus(instruction),
    )


def instruction_of(row: asyncpg.Record) -> RailInstruction:
    return RailInstruction(
        str(row["id"]),
        row["tenant"],
        row["idempotency_key"],
        row["destination"],
        row["amount"],
        row["currency"],
        PayoutMethod(row["method"]),
    )
