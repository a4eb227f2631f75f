"""Work on a break that moves no money and closes nothing, each audited in the transaction
that does it; two-person mode leaves them to one operator:

    assign   who works on an open break (None: nobody)
    comment  a note on a break of any status, kept in `reconciliation_break_comments`, which
             only grows (migration 0022)
    reopen   a resolved break back to open, with the reason; refused while another break of
             its key is open (at most one is: migration 0021). What its resolution booked
             stays booked: an adjustment the other way undoes it.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.break_work import BreakAction, check_applies
from services.domain.breaks import IllegalBreakTransition, reopening
from services.domain.settlement import ReasonRequired
from services.operations.action_base import Operator
from services.operations.audit import record_action
from services.operations.break_rules import facts_of, obeying
from services.operations.breaks import (
    COLUMNS,
    BreakView,
    locked_break,
    parse_break_id,
    view_document,
    view_of,
)
from services.operations.errors import ReasonMissing, Refused

MAX_COMMENT = 4000
OPEN_OF_KEY = "open_break_of_key"
DOWN = "PostgreSQL is unreachable; the break was not changed"
ASSIGN = f"UPDATE reconciliation_breaks SET assignee = $2 WHERE id = $1 RETURNING {COLUMNS}"
COMMENT = """
INSERT INTO reconciliation_break_comments (break_id, author, body, written_at)
VALUES ($1, $2, $3, $4) RETURNING id
"""
COMMENTS = """
SELECT id, author, body, written_at FROM reconciliation_break_comments
 WHERE break_id = $1 ORDER BY id
"""
OPEN_ONE = """
SELECT id FROM reconciliation_breaks WHERE break_key = $1 AND status = 'open' AND id <> $2
"""
REOPEN = f"""
UPDATE reconciliation_breaks
   SET status = $3, resolved_at = NULL, resolved_by = NULL, resolution_reason = NULL,
       resolution_kind = NULL
 WHERE id = $1 AND status = $2
RETURNING {COLUMNS}
"""


async def assign(
    conn: asyncpg.Connection, break_id: str, assignee: str | None, by: Operator
) -> dict[str, Any]:
    """Give an open break to `assignee` (None: to nobody), audited; Refused or NotFound change
    nothing."""
    with unavailable_when_down(DOWN):
        async with conn.transaction():
            view = await locked_break(conn, break_id)
            with obeying():
                check_applies(BreakAction.ASSIGN, facts_of(view.item))
            after = view_of(await conn.fetchrow(ASSIGN, view.item.id, assignee))
            await _audit(conn, BreakAction.ASSIGN, after, {"assignee": view.assignee}, by, {})
    return view_document(after, by.now)


async def comment(
    conn: asyncpg.Connection, break_id: str, text: str, by: Operator
) -> dict[str, Any]:
    """Add the operator's note to a break, audited; its comment."""
    with unavailable_when_down(DOWN):
        async with conn.transaction():
            view = await locked_break(conn, break_id)
            comment_id = await conn.fetchval(COMMENT, view.item.id, by.name, text, by.now)
            await _audit(
                conn, BreakAction.COMMENT, view, {}, by, {"comment_id": comment_id, "text": text}
            )
    return {"id": comment_id, "break_id": view.item.id, "author": by.name, "text": text}


async def reopen(conn: asyncpg.Connection, break_id: str, by: Operator) -> dict[str, Any]:
    """Take a resolved break back to open with the operator's reason, audited; Refused
    (`not_resolved`, `open_break_of_key`), NotFound or ReasonMissing change nothing."""
    with unavailable_when_down(DOWN):
        async with conn.transaction():
            view = await locked_break(conn, break_id)
            with obeying():
                check_applies(BreakAction.REOPEN, facts_of(view.item))
            try:
                step = reopening(view.item.status, by.reason)
            except IllegalBreakTransition as e:
                raise Refused(str(e), code="not_resolved") from e
            except ReasonRequired as e:
                raise ReasonMissing(str(e)) from e
            await _refuse_a_second_open(conn, view)
            try:
                async with conn.transaction():
                    row = await conn.fetchrow(REOPEN, view.item.id, step.source, step.target)
            except asyncpg.UniqueViolationError:
                await _refuse_a_second_open(conn, view)
                raise
            before = {
                "status": view.item.status.value,
                "resolved_by": view.item.resolved_by,
                "resolution_reason": view.item.resolution_reason,
                "resolution_kind": view.resolution_kind and view.resolution_kind.value,
            }
            after = view_of(row)
            await _audit(conn, BreakAction.REOPEN, after, before, by, {"reason": by.reason})
    return view_document(after, by.now)


async def comments_of(
    conn: asyncpg.Connection | asyncpg.Pool, break_id: str
) -> list[dict[str, Any]]:
    """A break's comments, oldest first."""
    with unavailable_when_down("PostgreSQL is unreachable; no comment was read"):
        rows = await conn.fetch(COMMENTS, parse_break_id(break_id))
    return [
        {
            "id": r["id"],
            "author": r["author"],
            "text": r["body"],
            "written_at": r["written_at"].isoformat(),
        }
        for r in rows
    ]


async def _refuse_a_second_open(conn: asyncpg.Connection, view: BreakView) -> None:
    other = await conn.fetchval(OPEN_ONE, view.item.break_key, view.item.id)
    if other is not None:
        raise Refused(
            f"break {other} of the same discrepancy is open; work on that one",
            code=OPEN_OF_KEY,
        )


async def _audit(
    conn: asyncpg.Connection,
    action: BreakAction,
    after: BreakView,
    before: dict[str, Any],
    by: Operator,
    detail: dict[str, Any],
) -> int:
    return await record_action(
        conn,
        actor=by.name,
        action=action.value,
        target=f"break:{after.item.id}",
        detail={**detail, "break_type": after.item.break_type.value},
        before=before,
        after={"status": after.item.status.value, "assignee": after.assignee},
        now=by.now,
    )
