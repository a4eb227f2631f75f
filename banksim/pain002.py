"""pain.002.001.10 customer payment status reports: one when a file is taken (the group
ACTC with each refused transaction RJCT and its reason, or the whole group RJCT), and one
when a block is booked (each booked transaction ACSC)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from lxml import etree

from banksim.iso import PAIN002, document, sub, timestamp

ORIGINAL_NAME = "pain.001.001.09"


class TxStatus(NamedTuple):
    """One transaction's status."""

    instr_id: str | None
    end_to_end_id: str
    status: str  # RJCT or ACSC
    reason: str | None  # the ISO status reason of a RJCT
    servicer_ref: str | None  # AcctSvcrRef of the entry that booked it, for an ACSC


class BlockStatus(NamedTuple):
    """A payment information block's status and the transactions reported in it."""

    pmt_inf_id: str
    status: str | None  # PmtInfSts, if the block as a whole has one
    reason: str | None
    transactions: tuple[TxStatus, ...]


class Original(NamedTuple):
    """The file reported on."""

    msg_id: str
    created: str | None  # its CreDtTm, as written
    nb_of_txs: int | None


def status_report(
    msg_id: str,
    at: datetime,
    original: Original,
    group: tuple[str, str | None] | None,
    blocks: list[BlockStatus],
) -> etree._Element:
    """A pain.002.001.10 on `original`: the group status and reason (if `group`), then the
    blocks' and their transactions' statuses."""
    root = document(PAIN002)
    report = sub(root, "CstmrPmtStsRpt")
    header = sub(report, "GrpHdr")
    sub(header, "MsgId", msg_id)
    sub(header, "CreDtTm", timestamp(at))
    info = sub(report, "OrgnlGrpInfAndSts")
    sub(info, "OrgnlMsgId", original.msg_id)
    sub(info, "OrgnlMsgNmId", ORIGINAL_NAME)
    if original.created is not None:
        sub(info, "OrgnlCreDtTm", original.created)
    if original.nb_of_txs is not None:
        sub(info, "OrgnlNbOfTxs", str(original.nb_of_txs))
    if group is not None:
        status, reason = group
        sub(info, "GrpSts", status)
        _reason(info, reason)
    for block in blocks:
        _block(report, block)
    return root


def _block(report: etree._Element, block: BlockStatus) -> None:
    node = sub(report, "OrgnlPmtInfAndSts")
    sub(node, "OrgnlPmtInfId", block.pmt_inf_id)
    if block.status is not None:
        sub(node, "PmtInfSts", block.status)
        _reason(node, block.reason)
    for tx in block.transactions:
        status = sub(node, "TxInfAndSts")
        if tx.instr_id is not None:
            sub(status, "OrgnlInstrId", tx.instr_id)
        sub(status, "OrgnlEndToEndId", tx.end_to_end_id)
        sub(status, "TxSts", tx.status)
        _reason(status, tx.reason)
        if tx.servicer_ref is not None:
            sub(status, "AcctSvcrRef", tx.servicer_ref)


def _reason(parent: etree._Element, code: str | None) -> None:
    if code is not None:
        sub(parent, "StsRsnInf/Rsn/Cd", code)
