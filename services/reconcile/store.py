"""Reconciliation's records in PostgreSQL: runs with the evidence of each source, and breaks
kept across runs (migrations 0004 and 0021).

A run is started, each source it reads is recorded (when, how many rows, or why not), and it
is finished: `completed` only if at least one source was read and none failed, else `failed`;
the database holds a finished run's record final. A break's key is `break_key` (the same
tuple the report sorts by, as JSON text), and a break is one discrepancy at one time: a
page of breaks is stored by one statement that moves `last_seen` of the open break of each
key, and opens a new break, linked to the last one, for a key whose breaks are all closed
(see UPSERT_BREAKS). A closed break is never reopened. PostgreSQL out of reach raises
StoreUnavailable.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.breaks import BreakStatus, BreakType
from services.domain.reconciliation import Break, RunKind, RunStatus, break_key
from services.reconcile.errors import RunNotRunning
from services.reconcile.report import reason_code

MAX_PAGE = 1000
EMPTY_ANSWER = "empty answer where data was expected"

START_RUN = """
INSERT INTO reconciliation_runs (kind, window_start, window_end, started_at, status)
VALUES ($1, $2, $3, $4, 'running')
RETURNING id
"""
RECORD_SOURCE = """
INSERT INTO reconciliation_sources (run_id, source, read_at, rows_returned, error)
VALUES ($1, $2, $3, $4, $5)
"""
# The run's status is decided from its sources in the same statement that finishes it; the
# table's trigger refuses a `completed` that the sources contradict all the same.
FINISH_RUN = """
UPDATE reconciliation_runs AS r
   SET finished_at = $2,
       status = CASE WHEN $3::text IS NULL AND f.failed IS NULL AND f.read > 0
                     THEN 'completed' ELSE 'failed' END,
       error = coalesce($3, f.failed, CASE WHEN f.read = 0 THEN 'no source was read' END)
  FROM (SELECT count(*) AS read,
               string_agg(source || ': ' || error, '; ' ORDER BY source) AS failed
          FROM reconciliation_sources WHERE run_id = $1) AS f
 WHERE r.id = $1 AND r.status = 'running'
RETURNING r.status
"""
LAST_COMPLETED = """
SELECT max(window_end) FROM reconciliation_runs WHERE kind = $1 AND status = 'completed'
"""
# A break is one discrepancy at one time. Per key (`break_key`), at most one break is open:
# seen again, it moves `last_seen` and shows what the rail says now. After the latest break
# of a key closed, the same discrepancy is a new open break naming the closed one
# (`previous_id`), except the very discrepancy an operator resolved (the same values), which
# stays resolved and is only seen again. DISTINCT ON: a key twice in one page would be "a
# row affected twice"; ORDER BY: concurrent pages lock the keys they share in one order, so
# they queue instead of deadlocking. xmax = 0 only on a row this statement inserted.
UPSERT_BREAKS = """
WITH b AS (
    SELECT DISTINCT ON (x.break_key) x.* FROM unnest($3::break_row[]) AS x ORDER BY x.break_key
), latest AS (
    SELECT DISTINCT ON (k.break_key) k.id, k.break_key, k.status, k.expected, k.actual
      FROM reconciliation_breaks AS k JOIN b USING (break_key)
     ORDER BY k.break_key, k.id DESC
), accepted AS (
    UPDATE reconciliation_breaks AS k
       SET last_seen = greatest(k.last_seen, $2),
           last_run_id = CASE WHEN $2 >= k.last_seen THEN $1 ELSE k.last_run_id END
      FROM b JOIN latest AS l USING (break_key)
     WHERE k.id = l.id AND l.status = 'resolved'
       AND l.expected = b.expected AND l.actual = b.actual
    RETURNING k.break_key
), upserted AS (
    INSERT INTO reconciliation_breaks AS k
           (break_key, break_type, settlement_id, rail_object_id, field, currency, expected,
            actual, reason, first_seen, last_seen, first_run_id, last_run_id, previous_id)
    SELECT b.break_key, b.break_type, b.settlement_id, b.rail_object_id, b.field, b.currency,
           b.expected, b.actual, b.reason, $2, $2, $1, $1,
           CASE WHEN l.status <> 'open' THEN l.id END
      FROM b LEFT JOIN latest AS l USING (break_key)
     WHERE NOT EXISTS (SELECT FROM accepted AS a WHERE a.break_key = b.break_key)
     ORDER BY b.break_key
        ON CONFLICT (break_key) WHERE status = 'open' DO UPDATE
       SET last_seen = greatest(k.last_seen, excluded.last_seen),
           last_run_id = CASE WHEN excluded.last_seen >= k.last_seen
                              THEN excluded.last_run_id ELSE k.last_run_id END,
           expected = excluded.expected, actual = excluded.actual, reason = excluded.reason
    RETURNING (xmax = 0) AS inserted
)
SELECT inserted FROM upserted UNION ALL SELECT false FROM accepted
"""
# The latest break of each key: the one that says whether that discrepancy is open now.
BREAK_STATUSES = """
SELECT DISTINCT ON (break_key) break_key, status FROM reconciliation_breaks
 WHERE break_key = ANY($1::text[]) ORDER BY break_key, id DESC
"""
BREAK_COLUMNS = """id, break_key, break_type, settlement_id, rail_object_id, field, currency,
       expected, actual, reason, status, first_seen, last_seen, first_run_id, last_run_id,
       resolved_at, resolved_by, resolution_reason, previous_id"""
OPEN_BREAKS = f"""
SELECT {BREAK_COLUMNS} FROM reconciliation_breaks
 WHERE status = 'open' AND id > $1 ORDER BY id LIMIT $2
"""
OPEN_BREAKS_OF_TYPE = f"""
SELECT {BREAK_COLUMNS} FROM reconciliation_breaks
 WHERE status = 'open' AND break_type = $3 AND id > $1 ORDER BY id LIMIT $2
"""


class BreakRow(NamedTuple):
    """A `break_row` (migration 0004): one break as `upsert_breaks` hands it over."""

    break_key: str  # the break's identity across runs: `break_key` as JSON text
    break_type: str
    settlement_id: uuid.UUID | None
    rail_object_id: str | None
    field: str  # what differed
    currency: str | None
    expected: str  # JSON: what the ledger says
    actual: str  # JSON: what the rail says
    reason: str  # the reason code an operator reads, e.g. "amount:-500"


class Upserted(NamedTuple):
    """What one page of breaks did to the stored ones."""

    opened: int  # breaks stored open by this page (new, or after their key's last closed)
    seen_again: int  # open breaks, and resolved ones found the same, whose last_seen moved


class StoredBreak(NamedTuple):
    """A break as stored, for listing and paging."""

    id: int  # the keyset cursor: pages go by increasing id
    break_key: str
    break_type: BreakType
    settlement_id: str | None
    rail_object_id: str | None
    field: str
    currency: str | None
    expected: str | int | None  # as the report writes it; amounts are exact ints
    actual: str | int | None
    reason: str
    status: BreakStatus
    first_seen: datetime
    last_seen: datetime
    first_run_id: int
    last_run_id: int
    resolved_at: datetime | None  # when it was healed or resolved
    resolved_by: str | None  # who healed or resolved it
    resolution_reason: str | None  # the operator's reason
    previous_id: int | None  # the closed break of the same key this one came after


def stored_key(item: Break) -> str:
    """A break's identity as the store keeps it: `break_key` as JSON text, one per break."""
    return json.dumps(list(break_key(item)), separators=(",", ":"), ensure_ascii=False)


def break_row(item: Break) -> BreakRow:
    """The named row that stores `item`."""
    return BreakRow(
        stored_key(item),
        item.break_type.value,
        uuid.UUID(item.settlement_id) if item.settlement_id else None,
        item.rail_object_id,
        item.field,
        item.currency,
        json.dumps(item.expected),
        json.dumps(item.actual),
        reason_code(item),
    )


async def start_run(
    conn: asyncpg.Connection | asyncpg.Pool,
    kind: RunKind,
    window_start: datetime,
    window_end: datetime,
    now: datetime,
) -> int:
    """Record a run of `kind` over [window_start, window_end) as running; its id."""
    with unavailable_when_down("PostgreSQL is unreachable; no run was started"):
        run_id = await conn.fetchval(START_RUN, kind.value, window_start, window_end, now)
    return int(run_id)


async def record_source(
    conn: asyncpg.Connection | asyncpg.Pool,
    run_id: int,
    source: str,
    *,
    read_at: datetime,
    rows: int,
    data_expected: bool,
    error: str | None = None,
) -> str | None:
    """Record what reading `source` returned for a running run; the error stored, if any (an
    empty answer where data was expected is one). RunNotRunning once the run is finished."""
    if error is None and rows == 0 and data_expected:
        error = EMPTY_ANSWER
    try:
        with unavailable_when_down(f"PostgreSQL is unreachable; {source} was not recorded"):
            await conn.execute(RECORD_SOURCE, run_id, source, read_at, rows, error)
    except asyncpg.InsufficientPrivilegeError as e:
        raise RunNotRunning(run_id) from e
    return error


async def finish_run(
    conn: asyncpg.Connection | asyncpg.Pool, run_id: int, now: datetime, error: str | None = None
) -> RunStatus:
    """Finish a running run: completed if it read a source and none failed and `error` is
    None, else failed. RunNotRunning if it is already finished or unknown."""
    with unavailable_when_down("PostgreSQL is unreachable; the run was not finished"):
        status = await conn.fetchval(FINISH_RUN, run_id, now, error)
    if status is None:
        raise RunNotRunning(run_id)
    return RunStatus(status)


async def last_completed(conn: asyncpg.Connection | asyncpg.Pool, kind: RunKind) -> datetime | None:
    """Where the latest completed run of `kind` ended its window; None if none completed."""
    with unavailable_when_down("PostgreSQL is unreachable; no run was read"):
        ended: datetime | None = await conn.fetchval(LAST_COMPLETED, kind.value)
    return ended


async def upsert_breaks(
    conn: asyncpg.Connection | asyncpg.Pool, run_id: int, breaks: Sequence[Break], now: datetime
) -> Upserted:
    """Store a page of breaks found by `run_id` in one statement: open ones seen again
    (last_seen, last_run_id, the values now), new discrepancies opened, none reopened."""
    if not breaks:
        return Upserted(0, 0)
    rows = [break_row(item) for item in breaks]
    with unavailable_when_down("PostgreSQL is unreachable; no break was stored"):
        inserted = await conn.fetch(UPSERT_BREAKS, run_id, now, rows)
    opened = sum(1 for r in inserted if r["inserted"])
    return Upserted(opened, len(inserted) - opened)


async def break_statuses(
    conn: asyncpg.Connection | asyncpg.Pool, keys: Sequence[str]
) -> dict[str, BreakStatus]:
    """The stored status of each break among `keys` (stored keys) that is stored."""
    if not keys:
        return {}
    with unavailable_when_down("PostgreSQL is unreachable; no break was read"):
        rows = await conn.fetch(BREAK_STATUSES, sorted(set(keys)))
    return {r["break_key"]: BreakStatus(r["status"]) for r in rows}


def stored_break(row: asyncpg.Record) -> StoredBreak:
    """A row of BREAK_COLUMNS as a StoredBreak, its JSON values read back exactly."""
    values: dict[str, Any] = dict(row)
    values["break_type"] = BreakType(row["break_type"])
    values["status"] = BreakStatus(row["status"])
    values["settlement_id"] = str(row["settlement_id"]) if row["settlement_id"] else None
    values["expected"], values["actual"] = json.loads(row["expected"]), json.loads(row["actual"])
    return StoredBreak(**values)


async def open_breaks(
    conn: asyncpg.Connection | asyncpg.Pool,
    after_id: int = 0,
    limit: int = MAX_PAGE,
    break_type: BreakType | None = None,
) -> list[StoredBreak]:
    """Open breaks with id above `after_id`, by id, at most `limit` (capped at MAX_PAGE),
    of one type if given: pass the last id back for the next page."""
    limit = min(limit, MAX_PAGE)
    with unavailable_when_down("PostgreSQL is unreachable; no break was read"):
        if break_type is None:
            rows = await conn.fetch(OPEN_BREAKS, after_id, limit)
        else:
            rows = await conn.fetch(OPEN_BREAKS_OF_TYPE, after_id, limit, break_type.value)
    return [stored_break(r) for r in rows]
