"""The bank's work on a business day: each block due is booked and each return due comes
back, every booking notified at once by camt.054 (and a block's by a pain.002 ACSC).

A block is booked on max(ReqdExctnDt, the day its file was taken): with BtchBookg, one DBIT
entry carrying every accepted transaction; without it, one entry per transaction. A charged
transaction's fee is a DBIT entry of its own. A transfer to be returned is given its return
date when booked, that many business days later, and then credited back with its reason.
"""

from __future__ import annotations

import sqlite3
from datetime import date, datetime
from typing import NamedTuple

from banksim.camt import notification
from banksim.entries import Detail, Entry, Family
from banksim.faults import Faults
from banksim.ledger import DETAIL_COLUMNS, DETAIL_JOINS, detail, post
from banksim.pain002 import BlockStatus, Original, TxStatus, status_report
from banksim.reports import issue
from services.domain.business_days import add_business_days


class DueBlock(NamedTuple):
    """A payment block due to be booked."""

    block_id: int
    msg_id: str  # of its file
    pmt_inf_id: str
    iban: str  # the account it debits
    batch: bool  # booked as one entry


def book_due(db: sqlite3.Connection, today: date, at: datetime, faults: Faults) -> None:
    """Book every block due by `today`, then every return due by then."""
    blocks = db.execute(
        "SELECT b.id, f.msg_id, b.pmt_inf_id, b.debtor_iban, b.batch FROM blocks b"
        " JOIN files f ON f.seq = b.file_seq"
        " WHERE b.booked = 0 AND b.booking_date <= ? ORDER BY b.id",
        (today.isoformat(),),
    ).fetchall()
    for block_id, msg_id, pmt_inf_id, iban, batch in blocks:
        due = DueBlock(block_id, msg_id, pmt_inf_id, iban, bool(batch))
        _book_block(db, due, today, at, faults)
    returns = db.execute(
        f"SELECT {DETAIL_COLUMNS}, b.debtor_iban, t.return_reason FROM transfers t"
        f" {DETAIL_JOINS} WHERE t.returned = 0 AND t.return_date <= ? ORDER BY t.id",
        (today.isoformat(),),
    ).fetchall()
    for row in returns:
        transfer_id, found = detail(row[:-2])
        _book_return(db, transfer_id, found._replace(return_reason=row[-1]), row[-2], today, at)


def _book_block(
    db: sqlite3.Connection, block: DueBlock, today: date, at: datetime, faults: Faults
) -> None:
    taken = db.execute(
        "UPDATE blocks SET booked = 1 WHERE id = ? AND booked = 0", (block.block_id,)
    )
    if taken.rowcount != 1:
        return  # booked already
    rows = db.execute(
        f"SELECT {DETAIL_COLUMNS}, t.return_reason, t.return_days, t.charged FROM transfers t"
        f" {DETAIL_JOINS} WHERE t.block_id = ? AND t.reject_reason IS NULL ORDER BY t.id",
        (block.block_id,),
    ).fetchall()
    booked = [detail(row[:-3]) for row in rows]
    if not booked:
        return  # every transaction was rejected at intake
    iban = block.iban
    if block.batch:
        entries = [post(db, iban, today, Family.TRANSFER, booked, batch=True)]
    else:
        entries = [post(db, iban, today, Family.TRANSFER, [one]) for one in booked]
    for (transfer_id, found), row in zip(booked, rows, strict=True):
        return_reason, return_days, charged = row[-3:]
        if charged:
            fee = (transfer_id, found._replace(amount_minor=faults.charge_minor))
            entries.append(post(db, iban, today, Family.CHARGE, [fee]))
        if return_reason is not None:
            due = add_business_days(today, int(return_days)).isoformat()
            db.execute("UPDATE transfers SET return_date = ? WHERE id = ?", (due, transfer_id))
    _notify(db, iban, today, at, entries)
    _settled(db, block, today, at, entries)


def _book_return(
    db: sqlite3.Connection, transfer_id: int, found: Detail, iban: str, today: date, at: datetime
) -> None:
    taken = db.execute(
        "UPDATE transfers SET returned = 1 WHERE id = ? AND returned = 0", (transfer_id,)
    )
    if taken.rowcount != 1:
        return  # returned already
    entry = post(db, iban, today, Family.RETURN, [(transfer_id, found)])
    _notify(db, iban, today, at, [entry])


def _notify(
    db: sqlite3.Connection, iban: str, today: date, at: datetime, entries: list[Entry]
) -> None:
    """A camt.054 of `entries`, delivered at once."""
    issue(db, "camt.054", today, at, lambda msg_id: notification(msg_id, at, iban, entries), today)


def _settled(
    db: sqlite3.Connection, block: DueBlock, today: date, at: datetime, entries: list[Entry]
) -> None:
    """A pain.002 with TxSts ACSC for each transaction the block's entries booked."""
    statuses = tuple(
        TxStatus(d.instr_id, d.end_to_end_id, "ACSC", None, entry.servicer_ref)
        for entry in entries
        if entry.family is Family.TRANSFER
        for d in entry.details
    )
    original = Original(block.msg_id, None, None)
    booked = BlockStatus(block.pmt_inf_id, None, None, statuses)
    issue(
        db,
        "pain.002",
        today,
        at,
        lambda msg_id: status_report(msg_id, at, original, None, [booked]),
        today,
    )
