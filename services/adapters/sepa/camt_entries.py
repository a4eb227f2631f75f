"""The entries and balances of camt.053 statements and camt.054 notifications, read alike
from versions 001.02 and 001.08.

The versions differ where it matters in two places: an entry's status is `Sts` text in .02
and `Sts/Cd` in .08, and a transaction's amount is `AmtDtls/TxAmt/Amt` in .02 where .08 also
allows `Amt`. Both are read whichever form is present.

An amount is always positive, beside its CdtDbtInd; `signed` turns it into a movement of the
account (credit +, debit -). A return is a CRDT entry whose transaction carries RtrInf: its
Refs/EndToEndId is the original transfer's, and RtrInf/Rsn/Cd says why it came back.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from enum import StrEnum

from lxml import etree

from services.adapters.sepa.elements import Reader, where
from services.adapters.sepa.errors import MalformedFile


class CreditDebit(StrEnum):
    """Which way an amount moves the account."""

    CREDIT = "CRDT"
    DEBIT = "DBIT"


class EntryStatus(StrEnum):
    """An entry's status: only BOOK entries move the booked balance."""

    BOOKED = "BOOK"
    PENDING = "PDNG"
    INFORMATION = "INFO"
    FUTURE = "FUTR"


@dataclass(frozen=True, slots=True)
class BankTransactionCode:
    """BkTxCd/Domn: PMNT/ICDT/ESCT a SEPA credit transfer, PMNT/ICDT/RRTN its return,
    PMNT/ICDT/CHRG or ACMT/MDOP/CHRG a charge."""

    domain: str
    family: str
    subfamily: str


@dataclass(frozen=True, slots=True)
class Balance:
    """One Bal of a statement."""

    kind: str  # Tp/CdOrPrtry/Cd: OPBD, CLBD, PRCD, ITBD, ...
    amount: int  # cents, not negative
    currency: str
    direction: CreditDebit
    day: date  # Dt/Dt, or Dt/DtTm's date

    @property
    def signed(self) -> int:
        """The balance as a signed amount: negative when it is a debit (overdrawn)."""
        return self.amount if self.direction is CreditDebit.CREDIT else -self.amount


@dataclass(frozen=True, slots=True)
class EntryTransaction:
    """One TxDtls of an entry."""

    end_to_end_id: str | None  # Refs/EndToEndId; for a return, the original transfer's
    amount: int | None  # cents, when the bank states it per transaction
    return_reason: str | None  # RtrInf/Rsn/Cd (or Prtry) when this is a return

    @property
    def returned_end_to_end_id(self) -> str | None:
        """The EndToEndId of the transfer this transaction returns; None if it is no return."""
        return self.end_to_end_id if self.return_reason is not None else None


@dataclass(frozen=True, slots=True)
class Entry:
    """One Ntry: a booking (or a pending one) on the account."""

    reference: str | None  # NtryRef
    servicer_reference: str | None  # AcctSvcrRef, the bank's own
    amount: int  # cents, not negative
    currency: str
    direction: CreditDebit
    reversal: bool  # RvslInd: this entry undoes an earlier one
    status: EntryStatus
    booking_date: date | None
    value_date: date | None
    code: BankTransactionCode | None  # None when the bank gives only a proprietary code
    batch: bool  # NtryDtls/Btch is present: one booking for several transfers
    batch_payment_info_id: str | None  # Btch/PmtInfId: our PmtInf, when the bank names it
    batch_count: int | None  # Btch/NbOfTxs
    transactions: tuple[EntryTransaction, ...]

    @property
    def signed(self) -> int:
        """The entry's movement of the account: credit +, debit -."""
        return self.amount if self.direction is CreditDebit.CREDIT else -self.amount


def _direction(iso: Reader, element: etree._Element) -> CreditDebit:
    text = iso.text(element, "CdtDbtInd")
    try:
        return CreditDebit(text)
    except ValueError:
        raise MalformedFile(f"{where(element)}: CdtDbtInd {text!r} is not CRDT or DBIT") from None


def read_balance(iso: Reader, element: etree._Element) -> Balance:
    """A Bal element, read whole; MalformedFile if it lacks a part."""
    kind = iso.code(element, "Tp/CdOrPrtry")
    day = iso.day(element, "Dt")
    if kind is None or day is None:
        raise MalformedFile(f"{where(element)} lacks Tp/CdOrPrtry or Dt")
    amount, currency = iso.amount(element, "Amt")
    return Balance(kind, amount, currency, _direction(iso, element), day)


def _status(iso: Reader, entry: etree._Element) -> EntryStatus:
    status = iso.need(entry, "Sts")
    # .08: <Sts><Cd>BOOK</Cd></Sts>; .02: <Sts>BOOK</Sts>
    text = (iso.optional(status, "Cd") or "") if len(status) else (status.text or "").strip()
    try:
        return EntryStatus(text)
    except ValueError:
        raise MalformedFile(f"{where(status)}: {text!r} is not BOOK, PDNG, INFO or FUTR") from None


def _code(iso: Reader, entry: etree._Element) -> BankTransactionCode | None:
    domain = iso.find(entry, "BkTxCd/Domn")
    if domain is None:
        return None
    return BankTransactionCode(
        iso.text(domain, "Cd"), iso.text(domain, "Fmly/Cd"), iso.text(domain, "Fmly/SubFmlyCd")
    )


def _transaction(iso: Reader, details: etree._Element) -> EntryTransaction:
    amount = None
    for path in ("Amt", "AmtDtls/TxAmt/Amt", "AmtDtls/InstdAmt/Amt"):
        if iso.find(details, path) is not None:
            amount, _ = iso.amount(details, path)
            break
    return_info = iso.find(details, "RtrInf")
    reason = None
    if return_info is not None:
        reason = iso.code(return_info, "Rsn")
        if reason is None:
            raise MalformedFile(f"{where(return_info)} has no Rsn")
    return EntryTransaction(iso.optional(details, "Refs/EndToEndId"), amount, reason)


def read_entry(iso: Reader, entry: etree._Element) -> Entry:
    """An Ntry element with its transactions, read whole; MalformedFile if it lacks a
    mandatory part or holds one that cannot be read."""
    amount, currency = iso.amount(entry, "Amt")
    batch = iso.find(entry, "NtryDtls/Btch")
    return Entry(
        reference=iso.optional(entry, "NtryRef"),
        servicer_reference=iso.optional(entry, "AcctSvcrRef"),
        amount=amount,
        currency=currency,
        direction=_direction(iso, entry),
        reversal=iso.flag(entry, "RvslInd") or False,
        status=_status(iso, entry),
        booking_date=iso.day(entry, "BookgDt"),
        value_date=iso.day(entry, "ValDt"),
        code=_code(iso, entry),
        batch=batch is not None,
        batch_payment_info_id=None if batch is None else iso.optional(batch, "PmtInfId"),
        batch_count=None if batch is None else iso.whole_number(batch, "NbOfTxs"),
        transactions=tuple(_transaction(iso, d) for d in iso.findall(entry, "NtryDtls/TxDtls")),
    )
