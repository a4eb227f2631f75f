"""A taken pain.001.001.09 file, read into what the bank acts on.

Only what the XSD guarantees is relied on; what it leaves open (an amount finer than a cent,
a creditor account given other than by IBAN) is read as found and judged later, per
transaction, by `banksim.outcomes`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from lxml import etree

from banksim.errors import FileRefused
from banksim.iso import PAIN001, text_of
from banksim.schemas import check_upload, parse_upload

NS = {"p": PAIN001}
LINES = "\x1f"  # joins Ustrd lines: a character XML text never holds, so lines stay apart


@dataclass(frozen=True, slots=True)
class Instruction:
    """One credit transfer (CdtTrfTxInf) as the debtor instructed it."""

    end_to_end_id: str
    instr_id: str | None
    amount: str  # InstdAmt's decimal text, judged per transaction
    currency: str
    creditor_name: str | None
    creditor_iban: str | None  # None if the account is not given by IBAN
    remittance: str  # the Ustrd lines, joined by LINES; "" if none


@dataclass(frozen=True, slots=True)
class Block:
    """One payment information block (PmtInf): a debit account, a date, its transfers."""

    pmt_inf_id: str
    batch_booking: bool  # BtchBookg; a bank books a batch when it is absent
    requested: date  # ReqdExctnDt (its date, if a date and time was given)
    debtor_iban: str | None
    debtor_name: str | None
    nb_of_txs: int | None
    ctrl_sum: Decimal | None
    instructions: tuple[Instruction, ...]


@dataclass(frozen=True, slots=True)
class PaymentFile:
    """A whole file: its group header and its blocks."""

    msg_id: str
    created: str  # CreDtTm as written
    nb_of_txs: int
    ctrl_sum: Decimal | None
    blocks: tuple[Block, ...]

    def instructions(self) -> list[Instruction]:
        """Every transfer of the file, block by block."""
        return [i for block in self.blocks for i in block.instructions]


def read_payment_file(body: bytes) -> PaymentFile:
    """The file in `body`; FileRefused if it is hostile or not a valid pain.001.001.09."""
    root = parse_upload(body)
    check_upload(root)
    header = root.find("p:CstmrCdtTrfInitn/p:GrpHdr", NS)
    assert header is not None  # the XSD requires it
    return PaymentFile(
        msg_id=_exact(header, "MsgId"),
        created=_text(header, "CreDtTm"),
        nb_of_txs=int(_text(header, "NbOfTxs")),
        ctrl_sum=_decimal(text_of(header, "CtrlSum", PAIN001)),
        blocks=tuple(_block(b) for b in root.iterfind("p:CstmrCdtTrfInitn/p:PmtInf", NS)),
    )


def _block(node: etree._Element) -> Block:
    count = text_of(node, "NbOfTxs", PAIN001)
    return Block(
        pmt_inf_id=_text(node, "PmtInfId"),
        batch_booking=text_of(node, "BtchBookg", PAIN001) not in ("false", "0"),
        requested=_requested(node),
        debtor_iban=text_of(node, "DbtrAcct/Id/IBAN", PAIN001),
        debtor_name=text_of(node, "Dbtr/Nm", PAIN001),
        nb_of_txs=None if count is None else int(count),
        ctrl_sum=_decimal(text_of(node, "CtrlSum", PAIN001)),
        instructions=tuple(_instruction(t) for t in node.iterfind("p:CdtTrfTxInf", NS)),
    )


def _instruction(node: etree._Element) -> Instruction:
    amount = node.find("p:Amt/p:InstdAmt", NS)
    lines = [u.text or "" for u in node.iterfind("p:RmtInf/p:Ustrd", NS)]
    return Instruction(
        end_to_end_id=_exact(node, "PmtId/EndToEndId"),
        instr_id=text_of(node, "PmtId/InstrId", PAIN001),
        # An EqvtAmt (an amount in another currency) is no SEPA amount: judged as "no amount"
        amount="" if amount is None else (amount.text or "").strip(),
        currency="" if amount is None else amount.get("Ccy", ""),
        creditor_name=text_of(node, "Cdtr/Nm", PAIN001),
        creditor_iban=text_of(node, "CdtrAcct/Id/IBAN", PAIN001),
        remittance=LINES.join(lines),
    )


def _requested(node: etree._Element) -> date:
    # Dt or DtTm: either way the date comes first, and an offset after it changes no date
    given = text_of(node, "ReqdExctnDt/Dt", PAIN001) or _text(node, "ReqdExctnDt/DtTm")
    try:
        return date.fromisoformat(given[: len("YYYY-MM-DD")])
    except ValueError as e:
        raise FileRefused(f"ReqdExctnDt {given}: not a date the bank can book on") from e


def _text(node: etree._Element, path: str) -> str:
    """The text of an element the XSD requires."""
    text = text_of(node, path, PAIN001)
    assert text is not None, path
    return text


def _exact(node: etree._Element, path: str) -> str:
    """The text of an identifier the XSD requires, exactly as written: the bank compares
    MsgIds and EndToEndIds as they are, spaces and all."""
    found = node.find("/".join(f"p:{tag}" for tag in path.split("/")), NS)
    assert found is not None and found.text is not None, path
    return found.text


def _decimal(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)
