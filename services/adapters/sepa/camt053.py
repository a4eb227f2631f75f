"""Reading a camt.053 (BkToCstmrStmt, versions 001.02 and 001.08): the bank's end-of-day
statement of settle's account, and the check that its balances add up.

A statement must name its account by IBAN and carry an opening balance (OPBD, or PRCD, the
previous day's closing, where a bank gives that instead) and a closing one (CLBD); without
them it cannot be reconciled, so it is refused. The account's currency is Acct/Ccy, or the
closing balance's when the bank leaves Acct/Ccy out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from lxml import etree

from services.adapters.sepa.camt_entries import (
    Balance,
    Entry,
    EntryStatus,
    read_balance,
    read_entry,
)
from services.adapters.sepa.elements import Reader, where
from services.adapters.sepa.errors import MalformedFile
from services.adapters.sepa.safe_xml import parse_bank_xml
from services.adapters.sepa.xsd import CAMT053_02, CAMT053_08, namespace_of, version_of

OPENING_KINDS = ("OPBD", "PRCD")  # in order of preference
CLOSING_KIND = "CLBD"


@dataclass(frozen=True, slots=True)
class Statement:
    """One Stmt: a day's bookings on one account."""

    statement_id: str  # Id
    electronic_sequence: int | None  # ElctrncSeqNb: continuous across statements
    legal_sequence: int | None  # LglSeqNb: restarts at 1 each year
    created_at: datetime | None  # Stmt/CreDtTm (mandatory in .02, optional in .08)
    account_iban: str
    currency: str
    opening: Balance
    closing: Balance
    balances: tuple[Balance, ...]  # every Bal, in file order
    entries: tuple[Entry, ...]  # in file order


@dataclass(frozen=True, slots=True)
class StatementReport:
    """A camt.053 file."""

    msg_id: str
    created_at: datetime | None  # GrpHdr/CreDtTm
    version: str  # "001.02" or "001.08"
    statements: tuple[Statement, ...]


def read_camt053(data: bytes) -> StatementReport:
    """The statements of a camt.053 file; HostileFile or MalformedFile naming the problem."""
    return statement_report_of(parse_bank_xml(data))


def statement_report_of(root: etree._Element) -> StatementReport:
    """The statements of a parsed camt.053 document; MalformedFile if it is not one (.02,
    .08) or cannot be read whole."""
    namespace = namespace_of(root)
    if namespace not in (CAMT053_02, CAMT053_08):
        raise MalformedFile(f"not a camt.053.001.02 or .08: the namespace is {namespace!r}")
    iso = Reader(namespace)
    message = iso.need(root, "BkToCstmrStmt")
    return StatementReport(
        iso.text(message, "GrpHdr/MsgId"),
        iso.moment(message, "GrpHdr/CreDtTm"),
        version_of(namespace),
        tuple(_statement(iso, s) for s in iso.need_all(message, "Stmt")),
    )


def _statement(iso: Reader, element: etree._Element) -> Statement:
    balances = tuple(read_balance(iso, b) for b in iso.findall(element, "Bal"))
    kinds = {b.kind: b for b in reversed(balances)}  # the first of each kind wins
    opening = next((kinds[k] for k in OPENING_KINDS if k in kinds), None)
    closing = kinds.get(CLOSING_KIND)
    if opening is None or closing is None:
        raise MalformedFile(f"{where(element)} lacks an opening (OPBD) or closing (CLBD) Bal")
    return Statement(
        statement_id=iso.text(element, "Id"),
        electronic_sequence=iso.whole_number(element, "ElctrncSeqNb"),
        legal_sequence=iso.whole_number(element, "LglSeqNb"),
        created_at=iso.moment(element, "CreDtTm"),
        account_iban=iso.text(element, "Acct/Id/IBAN"),
        currency=iso.optional(element, "Acct/Ccy") or closing.currency,
        opening=opening,
        closing=closing,
        balances=balances,
        entries=tuple(read_entry(iso, e) for e in iso.findall(element, "Ntry")),
    )


def booked_movement(statement: Statement) -> int:
    """The sum of the statement's booked entries, signed (credit +, debit -), in cents."""
    return sum(e.signed for e in statement.entries if e.status is EntryStatus.BOOKED)


def balance_gap(statement: Statement) -> int:
    """Closing minus (opening plus booked entries), in cents: 0 when the statement adds up."""
    return statement.closing.signed - statement.opening.signed - booked_movement(statement)


def closing_balance_agrees(statement: Statement) -> bool:
    """True if the closing balance is the opening one plus the booked entries, in one
    currency."""
    same_currency = statement.opening.currency == statement.closing.currency
    return same_currency and balance_gap(statement) == 0
