"""Closing a stored break, audited: healed by the rail's proof or resolved by an operator.

The step is decided by the break's state machine (`services.domain.breaks.transition`)
on the row locked as it stands, then written by one statement: the update guarded by the
status it was locked in, and one `operator_actions` row naming who, what, and the break
before and after. Both or neither; `operator_actions` itself refuses to be changed later.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.breaks import HEALABLE, BreakStatus, BreakType, transition
from services.reconcile.errors import BreakChanged, BreakNotFound
from services.reconcile.store import BREAK_COLUMNS, StoredBreak, stored_break

LOCK_BREAK = f"SELECT {BREAK_COLUMNS} FROM reconciliation_breaks WHERE id = $1 FOR UPDATE"
CLOSE_BREAK = f"""
WITH closed AS (
    UPDATE reconciliation_breaks
       SET status = $3, resolved_at = $4, resolved_by = $5, resolution_reason = $6
     WHERE id = $1 AND status = $2
    RETURNING {BREAK_COLUMNS}
), audit AS (
    INSERT INTO operator_actions
           (actor, action, target, detail, before, after, occurred_at, approved_by)
    SELECT $5, $7, 'break:' || c.id,
           jsonb_build_object('break_type', c.break_type, 'break_key', c.break_key),
           jsonb_build_object('status', $2::text),
           jsonb_build_object('status', c.status, 'resolution_reason', c.resolution_reason),
           $4, $8
      FROM closed AS c
)
SELECT {BREAK_COLUMNS} FROM closed
"""
ACTIONS = {BreakStatus.HEALED: "break.heal", BreakStatus.RESOLVED: "break.resolve"}
# The open breaks of the settlements and objects a run compared that it no longer finds,
# healed and audited at once: of the types the evidence can resolve, and not among the keys
# the run still found (or still waits on). A break naming a rail object is healed only if
# that object was among those compared (its settlement alone is no evidence of it); an
# amount the rail paid never changes, so only a reversed amount catches up.
HEAL_AGREEING = """
WITH closed AS (
    UPDATE reconciliation_breaks
       SET status = $3, resolved_at = $4, resolved_by = $5, resolution_reason = $6
     WHERE status = $2 AND break_type = ANY($7::text[])
       AND (settlement_id = ANY($1::uuid[]) OR settlement_id IS NULL)
       AND (rail_object_id = ANY($9::text[])
            OR (rail_object_id IS NULL AND settlement_id IS NOT NULL))
       AND (break_type <> 'amount_mismatch' OR field = 'amount_reversed')
       AND break_key <> ALL($10::text[])
    RETURNING id, break_type, break_key, status, resolution_reason
), audit AS (
    INSERT INTO operator_actions (actor, action, target, detail, before, after, occurred_at)
    SELECT $5, $8, 'break:' || c.id,
           jsonb_build_object('break_type', c.break_type, 'break_key', c.break_key),
           jsonb_build_object('status', $2::text),
           jsonb_build_object('status', c.status, 'resolution_reason', c.resolution_reason),
           $4
      FROM closed AS c
)
SELECT count(*) FROM closed
"""
AGREEING = "a later run found the ledger and the rail agreeing: the discrepancy is gone"


async def close_break(
    conn: asyncpg.Connection,
    break_id: int,
    target: BreakStatus,
    *,
    actor: str,
    reason: str | None,
    now: datetime,
    approved_by: str | None = None,
) -> StoredBreak:
    """Heal or resolve an open break, audited in operator_actions (`approved_by`: a second
    operator's approval), in the caller's transaction if any; BreakNotFound,
    IllegalBreakTransition (not open), BreakNotHealable or ReasonRequired refuse it and change
    nothing."""
    with unavailable_when_down("PostgreSQL is unreachable; the break was not closed"):
        async with conn.transaction():
            row = await conn.fetchrow(LOCK_BREAK, break_id)
            if row is None:
                raise BreakNotFound(break_id)
            current = BreakStatus(row["status"])
            step = transition(BreakType(row["break_type"]), current, target, reason)
            closed = await conn.fetchrow(
                CLOSE_BREAK,
                break_id,
                step.source.value,
                step.target.value,
                now,
                actor,
                step.reason,
                ACTIONS[step.target],
                approved_by,
            )
            if closed is None:
                raise BreakChanged(break_id)
    return stored_break(closed)


async def heal_agreeing(
    conn: asyncpg.Connection | asyncpg.Pool,
    settlement_ids: Sequence[str],
    object_ids: Sequence[str],
    still: Sequence[str],
    *,
    actor: str,
    now: datetime,
) -> int:
    """Heal, audited, the open breaks of these settlements (and of these objects no
    settlement claims) whose keys are not among `still` (stored keys a run found, or waits
    on): the run compared them and the discrepancy is gone; how many were healed."""
    kinds = sorted(t.value for t in HEALABLE)
    step = transition(BreakType.STATUS_DRIFT, BreakStatus.OPEN, BreakStatus.HEALED, AGREEING)
    with unavailable_when_down("PostgreSQL is unreachable; no break was closed"):
        healed = await conn.fetchval(
            HEAL_AGREEING,
            list(settlement_ids),
            step.source.value,
            step.target.value,
            now,
            actor,
            step.reason,
            kinds,
            ACTIONS[step.target],
            list(object_ids),
            list(still),
        )
    return int(healed)
