"""pain.001.001.09 files made by hand, to poke the bank with: the tests' files, and a quick
one from the shell (`python -m banksim.payment_files > f.xml`).

Deliberately simple and separate from settle's own file builder: the bank must judge files
without trusting the code that writes them, so its tests do not share that code.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import date

from lxml import etree

from banksim.iso import PAIN001, amount, decimal_text, document, serialised, sub

DEBTOR_IBAN = "DE89370400440532013000"
CREDITOR_IBAN = "FR1420041010050500013M02606"


@dataclass(frozen=True, slots=True)
class Transfer:
    """One CdtTrfTxInf."""

    end_to_end_id: str
    amount_minor: int = 1000
    remittance: str | None = None
    creditor_iban: str = CREDITOR_IBAN
    currency: str = "EUR"


@dataclass(frozen=True, slots=True)
class PaymentBlock:
    """One PmtInf."""

    transfers: tuple[Transfer, ...]
    pmt_inf_id: str = "PMT-1"
    batch_booking: bool | None = None  # None leaves BtchBookg out
    requested: date = date(2000, 1, 3)  # long past: booked the day the file is taken
    debtor_iban: str = DEBTOR_IBAN


@dataclass(frozen=True, slots=True)
class PaymentFileSpec:
    """A whole file."""

    msg_id: str
    blocks: tuple[PaymentBlock, ...] = field(default_factory=tuple)


def payment_file(spec: PaymentFileSpec) -> bytes:
    """The file `spec` describes, as bytes."""
    root = document(PAIN001)
    initiation = sub(root, "CstmrCdtTrfInitn")
    header = sub(initiation, "GrpHdr")
    sub(header, "MsgId", spec.msg_id)
    sub(header, "CreDtTm", "2026-01-05T10:00:00")
    transfers = [t for block in spec.blocks for t in block.transfers]
    sub(header, "NbOfTxs", str(len(transfers)))
    sub(header, "CtrlSum", decimal_text(sum(t.amount_minor for t in transfers)))
    sub(header, "InitgPty/Nm", "settle platform")
    for block in spec.blocks:
        _block(initiation, block)
    return serialised(root)


def one_transfer_file(msg_id: str, *transfers: Transfer, batch: bool | None = None) -> bytes:
    """A file of one block holding `transfers`."""
    block = PaymentBlock(tuple(transfers), batch_booking=batch)
    return payment_file(PaymentFileSpec(msg_id, (block,)))


def _block(parent: etree._Element, block: PaymentBlock) -> None:
    node = sub(parent, "PmtInf")
    sub(node, "PmtInfId", block.pmt_inf_id)
    sub(node, "PmtMtd", "TRF")
    if block.batch_booking is not None:
        sub(node, "BtchBookg", "true" if block.batch_booking else "false")
    sub(node, "NbOfTxs", str(len(block.transfers)))
    sub(node, "PmtTpInf/SvcLvl/Cd", "SEPA")
    sub(node, "ReqdExctnDt/Dt", block.requested.isoformat())
    sub(node, "Dbtr/Nm", "settle platform")
    sub(node, "DbtrAcct/Id/IBAN", block.debtor_iban)
    sub(node, "DbtrAgt/FinInstnId/Othr/Id", "NOTPROVIDED")
    sub(node, "ChrgBr", "SLEV")
    for transfer in block.transfers:
        tx = sub(node, "CdtTrfTxInf")
        sub(tx, "PmtId/EndToEndId", transfer.end_to_end_id)
        amounts = sub(tx, "Amt")
        amount(amounts, "InstdAmt", transfer.amount_minor, transfer.currency)
        sub(tx, "Cdtr/Nm", "A creditor")
        sub(tx, "CdtrAcct/Id/IBAN", transfer.creditor_iban)
        if transfer.remittance is not None:
            sub(tx, "RmtInf/Ustrd", transfer.remittance)


if __name__ == "__main__":
    msg_id = sys.argv[1] if len(sys.argv) > 1 else "MSG-FROM-THE-SHELL"
    sys.stdout.buffer.write(one_transfer_file(msg_id, Transfer(f"{msg_id}-1")))
