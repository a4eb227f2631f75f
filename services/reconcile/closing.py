"""Closing a stored break, audited: healed by the rail's proof or resolved by an operator.

The step is decided by the break's state machine (`services.shared.domain.breaks.transition`)
on the row locked as it stands, then written by one statement: the update guarded by the
status it was locked in, and one `operator_actions` row naming who, what, and the break
before and after. Both or neither; `operator_actions` itself refuses to be changed later.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from services.reconcile.errors import BreakChanged, BreakNotFound
from services.reconcile.store import BREAK_COLUMNS, StoredBreak, stored_break
from services.shared.domain.breaks import BreakStatus, BreakType, transition
from services.shared.store_errors import unavailable_when_down

LOCK_BREAK = f"SELECT {BREAK_COLUMNS} FROM reconciliation_breaks WHERE id = $1 FOR UPDATE"
CLOSE_BREAK = f"""
WITH closed AS (
    UPDATE reconciliation_breaks
       SET status = $3, resolved_at = $4, resolved_by = $5, resolution_reason = $6
     WHERE id = $1 AND status = $2
    RETURNING {BREAK_COLUMNS}
), audit AS (
    INSERT INTO operator_actions (actor, action, target, detail, before, after, occurred_at)
    SELECT $5, $7, 'break:' || c.id,
           jsonb_build_object('break_type', c.break_type, 'break_key', c.break_key),
           jsonb_build_object('status', $2::text),
           jsonb_build_object('status', c.status, 'resolution_reason', c.resolution_reason),
           $4
      FROM closed AS c
)
SELECT {BREAK_COLUMNS} FROM closed
"""
ACTIONS = {BreakStatus.HEALED: "break.heal", BreakStatus.RESOLVED: "break.resolve"}


async def close_break(
    conn: asyncpg.Connection,
    break_id: int,
    target: BreakStatus,
    *,
    actor: str,
    reason: str | None,
    now: datetime,
) -> StoredBreak:
    """Heal or resolve an open break, audited in operator_actions, in the caller's transaction
    if any; BreakNotFound, IllegalBreakTransition (not open), BreakNotHealable or
    ReasonRequired refuse it and change nothing."""
    with unavailable_when_down("PostgreSQL is unreachable; the break was not closed"):
        async with conn.transaction():
            row = await conn.fetchrow(LOCK_BREAK, break_id)
            if row is None:
                raise BreakNotFound(break_id)
            current = BreakStatus(row["status"])
            step = transition(BreakType(row["break_type"]), current, target, reason)
            closed = await conn.fetchrow(
                CLOSE_BREAK, break_id, step.source.value, step.target.value, now, actor,
                step.reason, ACTIONS[step.target],
            )  # fmt: skip
            if closed is None:
                raise BreakChanged(break_id)
    return stored_break(closed)
