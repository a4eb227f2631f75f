"""The bank's books: the accounts it debits for settle, and every entry booked on them.

An account is opened the day a file first debits it, with a large opening balance, so only a
fault, never a shortage, refuses a payment. Each entry links the transfers it books, so what
the bank paid can be counted per EndToEndId (`effects`): the ground truth of "paid at most
once" that settle's checker reads.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import date
from typing import Any

from banksim.entries import Detail, Entry, Family
from banksim.errors import BankSimError

OPENING_MINOR = 1_000_000_000  # 10,000,000.00 EUR

DDL = """
CREATE TABLE IF NOT EXISTS accounts (
    iban TEXT PRIMARY KEY,
    opened_on TEXT NOT NULL,
    balance_minor INTEGER NOT NULL,          -- after every entry booked so far
    closing_minor INTEGER NOT NULL,          -- the last statement's CLBD; the opening before one
    statement_through TEXT,                  -- the day of the last statement
    electronic_seq INTEGER NOT NULL DEFAULT 0,
    legal_year INTEGER,
    legal_seq INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY,
    iban TEXT NOT NULL REFERENCES accounts (iban),
    booking_date TEXT NOT NULL,
    credit INTEGER NOT NULL,
    amount_minor INTEGER NOT NULL CHECK (amount_minor > 0),
    family TEXT NOT NULL,
    batch INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_day ON entries (iban, booking_date);
CREATE TABLE IF NOT EXISTS entry_transfers (
    entry_id INTEGER NOT NULL REFERENCES entries (id),
    transfer_id INTEGER NOT NULL REFERENCES transfers (id),
    PRIMARY KEY (entry_id, transfer_id)
);
"""

# A transfer's details with what its file said; `t`, `b` and `f` are its transfer, block, file
DETAIL_COLUMNS = (
    "t.id, f.msg_id, b.pmt_inf_id, t.instr_id, t.end_to_end_id, t.amount_minor,"
    " t.creditor_name, t.creditor_iban, t.remittance"
)
DETAIL_JOINS = "JOIN blocks b ON b.id = t.block_id JOIN files f ON f.seq = b.file_seq"


def open_account(db: sqlite3.Connection, iban: str, day: date) -> None:
    """Open the account `iban` on `day` with the opening balance, unless it is open."""
    db.execute(
        "INSERT INTO accounts (iban, opened_on, balance_minor, closing_minor)"
        " VALUES (?, ?, ?, ?) ON CONFLICT (iban) DO NOTHING",
        (iban, day.isoformat(), OPENING_MINOR, OPENING_MINOR),
    )


def post(
    db: sqlite3.Connection,
    iban: str,
    day: date,
    family: Family,
    booked: list[tuple[int, Detail]],
    batch: bool = False,
) -> Entry:
    """Book one entry on `iban` for the transfers `booked` (transfer id, its detail): a credit
    for a return, a debit otherwise; the balance moves by the details' sum."""
    credit = family is Family.RETURN
    total = sum(detail.amount_minor for _, detail in booked)
    entry_id = db.execute(
        "INSERT INTO entries (iban, booking_date, credit, amount_minor, family, batch)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (iban, day.isoformat(), int(credit), total, family.value, int(batch)),
    ).lastrowid
    assert entry_id is not None
    db.executemany(
        "INSERT INTO entry_transfers (entry_id, transfer_id) VALUES (?, ?)",
        [(entry_id, transfer_id) for transfer_id, _ in booked],
    )
    moved = db.execute(
        "UPDATE accounts SET balance_minor = balance_minor + ? WHERE iban = ?",
        (total if credit else -total, iban),
    ).rowcount
    if moved != 1:
        raise BankSimError(f"no account {iban} to book on")
    details = tuple(detail for _, detail in booked)
    return Entry(entry_id, day, credit, total, family, batch, details)


def detail(row: Sequence[Any]) -> tuple[int, Detail]:
    """(transfer id, its detail) from a row of DETAIL_COLUMNS."""
    transfer_id, msg_id, pmt_inf_id, instr_id, e2e, minor, name, iban, remittance = row
    found = Detail(msg_id, pmt_inf_id, instr_id, e2e, minor, name, iban, remittance, None)
    return transfer_id, found


def entries_on(db: sqlite3.Connection, iban: str, day: date) -> list[Entry]:
    """Every entry booked on `iban` on `day`, in the order booked."""
    rows = db.execute(
        "SELECT id, credit, amount_minor, family, batch FROM entries"
        " WHERE iban = ? AND booking_date = ? ORDER BY id",
        (iban, day.isoformat()),
    ).fetchall()
    return [_entry(db, day, *row) for row in rows]


def _entry(
    db: sqlite3.Connection,
    day: date,
    entry_id: int,
    credit: int,
    minor: int,
    family: str,
    batch: int,
) -> Entry:
    kind = Family(family)
    rows = db.execute(
        f"SELECT {DETAIL_COLUMNS}, t.return_reason FROM entry_transfers et"
        f" JOIN transfers t ON t.id = et.transfer_id {DETAIL_JOINS}"
        " WHERE et.entry_id = ? ORDER BY t.id",
        (entry_id,),
    ).fetchall()
    details = []
    for row in rows:
        _, found = detail(row[:-1])
        if kind is Family.CHARGE:
            found = found._replace(amount_minor=minor)  # a charge's detail is the fee
        if kind is Family.RETURN:
            found = found._replace(return_reason=row[-1])
        details.append(found)
    return Entry(entry_id, day, bool(credit), minor, kind, bool(batch), tuple(details))


def effects(db: sqlite3.Connection) -> dict[str, dict[str, int]]:
    """Per EndToEndId: how many times the bank debited it as a transfer, and returned it."""
    counted = {}
    for name, family in (("debits", Family.TRANSFER), ("returns", Family.RETURN)):
        rows = db.execute(
            "SELECT t.end_to_end_id, COUNT(*) FROM entry_transfers et"
            " JOIN entries e ON e.id = et.entry_id JOIN transfers t ON t.id = et.transfer_id"
            " WHERE e.family = ? GROUP BY t.end_to_end_id ORDER BY t.end_to_end_id",
            (family.value,),
        ).fetchall()
        counted[name] = {str(e2e): int(n) for e2e, n in rows}
    return counted
