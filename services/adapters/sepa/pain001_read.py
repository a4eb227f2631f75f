"""Reading a pain.001.001.09 back: what a file asks the bank to pay, for tools, tests and the
bank simulator.

The file is parsed with safe_xml and held to the official XSD first (the bank refuses a
file that breaches it), then its counts are checked: NbOfTxs and CtrlSum of every block and
of the group must match the transactions, as the bank checks them. Only EUR is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from lxml import etree

from services.adapters.sepa.elements import Reader, minor_units, where
from services.adapters.sepa.errors import MalformedFile
from services.adapters.sepa.safe_xml import parse_bank_xml
from services.adapters.sepa.xsd import PAIN001_09, namespace_of, schema_problems
from services.domain.sepa import SEPA_CURRENCY


@dataclass(frozen=True, slots=True)
class RequestedTransfer:
    """One CdtTrfTxInf of a pain.001."""

    end_to_end_id: str
    amount: int  # EUR cents
    creditor_iban: str
    creditor_name: str
    execution_date: date  # its block's ReqdExctnDt
    payment_info_id: str  # its block's PmtInfId
    remittance: str | None  # RmtInf/Ustrd


@dataclass(frozen=True, slots=True)
class Pain001Contents:
    """What a pain.001 asks the bank to do."""

    msg_id: str
    created_at: datetime | None
    debtor_iban: str  # of the first block (settle writes one debtor per file)
    batch_booking: bool | None  # of the first block; None if the file leaves it to the bank
    transfers: tuple[RequestedTransfer, ...]  # in file order


def read_pain001(data: bytes) -> Pain001Contents:
    """The contents of a pain.001.001.09; HostileFile, or MalformedFile naming the problem
    (an XSD breach, a count or control sum that does not match, a currency other than EUR)."""
    root = parse_bank_xml(data)
    if namespace_of(root) != PAIN001_09:
        raise MalformedFile(f"not a pain.001.001.09: the namespace is {namespace_of(root)!r}")
    problems = schema_problems(root)
    if problems:
        raise MalformedFile("the file breaches the pain.001.001.09 XSD: " + "; ".join(problems))
    iso = Reader(PAIN001_09)
    initiation = iso.need(root, "CstmrCdtTrfInitn")
    header = iso.need(initiation, "GrpHdr")
    blocks = iso.findall(initiation, "PmtInf")
    transfers = tuple(t for block in blocks for t in _block(iso, block))
    _check_counts(iso, header, [t.amount for t in transfers])
    return Pain001Contents(
        iso.text(header, "MsgId"),
        iso.moment(header, "CreDtTm"),
        iso.text(blocks[0], "DbtrAcct/Id/IBAN"),
        iso.flag(blocks[0], "BtchBookg"),
        transfers,
    )


def _block(iso: Reader, block: etree._Element) -> list[RequestedTransfer]:
    day = iso.date_at(block, "ReqdExctnDt/Dt")
    pmt_inf_id = iso.text(block, "PmtInfId")
    transfers = [_transfer(iso, tx, day, pmt_inf_id) for tx in iso.findall(block, "CdtTrfTxInf")]
    _check_counts(iso, block, [t.amount for t in transfers])
    return transfers


def _transfer(
    iso: Reader, transaction: etree._Element, day: date, pmt_inf_id: str
) -> RequestedTransfer:
    amount, currency = iso.amount(transaction, "Amt/InstdAmt")
    if currency != SEPA_CURRENCY:
        raise MalformedFile(f"{where(transaction)}: {currency} is not a SEPA credit transfer")
    return RequestedTransfer(
        iso.text(transaction, "PmtId/EndToEndId"),
        amount,
        iso.text(transaction, "CdtrAcct/Id/IBAN"),
        iso.text(transaction, "Cdtr/Nm"),
        day,
        pmt_inf_id,
        iso.optional(transaction, "RmtInf/Ustrd"),
    )


def _check_counts(iso: Reader, element: etree._Element, amounts: list[int]) -> None:
    count = iso.whole_number(element, "NbOfTxs")
    if count is not None and count != len(amounts):
        raise MalformedFile(f"{where(element)}: NbOfTxs {count}, but {len(amounts)} transfers")
    control = iso.optional(element, "CtrlSum")
    if control is not None and minor_units(control, element) != sum(amounts):
        raise MalformedFile(f"{where(element)}: CtrlSum {control} is not the transfers' sum")
