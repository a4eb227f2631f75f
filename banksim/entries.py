"""Booked entries as camt.053 and camt.054 report them (ReportEntry10), shared by both.

An entry is one movement on the account: a SEPA credit transfer debited (alone, or a batch
carrying every transaction's details), a return credited with the original EndToEndId and
the reason, or a charge debited on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from typing import NamedTuple

from lxml import etree

from banksim.iso import amount, day_text, sub
from banksim.pain001 import LINES


class Family(StrEnum):
    """The bank transaction code's sub-family (domain PMNT, family ICDT)."""

    TRANSFER = "ESCT"  # a SEPA credit transfer, debited
    RETURN = "RRTN"  # a transfer's return, credited
    CHARGE = "CHRG"  # the bank's fee for a transfer, debited


class Detail(NamedTuple):
    """One transaction inside an entry, as its file instructed it."""

    msg_id: str  # of the pain.001 it came in
    pmt_inf_id: str
    instr_id: str | None
    end_to_end_id: str
    amount_minor: int  # the transaction's own amount (the fee, for a charge)
    creditor_name: str | None
    creditor_iban: str | None
    remittance: str  # the Ustrd lines, joined by LINES
    return_reason: str | None  # only on a return


@dataclass(frozen=True, slots=True)
class Entry:
    """One booking on an account."""

    entry_id: int
    booking_date: date
    credit: bool  # CRDT if true, DBIT otherwise
    amount_minor: int
    family: Family
    batch: bool  # a batch booking: one entry, its transactions in the details
    details: tuple[Detail, ...]

    @property
    def entry_ref(self) -> str:
        """NtryRef: unique across the bank."""
        return f"NTRY{self.entry_id:012d}"

    @property
    def servicer_ref(self) -> str:
        """AcctSvcrRef: the bank's own reference, unique across the bank."""
        return f"BKSIM{self.booking_date:%Y%m%d}{self.entry_id:010d}"

    @property
    def direction(self) -> str:
        """CdtDbtInd: CRDT or DBIT."""
        return "CRDT" if self.credit else "DBIT"


def entry_xml(parent: etree._Element, entry: Entry) -> None:
    """Append `entry` to a Stmt or Ntfctn as an `Ntry`."""
    node = sub(parent, "Ntry")
    sub(node, "NtryRef", entry.entry_ref)
    amount(node, "Amt", entry.amount_minor)
    sub(node, "CdtDbtInd", entry.direction)
    sub(node, "Sts/Cd", "BOOK")
    sub(node, "BookgDt/Dt", day_text(entry.booking_date))
    sub(node, "ValDt/Dt", day_text(entry.booking_date))
    sub(node, "AcctSvcrRef", entry.servicer_ref)
    _bank_code(node, entry.family)
    details = sub(node, "NtryDtls")
    if entry.batch:
        batch = sub(details, "Btch")
        sub(batch, "MsgId", entry.details[0].msg_id)
        sub(batch, "PmtInfId", entry.details[0].pmt_inf_id)
        sub(batch, "NbOfTxs", str(len(entry.details)))
        amount(batch, "TtlAmt", entry.amount_minor)
        sub(batch, "CdtDbtInd", entry.direction)
    for detail in entry.details:
        _transaction(details, entry, detail)
    if entry.family is Family.CHARGE:
        sub(node, "AddtlNtryInf", "Charge for a SEPA credit transfer")


def _transaction(parent: etree._Element, entry: Entry, detail: Detail) -> None:
    node = sub(parent, "TxDtls")
    refs = sub(node, "Refs")
    sub(refs, "MsgId", detail.msg_id)
    sub(refs, "AcctSvcrRef", entry.servicer_ref)
    sub(refs, "PmtInfId", detail.pmt_inf_id)
    if detail.instr_id is not None:
        sub(refs, "InstrId", detail.instr_id)
    sub(refs, "EndToEndId", detail.end_to_end_id)
    amount(node, "Amt", detail.amount_minor)
    sub(node, "CdtDbtInd", entry.direction)
    _bank_code(node, entry.family)
    if entry.family is not Family.CHARGE:
        parties = sub(node, "RltdPties")
        if detail.creditor_name is not None:
            sub(parties, "Cdtr/Pty/Nm", detail.creditor_name)
        if detail.creditor_iban is not None:
            sub(parties, "CdtrAcct/Id/IBAN", detail.creditor_iban)
        if detail.remittance:
            remittance = sub(node, "RmtInf")
            for line in detail.remittance.split(LINES):
                sub(remittance, "Ustrd", line)
    if detail.return_reason is not None:
        sub(node, "RtrInf/Rsn/Cd", detail.return_reason)


def _bank_code(parent: etree._Element, family: Family) -> None:
    domain = sub(parent, "BkTxCd/Domn")
    sub(domain, "Cd", "PMNT")
    codes = sub(domain, "Fmly")
    sub(codes, "Cd", "ICDT")
    sub(codes, "SubFmlyCd", family.value)
