"""Reconciliation breaks as operators see them: listed by status and type, shown, resolved.

Resolving is reconciliation's own audited close (`services.reconcile.closing.close_break`):
open -> resolved with the operator's reason, one `operator_actions` row in the same
statement; healed and resolved breaks are final. Its refusals are answered here as
operator errors with a status and a code.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.breaks import (
    BreakStatus,
    BreakType,
    IllegalBreakTransition,
)
from services.domain.keyset import parse_id
from services.domain.settlement import ReasonRequired
from services.operations.errors import NotFound, ReasonMissing, Refused
from services.reconcile.closing import close_break
from services.reconcile.errors import BreakChanged, BreakNotFound
from services.reconcile.store import BREAK_COLUMNS, StoredBreak, stored_break

MAX_PAGE = 1000
BREAK_CLOSED = "break_closed"

LIST = f"""
SELECT {BREAK_COLUMNS} FROM reconciliation_breaks
 WHERE id > $1 AND ($3::text IS NULL OR status = $3) AND ($4::text IS NULL OR break_type = $4)
 ORDER BY id LIMIT $2
"""
SHOW = f"SELECT {BREAK_COLUMNS} FROM reconciliation_breaks WHERE id = $1"


def break_document(item: StoredBreak) -> dict[str, Any]:
    """One stored break as listings, `show` and the JSON lines export write it."""
    return {
        "id": item.id,
        "type": item.break_type.value,
        "status": item.status.value,
        "settlement_id": item.settlement_id,
        "rail_object_id": item.rail_object_id,
        "field": item.field,
        "currency": item.currency,
        "expected": item.expected,
        "actual": item.actual,
        "reason": item.reason,
        "first_seen": item.first_seen.isoformat(),
        "last_seen": item.last_seen.isoformat(),
        "resolved_at": item.resolved_at.isoformat() if item.resolved_at else None,
        "resolved_by": item.resolved_by,
        "resolution_reason": item.resolution_reason,
        "previous_id": item.previous_id,  # the closed break of the same key this one followed
    }


def parse_break_id(text: str) -> int:
    """A break id from text; NotFound when it is not one (no such break)."""
    parsed = parse_id(text)
    if parsed is None:
        raise NotFound(f"no reconciliation break {text!r}: ids are positive integers")
    return parsed


async def list_breaks(
    conn: asyncpg.Connection | asyncpg.Pool,
    *,
    after: int = 0,
    limit: int = MAX_PAGE,
    status: BreakStatus | None = None,
    break_type: BreakType | None = None,
) -> list[StoredBreak]:
    """Breaks with id above `after`, by id, at most `limit` (capped), filtered by status and
    type when given: pass the last id back for the next page."""
    with unavailable_when_down("PostgreSQL is unreachable; no break was read"):
        rows = await conn.fetch(
            LIST,
            after,
            min(limit, MAX_PAGE),
            status and status.value,
            break_type and break_type.value,
        )
    return [stored_break(r) for r in rows]


async def show_break(conn: asyncpg.Connection | asyncpg.Pool, break_id: str) -> StoredBreak:
    """One stored break; NotFound if there is none."""
    with unavailable_when_down("PostgreSQL is unreachable; no break was read"):
        row = await conn.fetchrow(SHOW, parse_break_id(break_id))
    if row is None:
        raise NotFound(f"no reconciliation break {break_id}")
    return stored_break(row)


async def resolve_break(
    conn: asyncpg.Connection,
    break_id: str,
    *,
    reason: str,
    operator: str,
    now: datetime,
    approver: str | None = None,
) -> StoredBreak:
    """Resolve an open break with the operator's reason, audited (with `approver`, the second
    operator who approved it, if any); NotFound, Refused (`break_closed`: healed or resolved
    already) or ReasonMissing change nothing."""
    if not reason.strip():
        raise ReasonMissing()
    try:
        return await close_break(
            conn,
            parse_break_id(break_id),
            BreakStatus.RESOLVED,
            actor=operator,
            reason=reason,
            now=now,
            approved_by=approver,
        )
    except BreakNotFound as e:
        raise NotFound(str(e)) from e
    except (IllegalBreakTransition, BreakChanged) as e:
        raise Refused(f"break {break_id} is closed: {e}", code=BREAK_CLOSED) from e
    except ReasonRequired as e:
        raise ReasonMissing(str(e)) from e


async def open_ids(
    conn: asyncpg.Connection | asyncpg.Pool, break_type: BreakType
) -> AsyncIterator[str]:
    """The ids of the open breaks of `break_type`, a page at a time, in id order; a break
    closed meanwhile drops out of the later pages."""
    after = 0
    while page := await list_breaks(
        conn, after=after, status=BreakStatus.OPEN, break_type=break_type
    ):
        for item in page:
            yield str(item.id)
        after = page[-1].id
