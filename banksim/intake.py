"""Taking a file: kept byte for byte, deduplicated by its MsgId alone, its transfers' fates
decided, and its pain.002 issued, all in the caller's one transaction.

The bank deduplicates by GrpHdr/MsgId only, and forever: the UNIQUE constraint on `msg_id`
does the refusing. Never by content or EndToEndId: two files with different MsgIds and the
same EndToEndIds are both paid, as a real bank pays them; keeping that from happening is
settle's job, and `banksim.ledger.effects` is how a checker proves it did.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable
from decimal import Decimal
from typing import NamedTuple

from banksim.clock import Reading
from banksim.errors import DuplicateFile, NotFound
from banksim.faults import Faults
from banksim.iso import minor_units, timestamp
from banksim.ledger import open_account
from banksim.outcomes import Fate, batch_forced, fate
from banksim.pain001 import Block, Instruction, PaymentFile
from banksim.pain002 import BlockStatus, Original, TxStatus, status_report
from banksim.reports import issue
from services.domain.business_days import business_day_on_or_after

DDL = """
CREATE TABLE IF NOT EXISTS files (
    seq INTEGER PRIMARY KEY,                 -- the order received: the listing's cursor
    file_id TEXT NOT NULL UNIQUE,
    msg_id TEXT NOT NULL UNIQUE,             -- the dedupe: a second file with it is refused
    received_at TEXT NOT NULL,
    business_date TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    body BLOB NOT NULL                       -- byte for byte as uploaded
);
CREATE TABLE IF NOT EXISTS blocks (
    id INTEGER PRIMARY KEY,
    file_seq INTEGER NOT NULL REFERENCES files (seq),
    pmt_inf_id TEXT NOT NULL,
    debtor_iban TEXT,
    batch INTEGER NOT NULL,                  -- booked as one entry
    booking_date TEXT NOT NULL,              -- max(ReqdExctnDt, the day taken), a business day
    booked INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS blocks_due ON blocks (booking_date) WHERE booked = 0;
CREATE TABLE IF NOT EXISTS transfers (
    id INTEGER PRIMARY KEY,
    block_id INTEGER NOT NULL REFERENCES blocks (id),
    end_to_end_id TEXT NOT NULL,
    instr_id TEXT,
    amount_minor INTEGER NOT NULL,           -- 0 if the amount was refused
    creditor_name TEXT,
    creditor_iban TEXT,
    remittance TEXT NOT NULL,
    reject_reason TEXT,                      -- rejected at intake, never booked
    return_reason TEXT,                      -- returned return_days after its booking
    return_days INTEGER NOT NULL,
    charged INTEGER NOT NULL,
    return_date TEXT,                        -- set when booked, if it is to be returned
    returned INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS transfers_returns_due ON transfers (return_date) WHERE returned = 0;
"""


class Taken(NamedTuple):
    """A file the bank took."""

    file_id: str
    msg_id: str
    business_date: str


def take(
    db: sqlite3.Connection, body: bytes, payment: PaymentFile, now: Reading, faults: Faults
) -> Taken:
    """Keep the file, record its blocks and transfers with their fates, issue its pain.002;
    DuplicateFile if its MsgId was taken before."""
    today = now.business_date
    # BEGIN IMMEDIATE holds the write lock: no other change takes this number meanwhile
    seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM files").fetchone()[0]
    file_id = f"file_{seq:010d}"
    try:
        db.execute(
            "INSERT INTO files (seq, file_id, msg_id, received_at, business_date, size, sha256,"
            " body) VALUES (:seq, :file_id, :msg_id, :received_at, :business_date, :size,"
            " :sha256, :body)",
            {
                "seq": seq,
                "file_id": file_id,
                "msg_id": payment.msg_id,
                "received_at": timestamp(now.time),
                "business_date": today.isoformat(),
                "size": len(body),
                "sha256": hashlib.sha256(body).hexdigest(),
                "body": body,
            },
        )
    except sqlite3.IntegrityError:
        raise DuplicateFile(payment.msg_id, _file_id_of(db, payment.msg_id)) from None
    group_reason = _group_problem(payment)
    statuses = []
    for block in payment.blocks:
        block_reason = group_reason or _block_problem(block)
        booking = business_day_on_or_after(max(block.requested, today))
        batch = block.batch_booking or batch_forced(payment.msg_id, block.pmt_inf_id, faults)
        block_id = db.execute(
            "INSERT INTO blocks (file_seq, pmt_inf_id, debtor_iban, batch, booking_date)"
            " VALUES (?, ?, ?, ?, ?)",
            (seq, block.pmt_inf_id, block.debtor_iban, int(batch), booking.isoformat()),
        ).lastrowid
        assert block_id is not None
        fates = [_fate(i, block, block_reason, faults) for i in block.instructions]
        _record(db, block_id, block, fates)
        if block.debtor_iban is not None and any(f.reject is None for f in fates):
            open_account(db, block.debtor_iban, today)
        statuses.append(_block_status(block, fates, block_reason))
    _report(db, payment, now, group_reason, statuses)
    return Taken(file_id, payment.msg_id, today.isoformat())


def _fate(instruction: Instruction, block: Block, refused: str | None, faults: Faults) -> Fate:
    if refused is not None:
        return Fate(refused, None, 0, False)
    return fate(instruction, block.debtor_iban, faults)


def _record(db: sqlite3.Connection, block_id: int, block: Block, fates: list[Fate]) -> None:
    db.executemany(
        "INSERT INTO transfers (block_id, end_to_end_id, instr_id, amount_minor, creditor_name,"
        " creditor_iban, remittance, reject_reason, return_reason, return_days, charged)"
        " VALUES (:block_id, :end_to_end_id, :instr_id, :amount_minor, :creditor_name,"
        " :creditor_iban, :remittance, :reject, :return_reason, :return_days, :charged)",
        [_row(block_id, i, f) for i, f in zip(block.instructions, fates, strict=True)],
    )


def _row(block_id: int, instruction: Instruction, fate: Fate) -> dict[str, object]:
    return {
        "block_id": block_id,
        "end_to_end_id": instruction.end_to_end_id,
        "instr_id": instruction.instr_id,
        "amount_minor": minor_units(instruction.amount) or 0,  # 0: refused, never booked
        "creditor_name": instruction.creditor_name,
        "creditor_iban": instruction.creditor_iban,
        "remittance": instruction.remittance,
        "reject": fate.reject,
        "return_reason": fate.return_reason,
        "return_days": fate.return_days,
        "charged": int(fate.charged),
    }


def _group_problem(payment: PaymentFile) -> str | None:
    """The reason the whole file is rejected, if its header's counts are wrong."""
    instructions = payment.instructions()
    if payment.nb_of_txs != len(instructions):
        return "AM18"  # InvalidNumberOfTransactions
    if payment.ctrl_sum is not None and payment.ctrl_sum != _total(i.amount for i in instructions):
        return "AM16"  # InvalidGroupControlSum
    return None


def _block_problem(block: Block) -> str | None:
    """The reason a whole block is rejected, if its own counts are wrong."""
    if block.nb_of_txs is not None and block.nb_of_txs != len(block.instructions):
        return "AM18"
    if block.ctrl_sum is not None and block.ctrl_sum != _total(
        i.amount for i in block.instructions
    ):
        return "AM17"  # InvalidPaymentInfoControlSum
    return None


def _total(amounts: Iterable[str]) -> Decimal:
    # amounts are XSD decimals; an EqvtAmt (no InstdAmt) counts as nothing
    return sum((Decimal(a) for a in amounts if a), Decimal(0))


def _block_status(block: Block, fates: list[Fate], reason: str | None) -> BlockStatus:
    refused = tuple(
        TxStatus(i.instr_id, i.end_to_end_id, "RJCT", f.reject, None)
        for i, f in zip(block.instructions, fates, strict=True)
        if f.reject is not None
    )
    whole = len(refused) == len(block.instructions)
    return BlockStatus(block.pmt_inf_id, "RJCT" if whole else None, reason, refused)


def _report(
    db: sqlite3.Connection,
    payment: PaymentFile,
    now: Reading,
    group_reason: str | None,
    statuses: list[BlockStatus],
) -> None:
    every_one_refused = all(s.status == "RJCT" for s in statuses)
    group = ("RJCT" if every_one_refused else "ACTC", group_reason)
    # a file rejected as a whole reports only its reason, not each transaction again
    blocks = [] if group_reason else [s for s in statuses if s.transactions]
    original = Original(payment.msg_id, payment.created, payment.nb_of_txs)
    today = now.business_date
    issue(
        db,
        "pain.002",
        today,
        now.time,
        lambda msg_id: status_report(msg_id, now.time, original, group, blocks),
        due=today,
    )


def _file_id_of(db: sqlite3.Connection, msg_id: str) -> str:
    row = db.execute("SELECT file_id FROM files WHERE msg_id = ?", (msg_id,)).fetchone()
    return str(row[0])


def files_page(db: sqlite3.Connection, after: int, limit: int) -> dict[str, object]:
    """Files received after cursor `after`, at most `limit`, in the order received."""
    rows = db.execute(
        "SELECT seq, file_id, msg_id, received_at, business_date, size, sha256 FROM files"
        " WHERE seq > ? ORDER BY seq LIMIT ?",
        (after, limit),
    ).fetchall()
    fields = ("file_id", "msg_id", "received_at", "business_date", "size", "sha256")
    return {
        "files": [dict(zip(fields, row[1:], strict=True)) for row in rows],
        "next": str(rows[-1][0]) if rows else None,
    }


def file_body(db: sqlite3.Connection, file_id: str) -> bytes:
    """The bytes of a taken file, as uploaded; NotFound if no file has that id."""
    row = db.execute("SELECT body FROM files WHERE file_id = ?", (file_id,)).fetchone()
    if row is None:
        raise NotFound(f"no file {file_id}")
    return bytes(row[0])
