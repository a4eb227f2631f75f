"""Writing a pain.001.001.09 (CstmrCdtTrfInitn): settle's SEPA credit transfers, as a file for
its bank.

The file holds one PmtInf per requested execution date, in date order, each with its
transfers in EndToEndId order, so a batch makes the same document whatever order it came in.
Each block is PmtMtd TRF, SvcLvl SEPA, ChrgBr SLEV (the only charge bearer the EPC rulebook
allows) and BtchBookg as asked; its DbtrAgt is the debtor's BIC, or `Othr/Id NOTPROVIDED`
(the EPC's form for "no BIC") without one. Amounts are decimal text with two decimals made
from integer cents, and NbOfTxs and CtrlSum are written for every block and for the file.

MsgId. The bank takes a MsgId once, forever, and never deduplicates by content (bank_api.md:
409 DU01). So the MsgId is made from the batch's content and nothing else: `SETTLE-` and the
first 28 hex digits of SHA-256 over a versioned JSON array of the debtor, the batch flag and
every transfer as written (date, EndToEndId, amount, creditor, IBANs, BICs, remittance),
sorted. Writing the same batch again, after a crash or a day later, gives the same MsgId and
the bank refuses the second file; a batch that differs in anything gets another. The creation
time is left out for that reason. PmtInfId is the MsgId's first 26 characters, `-` and the
execution date as YYYYMMDD: 35 characters, one per date of the file.

Names and remittance text pass through `sepa_text` (diacritics spelled out, anything without
a spelling in the SEPA set refused), IBANs through `compact_iban`. Nothing is cut to length:
a name over 70 characters is refused (the EPC's limit; the ISO XSD of .09 allows 140), and
an empty one or a remittance over 140 breaches the XSD. The bytes are parsed back and
validated against the official XSD before they are returned; every problem found, in the
input or against the XSD, is named in one Pain001Refused, and no file leaves.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import NamedTuple

import orjson
from lxml import etree

from services.adapters.sepa.errors import Pain001Refused, SepaFileError
from services.adapters.sepa.safe_xml import parse_bank_xml
from services.adapters.sepa.xsd import PAIN001_09, schema_problems
from services.domain.sepa import (
    MAX_CREDITOR_NAME,
    MAX_TRANSFER_AMOUNT,
    SEPA_CURRENCY,
    compact_iban,
    is_bic,
    is_sepa_reference,
    sepa_text,
)

MSG_ID_SCHEME = "settle.sepa.pain001.msg-id.v1"
MSG_ID_PREFIX = "SETTLE-"
NO_BIC = "NOTPROVIDED"
XML_DECLARATION = b'<?xml version="1.0" encoding="UTF-8"?>\n'


@dataclass(frozen=True, slots=True)
class Debtor:
    """The account settle pays from: initiating party and debtor of every block."""

    name: str  # the account holder's name, as the bank knows it
    iban: str  # a SEPA IBAN, compact or in printed groups
    bic: str | None = None  # the debtor bank's BIC; optional in SEPA


@dataclass(frozen=True, slots=True)
class CreditTransfer:
    """One settlement's transfer, as it goes into a pain.001."""

    end_to_end_id: str  # services.domain.sepa.end_to_end_id of the settlement
    amount: int  # EUR cents, 1 .. MAX_TRANSFER_AMOUNT
    creditor_name: str  # at most 70 characters once in the SEPA character set
    creditor_iban: str  # a SEPA IBAN, compact or in printed groups
    remittance: str  # the settlement's reference: RmtInf/Ustrd, at most 140 characters
    execution_date: date  # the requested execution date: one PmtInf per date
    creditor_bic: str | None = None  # optional in SEPA


class Pain001(NamedTuple):
    """A written pain.001.001.09, valid against the XSD."""

    msg_id: str  # the file's MsgId, deterministic for its content
    data: bytes  # the UTF-8 XML, exactly as it is to be uploaded


def payment_info_id(msg_id: str, execution_date: date) -> str:
    """The PmtInfId of a file's block for one execution date."""
    return f"{msg_id[:26]}-{execution_date:%Y%m%d}"


def build_pain001(
    debtor: Debtor,
    transfers: Sequence[CreditTransfer],
    *,
    batch_booking: bool,
    created_at: datetime,
) -> Pain001:
    """The pain.001.001.09 paying `transfers` from `debtor`, created at `created_at` (aware);
    Pain001Refused naming every problem if it cannot be written valid."""
    if created_at.tzinfo is None:
        raise ValueError("created_at must be an aware datetime")
    reasons: list[str] = []
    debtor = _written_debtor(debtor, reasons)
    written = sorted(
        (_written_transfer(t, reasons) for t in transfers),
        key=lambda t: (t.execution_date, t.end_to_end_id),
    )
    reasons.extend(_batch_problems(written))
    if reasons:
        raise Pain001Refused(reasons)
    msg_id = _msg_id(debtor, written, batch_booking)
    document = _document(debtor, written, msg_id, batch_booking, created_at)
    data = XML_DECLARATION + etree.tostring(document, encoding="UTF-8", pretty_print=True)
    try:
        problems = schema_problems(parse_bank_xml(data))
    except SepaFileError as e:
        problems = [e.reason]
    if problems:
        raise Pain001Refused(problems)
    return Pain001(msg_id, data)


def _text(value: str, what: str, reasons: list[str], limit: int | None = None) -> str:
    try:
        written = sepa_text(value)
    except ValueError as e:
        reasons.append(f"{what}: {e}")
        return value
    if limit is not None and len(written) > limit:
        reasons.append(f"{what}: {len(written)} characters, above the EPC's {limit}")
    return written


def _iban(value: str, what: str, reasons: list[str]) -> str:
    try:
        return compact_iban(value)
    except ValueError as e:
        reasons.append(f"{what}: {e}")
        return value


def _bic(value: str | None, what: str, reasons: list[str]) -> str | None:
    if value is not None and not is_bic(value):
        reasons.append(f"{what}: {value!r} is not a BIC")
    return value


def _written_debtor(debtor: Debtor, reasons: list[str]) -> Debtor:
    return Debtor(
        _text(debtor.name, "debtor name", reasons, MAX_CREDITOR_NAME),
        _iban(debtor.iban, "debtor IBAN", reasons),
        _bic(debtor.bic, "debtor BIC", reasons),
    )


def _written_transfer(transfer: CreditTransfer, reasons: list[str]) -> CreditTransfer:
    what = f"transfer {transfer.end_to_end_id!r}"
    if not is_sepa_reference(transfer.end_to_end_id):
        reasons.append(f"{what}: not an EndToEndId the EPC allows")
    amount = transfer.amount
    if type(amount) is not int or not 0 < amount <= MAX_TRANSFER_AMOUNT:
        reasons.append(f"{what}: amount {amount!r} is not 1 .. {MAX_TRANSFER_AMOUNT} cents")
    return replace(
        transfer,
        creditor_name=_text(
            transfer.creditor_name, f"{what} creditor name", reasons, MAX_CREDITOR_NAME
        ),
        creditor_iban=_iban(transfer.creditor_iban, f"{what} creditor IBAN", reasons),
        creditor_bic=_bic(transfer.creditor_bic, f"{what} creditor BIC", reasons),
        remittance=_text(transfer.remittance, f"{what} remittance", reasons),
    )


def _batch_problems(transfers: Sequence[CreditTransfer]) -> list[str]:
    if not transfers:
        return ["a pain.001 needs at least one transfer"]
    counts = Counter(t.end_to_end_id for t in transfers)
    repeated = sorted(i for i, n in counts.items() if n > 1)
    return [f"EndToEndId {i!r} is in the batch more than once" for i in repeated]


def _msg_id(debtor: Debtor, transfers: Sequence[CreditTransfer], batch_booking: bool) -> str:
    rows = [
        [
            t.execution_date.isoformat(),
            t.end_to_end_id,
            t.amount,
            t.creditor_name,
            t.creditor_iban,
            t.creditor_bic,
            t.remittance,
        ]
        for t in transfers
    ]
    content = [MSG_ID_SCHEME, debtor.name, debtor.iban, debtor.bic, batch_booking, rows]
    digest = hashlib.sha256(orjson.dumps(content)).hexdigest()
    return MSG_ID_PREFIX + digest[:28]


def decimal_amount(cents: int) -> str:
    """Cents as the decimal text of a file: 123456 -> "1234.56"."""
    return f"{cents // 100}.{cents % 100:02d}"


def _sub(parent: etree._Element, path: str, text: str | None = None) -> etree._Element:
    """The element at `path` below `parent`, made step by step; `text` set on the last."""
    element = parent
    for step in path.split("/"):
        element = etree.SubElement(element, f"{{{PAIN001_09}}}{step}")
    if text is not None:
        element.text = text
    return element


def _document(
    debtor: Debtor,
    transfers: Sequence[CreditTransfer],
    msg_id: str,
    batch_booking: bool,
    created_at: datetime,
) -> etree._Element:
    document = etree.Element(f"{{{PAIN001_09}}}Document", nsmap={None: PAIN001_09})
    initiation = _sub(document, "CstmrCdtTrfInitn")
    header = _sub(initiation, "GrpHdr")
    _sub(header, "MsgId", msg_id)
    _sub(header, "CreDtTm", created_at.isoformat(timespec="seconds"))
    _sub(header, "NbOfTxs", str(len(transfers)))
    _sub(header, "CtrlSum", decimal_amount(sum(t.amount for t in transfers)))
    _sub(header, "InitgPty/Nm", debtor.name)
    for day in sorted({t.execution_date for t in transfers}):
        block = [t for t in transfers if t.execution_date == day]
        _payment_block(initiation, debtor, block, payment_info_id(msg_id, day), batch_booking)
    return document


def _payment_block(
    initiation: etree._Element,
    debtor: Debtor,
    transfers: Sequence[CreditTransfer],
    pmt_inf_id: str,
    batch_booking: bool,
) -> None:
    block = _sub(initiation, "PmtInf")
    _sub(block, "PmtInfId", pmt_inf_id)
    _sub(block, "PmtMtd", "TRF")
    _sub(block, "BtchBookg", "true" if batch_booking else "false")
    _sub(block, "NbOfTxs", str(len(transfers)))
    _sub(block, "CtrlSum", decimal_amount(sum(t.amount for t in transfers)))
    _sub(block, "PmtTpInf/SvcLvl/Cd", "SEPA")
    _sub(block, "ReqdExctnDt/Dt", transfers[0].execution_date.isoformat())
    _sub(block, "Dbtr/Nm", debtor.name)
    _sub(block, "DbtrAcct/Id/IBAN", debtor.iban)
    if debtor.bic is None:
        _sub(block, "DbtrAgt/FinInstnId/Othr/Id", NO_BIC)
    else:
        _sub(block, "DbtrAgt/FinInstnId/BICFI", debtor.bic)
    _sub(block, "ChrgBr", "SLEV")
    for transfer in transfers:
        _transaction(block, transfer)


def _transaction(block: etree._Element, transfer: CreditTransfer) -> None:
    transaction = _sub(block, "CdtTrfTxInf")
    _sub(transaction, "PmtId/EndToEndId", transfer.end_to_end_id)
    amount = _sub(transaction, "Amt/InstdAmt", decimal_amount(transfer.amount))
    amount.set("Ccy", SEPA_CURRENCY)
    if transfer.creditor_bic is not None:
        _sub(transaction, "CdtrAgt/FinInstnId/BICFI", transfer.creditor_bic)
    _sub(transaction, "Cdtr/Nm", transfer.creditor_name)
    _sub(transaction, "CdtrAcct/Id/IBAN", transfer.creditor_iban)
    _sub(transaction, "RmtInf/Ustrd", transfer.remittance)
