"""Open breaks exported as CSV or JSON lines, streamed through a server-side cursor.

The cursor holds the rows in PostgreSQL and hands them over `prefetch` at a time, so a
million open breaks export in the memory of one batch. Each item carries its reason code
(`reason`: the field that differed and, for amounts, by how much, e.g. "amount:-500") with
the stored expected and actual values; amounts stay integers of minor units.

A CSV text cell that a spreadsheet would read as a formula (it starts with `=`, `+`, `-`,
`@`, a tab or a carriage return) is written behind a single quote: rail object ids, reasons
and operators' words come from outside, and opening the export must never run them. Numbers
are written as they are, so a negative amount stays a number.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator
from enum import StrEnum

import asyncpg

from services.domain.breaks import BreakType
from services.operations.breaks import break_document
from services.reconcile.store import BREAK_COLUMNS, stored_break

DEFAULT_PREFETCH = 1000
COLUMNS = (
    "id",
    "type",
    "settlement_id",
    "rail_object_id",
    "field",
    "currency",
    "expected",
    "actual",
    "reason",
    "first_seen",
    "last_seen",
)
OPEN_BREAKS = f"""
SELECT {BREAK_COLUMNS} FROM reconciliation_breaks
 WHERE status = 'open' AND ($1::text IS NULL OR break_type = $1) ORDER BY id
"""


class ExportFormat(StrEnum):
    """How the export is written."""

    CSV = "csv"  # a header line, then one line per break (RFC 4180 quoting)
    JSONL = "jsonl"  # one JSON object per line


def _csv_line(values: list[object]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(values)
    return out.getvalue()


# What makes a spreadsheet read a cell as a formula (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value: object) -> object:
    """`value` as a CSV cell: "" for None, a text that would start a formula behind a single
    quote, anything else (numbers) as it is."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


async def export_open(
    conn: asyncpg.Connection,
    fmt: ExportFormat,
    *,
    break_type: BreakType | None = None,
    prefetch: int = DEFAULT_PREFETCH,
) -> AsyncIterator[str]:
    """The open breaks (of one type, if given), by id, as lines of `fmt`, read through a
    server-side cursor `prefetch` rows at a time in a transaction of its own."""
    if fmt is ExportFormat.CSV:
        yield _csv_line(list(COLUMNS))
    async with conn.transaction(readonly=True, isolation="repeatable_read"):
        cursor = conn.cursor(OPEN_BREAKS, break_type and break_type.value, prefetch=prefetch)
        async for row in cursor:
            document = break_document(stored_break(row))
            if fmt is ExportFormat.JSONL:
                yield json.dumps(document, sort_keys=True, ensure_ascii=False) + "\n"
            else:
                yield _csv_line([spreadsheet_cell(document[c]) for c in COLUMNS])
