"""Reconciliation breaks as operators see them: listed (by status, type, age, currency and
amount), shown with who works on them, and closed by an operator.

An operator's close is reconciliation's own audited close
(`services.reconcile.closing.close_break`): open -> resolved with the operator's reason, one
`operator_actions` row in the same statement, and how it was resolved (`resolution_kind`,
migration 0022) written in the same transaction; healed and resolved breaks are final to
reconciliation (only an operator reopens one: break_notes.py). Its refusals are answered
here as operator errors with a status and a code.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.break_work import AgingBucket, aging_bucket, first_seen_window
from services.domain.breaks import (
    BreakStatus,
    BreakType,
    IllegalBreakTransition,
    ResolutionKind,
)
from services.domain.keyset import parse_id
from services.domain.money import is_currency
from services.domain.settlement import ReasonRequired
from services.operations.errors import BadRequest, NotFound, ReasonMissing, Refused
from services.reconcile.closing import close_break
from services.reconcile.errors import BreakChanged, BreakNotFound
from services.reconcile.store import BREAK_COLUMNS, StoredBreak, stored_break

MAX_PAGE = 1000
BREAK_CLOSED = "break_closed"

# A break about money (it names a currency) says by how much in its reason code, as the
# report writes it ("amount:-500": services/reconcile/report.py `reason_code`); its expected
# and actual values do not always hold it (a bank statement's closing balance).
DIFFERENCE = (
    "CASE WHEN currency IS NOT NULL THEN substring(reason FROM ':([+-][0-9]+)$')::bigint END"
)
COLUMNS = f"{BREAK_COLUMNS}, assignee, resolution_kind, {DIFFERENCE} AS difference"
LIST = f"""
SELECT {COLUMNS} FROM reconciliation_breaks
 WHERE id > $1 AND ($3::text IS NULL OR status = $3) AND ($4::text IS NULL OR break_type = $4)
   AND ($5::timestamptz IS NULL OR first_seen > $5)
   AND ($6::timestamptz IS NULL OR first_seen <= $6)
   AND ($7::text IS NULL OR currency = $7)
   AND ($8::bigint IS NULL OR abs({DIFFERENCE}) >= $8)
   AND ($9::bigint IS NULL OR abs({DIFFERENCE}) <= $9)
 ORDER BY id LIMIT $2
"""
SHOW = f"SELECT {COLUMNS} FROM reconciliation_breaks WHERE id = $1"
LOCK = f"{SHOW} FOR UPDATE"
SET_KIND = f"""
UPDATE reconciliation_breaks SET resolution_kind = $2 WHERE id = $1 AND status = 'resolved'
RETURNING {COLUMNS}
"""


class BreakView(NamedTuple):
    """A stored break with what operators add to it."""

    item: StoredBreak
    assignee: str | None  # the operator working on it
    resolution_kind: ResolutionKind | None  # how an operator resolved it
    difference: int | None  # actual - expected, for a break about money


class BreakFilter(NamedTuple):
    """Which breaks a listing shows; None: any."""

    status: BreakStatus | None = None
    break_type: BreakType | None = None
    bucket: AgingBucket | None = None  # by first_seen
    currency: str | None = None
    min_amount: int | None = None  # the absolute difference, minor units, inclusive
    max_amount: int | None = None


def break_filter(
    status: BreakStatus | None = None,
    break_type: BreakType | None = None,
    bucket: AgingBucket | None = None,
    currency: str | None = None,
    min_amount: int | None = None,
    max_amount: int | None = None,
) -> BreakFilter:
    """A listing's filter, its currency and amount range checked; BadRequest otherwise."""
    if currency is not None and not is_currency(currency):
        raise BadRequest(
            "currency must be an ISO 4217 code", code="invalid_currency", field="currency"
        )
    if min_amount is not None and max_amount is not None and min_amount > max_amount:
        raise BadRequest(
            "min_amount is above max_amount", code="invalid_amount_range", field="min_amount"
        )
    return BreakFilter(status, break_type, bucket, currency, min_amount, max_amount)


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


def view_document(view: BreakView, now: datetime) -> dict[str, Any]:
    """One break as the operators' listings and answers give it, aged at `now`."""
    return {
        **break_document(view.item),
        "assignee": view.assignee,
        "resolution_kind": view.resolution_kind and view.resolution_kind.value,
        "difference": view.difference,
        "age_bucket": aging_bucket(view.item.first_seen, now).value,
    }


def view_of(row: asyncpg.Record) -> BreakView:
    """A row of COLUMNS as a BreakView."""
    kind = row["resolution_kind"]
    return BreakView(
        stored_break({name: row[name] for name in StoredBreak._fields}),
        row["assignee"],
        ResolutionKind(kind) if kind else None,
        row["difference"],
    )


def parse_break_id(text: str) -> int:
    """A break id from text; NotFound when it is not one (no such break)."""
    parsed = parse_id(text)
    if parsed is None:
        raise NotFound(f"no reconciliation break {text!r}: ids are positive integers")
    return parsed


async def list_breaks(
    conn: asyncpg.Connection | asyncpg.Pool,
    where: BreakFilter,
    *,
    now: datetime,
    after: int = 0,
    limit: int = MAX_PAGE,
) -> list[BreakView]:
    """Breaks `where` says with id above `after`, by id, at most `limit` (capped), aged at
    `now`: pass the last id back for the next page."""
    newer, older = first_seen_window(where.bucket, now) if where.bucket else (None, None)
    with unavailable_when_down("PostgreSQL is unreachable; no break was read"):
        rows = await conn.fetch(
            LIST,
            after,
            min(limit, MAX_PAGE),
            where.status and where.status.value,
            where.break_type and where.break_type.value,
            newer,
            older,
            where.currency,
            where.min_amount,
            where.max_amount,
        )
    return [view_of(r) for r in rows]


async def show_break(conn: asyncpg.Connection | asyncpg.Pool, break_id: str) -> BreakView:
    """One break; NotFound if there is none."""
    with unavailable_when_down("PostgreSQL is unreachable; no break was read"):
        row = await conn.fetchrow(SHOW, parse_break_id(break_id))
    if row is None:
        raise NotFound(f"no reconciliation break {break_id}")
    return view_of(row)


async def locked_break(conn: asyncpg.Connection, break_id: str) -> BreakView:
    """One break, locked until the caller's transaction ends; NotFound if there is none."""
    row = await conn.fetchrow(LOCK, parse_break_id(break_id))
    if row is None:
        raise NotFound(f"no reconciliation break {break_id}")
    return view_of(row)


async def close_as(
    conn: asyncpg.Connection,
    break_id: str,
    kind: ResolutionKind,
    *,
    reason: str,
    operator: str,
    now: datetime,
    approver: str | None = None,
) -> BreakView:
    """Resolve an open break as `kind` with the operator's reason, audited (with `approver`,
    the second operator who approved it, if any), in the caller's transaction if any;
    NotFound, Refused (`break_closed`) or ReasonMissing change nothing."""
    if not reason.strip():
        raise ReasonMissing()
    try:
        with unavailable_when_down("PostgreSQL is unreachable; the break was not closed"):
            closed = await _closed_as(conn, break_id, kind, reason, operator, now, approver)
    except BreakNotFound as e:
        raise NotFound(str(e)) from e
    except (IllegalBreakTransition, BreakChanged) as e:
        raise Refused(f"break {break_id} is closed: {e}", code=BREAK_CLOSED) from e
    except ReasonRequired as e:
        raise ReasonMissing(str(e)) from e
    return view_of(closed)


async def _closed_as(
    conn: asyncpg.Connection,
    break_id: str,
    kind: ResolutionKind,
    reason: str,
    operator: str,
    now: datetime,
    approver: str | None,
) -> asyncpg.Record:
    async with conn.transaction():
        closed = await close_break(
            conn,
            parse_break_id(break_id),
            BreakStatus.RESOLVED,
            actor=operator,
            reason=reason,
            now=now,
            approved_by=approver,
        )
        return await conn.fetchrow(SET_KIND, closed.id, kind.value)


async def resolve_break(
    conn: asyncpg.Connection,
    break_id: str,
    *,
    reason: str,
    operator: str,
    now: datetime,
    approver: str | None = None,
) -> BreakView:
    """Resolve an open break with the operator's reason alone (`close_as` of kind resolve)."""
    return await close_as(
        conn,
        break_id,
        ResolutionKind.RESOLVE,
        reason=reason,
        operator=operator,
        now=now,
        approver=approver,
    )
