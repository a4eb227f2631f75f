"""The reports the bank issues (pain.002, camt.054, camt.053), kept byte for byte, and their
delivery.

A report is issued with the business date it is due on; it is delivered (listed, readable)
only once the bank's books reach that date, in the order (due date, held back last, issued).
Its place in the listing is its delivery, so a late statement appears after reports issued
after it, and a held-back one after the statements that overtook it: a reader sees the gap
in ElctrncSeqNb, then sees it heal.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import date, datetime

from lxml import etree

from banksim.errors import BadQuery, NotFound
from banksim.iso import serialised, timestamp
from banksim.schemas import SCHEMA_FILES, check_report

KINDS = {"pain.002": "P002", "camt.054": "C054", "camt.053": "C053"}

DDL = """
CREATE TABLE IF NOT EXISTS reports (
    id INTEGER PRIMARY KEY,                  -- the order issued
    report_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    msg_id TEXT NOT NULL UNIQUE,
    business_date TEXT NOT NULL,             -- the day it reports on
    created_at TEXT NOT NULL,
    due_date TEXT NOT NULL,                  -- the business date it is delivered on
    held_back INTEGER NOT NULL DEFAULT 0,    -- delivered after the others due that day
    delivered INTEGER UNIQUE,                -- the delivery order (the cursor); NULL until then
    size INTEGER NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS reports_undelivered ON reports (due_date) WHERE delivered IS NULL;
"""


def issue(
    db: sqlite3.Connection,
    kind: str,
    about: date,
    at: datetime,
    build: Callable[[str], etree._Element],
    due: date,
    held_back: bool = False,
) -> str:
    """Issue the report `build` makes from its MsgId, about business day `about`, drawn up at
    `at`, delivered on `due`; validated against its XSD if one is held. Returns its id."""
    number = db.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM reports").fetchone()[0]
    report_id, msg_id = f"rpt_{number:010d}", f"BANKSIM-{KINDS[kind]}-{number:010d}"
    root = build(msg_id)
    if kind in SCHEMA_FILES:
        check_report(kind, root)
    body = serialised(root)
    db.execute(
        "INSERT INTO reports (id, report_id, kind, msg_id, business_date, created_at, due_date,"
        " held_back, size, body) VALUES (:id, :report_id, :kind, :msg_id, :business_date,"
        " :created_at, :due_date, :held_back, :size, :body)",
        {
            "id": number,
            "report_id": report_id,
            "kind": kind,
            "msg_id": msg_id,
            "business_date": about.isoformat(),
            "created_at": timestamp(at),
            "due_date": due.isoformat(),
            "held_back": int(held_back),
            "size": len(body),
            "body": body,
        },
    )
    return report_id


def deliver_due(db: sqlite3.Connection, today: date) -> int:
    """Deliver every report due by `today`, in delivery order; returns how many."""
    due = db.execute(
        "SELECT id FROM reports WHERE delivered IS NULL AND due_date <= ?"
        " ORDER BY due_date, held_back, id",
        (today.isoformat(),),
    ).fetchall()
    last = db.execute("SELECT COALESCE(MAX(delivered), 0) FROM reports").fetchone()[0]
    for offset, (report,) in enumerate(due, start=1):
        db.execute("UPDATE reports SET delivered = ? WHERE id = ?", (last + offset, report))
    return len(due)


def delivered_page(
    db: sqlite3.Connection, after: int, limit: int, kind: str | None
) -> dict[str, object]:
    """Delivered reports after cursor `after`, at most `limit`, of one `kind` if given."""
    if kind is not None and kind not in KINDS:
        raise BadQuery(f"kind must be one of {sorted(KINDS)}")
    rows = db.execute(
        "SELECT delivered, report_id, kind, msg_id, business_date, created_at, size"
        " FROM reports WHERE delivered > ? AND (? IS NULL OR kind = ?)"
        " ORDER BY delivered LIMIT ?",
        (after, kind, kind, limit),
    ).fetchall()
    fields = ("report_id", "kind", "msg_id", "business_date", "created_at", "size")
    return {
        "reports": [dict(zip(fields, row[1:], strict=True)) for row in rows],
        "next": str(rows[-1][0]) if rows else None,
    }


def delivered_body(db: sqlite3.Connection, report_id: str) -> bytes:
    """The bytes of a delivered report; NotFound for any other id."""
    row = db.execute(
        "SELECT body FROM reports WHERE report_id = ? AND delivered IS NOT NULL", (report_id,)
    ).fetchone()
    if row is None:
        raise NotFound(f"no delivered report {report_id}")
    return bytes(row[0])


def delivered_counts(db: sqlite3.Connection) -> dict[str, int]:
    """How many reports of each kind were delivered."""
    rows = db.execute(
        "SELECT kind, COUNT(*) FROM reports WHERE delivered IS NOT NULL GROUP BY kind"
    ).fetchall()
    return {kind: 0 for kind in KINDS} | {str(k): int(n) for k, n in rows}
