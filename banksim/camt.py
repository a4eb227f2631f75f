"""The bank's account reports: the camt.054 notification of entries as they are booked and
the camt.053 statement of a business day, both from `banksim.entries`.

A statement closes at its opening balance plus its credits minus its debits; the bank checks
that against the account's running balance before it issues one (`banksim.statements`).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import NamedTuple

from lxml import etree

from banksim.clock import end_of, start_of
from banksim.entries import Entry, entry_xml
from banksim.iso import CAMT053, CAMT054, amount, day_text, decimal_text, document, sub, timestamp


class Day(NamedTuple):
    """What a statement says about its account and day besides the entries."""

    iban: str
    day: date
    electronic_seq: int  # ElctrncSeqNb: 1, 2, 3... for the account, never restarting
    legal_seq: int  # LglSeqNb: restarts at 1 with each calendar year
    opening_minor: int  # OPBD: the previous statement's closing balance
    closing_minor: int  # CLBD


def notification(msg_id: str, at: datetime, iban: str, entries: list[Entry]) -> etree._Element:
    """A camt.054.001.08 debit or credit notification of `entries` on `iban`."""
    root = document(CAMT054)
    message = sub(root, "BkToCstmrDbtCdtNtfctn")
    _header(message, msg_id, at)
    report = sub(message, "Ntfctn")
    sub(report, "Id", msg_id)
    sub(report, "CreDtTm", timestamp(at))
    _account(report, iban)
    for entry in entries:
        entry_xml(report, entry)
    return root


def statement(msg_id: str, at: datetime, day: Day, entries: list[Entry]) -> etree._Element:
    """A camt.053.001.08 statement of `day.iban` for `day.day`."""
    root = document(CAMT053)
    message = sub(root, "BkToCstmrStmt")
    _header(message, msg_id, at)
    report = sub(message, "Stmt")
    sub(report, "Id", f"STMT{day.day:%Y%m%d}{day.electronic_seq:010d}")
    sub(report, "ElctrncSeqNb", str(day.electronic_seq))
    sub(report, "LglSeqNb", str(day.legal_seq))
    sub(report, "CreDtTm", timestamp(at))
    period = sub(report, "FrToDt")
    sub(period, "FrDtTm", timestamp(start_of(day.day)))
    sub(period, "ToDtTm", timestamp(end_of(day.day)))
    _account(report, day.iban)
    _balance(report, "OPBD", day.opening_minor, day.day)
    _balance(report, "CLBD", day.closing_minor, day.day)
    _summary(report, entries)
    for entry in entries:
        entry_xml(report, entry)
    return root


def _header(message: etree._Element, msg_id: str, at: datetime) -> None:
    header = sub(message, "GrpHdr")
    sub(header, "MsgId", msg_id)
    sub(header, "CreDtTm", timestamp(at))


def _account(report: etree._Element, iban: str) -> None:
    account = sub(report, "Acct")
    sub(account, "Id/IBAN", iban)
    sub(account, "Ccy", "EUR")


def _balance(report: etree._Element, code: str, minor: int, day: date) -> None:
    balance = sub(report, "Bal")
    sub(balance, "Tp/CdOrPrtry/Cd", code)
    amount(balance, "Amt", abs(minor))
    sub(balance, "CdtDbtInd", "DBIT" if minor < 0 else "CRDT")
    sub(balance, "Dt/Dt", day_text(day))


def _summary(report: etree._Element, entries: list[Entry]) -> None:
    credits = [e.amount_minor for e in entries if e.credit]
    debits = [e.amount_minor for e in entries if not e.credit]
    net = sum(credits) - sum(debits)
    summary = sub(report, "TxsSummry")
    total = sub(summary, "TtlNtries")
    sub(total, "NbOfNtries", str(len(entries)))
    sub(total, "Sum", decimal_text(sum(credits) + sum(debits)))
    net_entry = sub(total, "TtlNetNtry")
    sub(net_entry, "Amt", decimal_text(abs(net)))
    sub(net_entry, "CdtDbtInd", "DBIT" if net < 0 else "CRDT")
    for tag, amounts in (("TtlCdtNtries", credits), ("TtlDbtNtries", debits)):
        side = sub(summary, tag)
        sub(side, "NbOfNtries", str(len(amounts)))
        sub(side, "Sum", decimal_text(sum(amounts)))
