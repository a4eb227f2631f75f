"""Reading a pain.002 (CstmrPmtStsRpt, versions 001.10 and 001.03): the bank's word on a
pain.001 it took.

On each file the bank sends the group status (ACTC: technically accepted) with a RJCT per
refused transaction and its reason code (AC01, AC04, AM04, BE04, MS03, ...), or RJCT for the
whole group; later, optionally, ACSC per transaction once booked. The two versions have the
same shape where settle reads them.

Every transaction status must name the original EndToEndId and a TxSts: a status that cannot
be matched to a transfer, or a status code outside ISO's list, refuses the whole report
rather than being skipped. A reason is the first StsRsnInf/Rsn's Cd (or Prtry).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from lxml import etree

from services.adapters.sepa.elements import Reader, where
from services.adapters.sepa.errors import MalformedFile
from services.adapters.sepa.safe_xml import parse_bank_xml
from services.adapters.sepa.xsd import PAIN002_03, PAIN002_10, namespace_of


class PaymentStatus(StrEnum):
    """ISO's ExternalPaymentGroupStatus1Code and ExternalPaymentTransactionStatus1Code."""

    RECEIVED = "RCVD"
    ACCEPTED_TECHNICAL_VALIDATION = "ACTC"
    ACCEPTED_CUSTOMER_PROFILE = "ACCP"
    ACCEPTED_SETTLEMENT_IN_PROCESS = "ACSP"
    ACCEPTED_SETTLEMENT_COMPLETED = "ACSC"
    ACCEPTED_CREDIT_SETTLEMENT_COMPLETED = "ACCC"
    ACCEPTED_WITH_CHANGE = "ACWC"
    ACCEPTED_WITHOUT_POSTING = "ACWP"
    ACCEPTED_FUNDS_CHECKED = "ACFC"
    ACCEPTED_AND_INITIATED = "ACIS"
    ACCEPTED_PENDING_DECISION = "ACPD"
    PARTIALLY_ACCEPTED = "PART"
    PARTIALLY_ACCEPTED_TECHNICAL = "PATC"
    PENDING = "PDNG"
    PRESENTED = "PRES"
    BLOCKED = "BLCK"
    CANCELLED = "CANC"
    CANCELLED_CUSTOMER_UNDERTAKING = "CPUC"
    REJECTED = "RJCT"


@dataclass(frozen=True, slots=True)
class TransactionStatus:
    """One TxInfAndSts: the bank's word on one transfer."""

    end_to_end_id: str  # OrgnlEndToEndId
    status: PaymentStatus  # TxSts
    reason: str | None  # StsRsnInf/Rsn/Cd (or Prtry): AC01, AM04, ...
    payment_info_id: str  # OrgnlPmtInfId of its block


@dataclass(frozen=True, slots=True)
class BlockStatus:
    """One OrgnlPmtInfAndSts: the bank's word on a payment block."""

    payment_info_id: str  # OrgnlPmtInfId
    status: PaymentStatus | None  # PmtInfSts, when the bank states one for the block
    reason: str | None


@dataclass(frozen=True, slots=True)
class StatusReport:
    """A pain.002 file."""

    msg_id: str
    created_at: datetime | None
    original_msg_id: str  # the MsgId of the pain.001 it speaks of
    original_message: str  # OrgnlMsgNmId, e.g. "pain.001.001.09"
    group_status: PaymentStatus | None  # GrpSts
    group_reason: str | None
    blocks: tuple[BlockStatus, ...]
    transactions: tuple[TransactionStatus, ...]  # in file order


def read_pain002(data: bytes) -> StatusReport:
    """The status report in a pain.002 file; HostileFile or MalformedFile naming the
    problem."""
    return status_report_of(parse_bank_xml(data))


def status_report_of(root: etree._Element) -> StatusReport:
    """The status report of a parsed pain.002 document; MalformedFile if it is not one (.10,
    .03) or cannot be read whole."""
    namespace = namespace_of(root)
    if namespace not in (PAIN002_10, PAIN002_03):
        raise MalformedFile(f"not a pain.002.001.10 or .03: the namespace is {namespace!r}")
    iso = Reader(namespace)
    report = iso.need(root, "CstmrPmtStsRpt")
    group = iso.need(report, "OrgnlGrpInfAndSts")
    blocks = iso.findall(report, "OrgnlPmtInfAndSts")
    return StatusReport(
        msg_id=iso.text(report, "GrpHdr/MsgId"),
        created_at=iso.moment(report, "GrpHdr/CreDtTm"),
        original_msg_id=iso.text(group, "OrgnlMsgId"),
        original_message=iso.text(group, "OrgnlMsgNmId"),
        group_status=_status(iso, group, "GrpSts"),
        group_reason=_reason(iso, group),
        blocks=tuple(_block(iso, b) for b in blocks),
        transactions=tuple(t for b in blocks for t in _transactions(iso, b)),
    )


def _status(iso: Reader, element: etree._Element, path: str) -> PaymentStatus | None:
    text = iso.optional(element, path)
    if text is None:
        return None
    try:
        return PaymentStatus(text)
    except ValueError:
        raise MalformedFile(f"{where(element)}: {path} {text!r} is no ISO status") from None


def _reason(iso: Reader, element: etree._Element) -> str | None:
    reasons = iso.findall(element, "StsRsnInf")
    return iso.code(reasons[0], "Rsn") if reasons else None


def _block(iso: Reader, block: etree._Element) -> BlockStatus:
    return BlockStatus(
        iso.text(block, "OrgnlPmtInfId"), _status(iso, block, "PmtInfSts"), _reason(iso, block)
    )


def _transactions(iso: Reader, block: etree._Element) -> list[TransactionStatus]:
    payment_info_id = iso.text(block, "OrgnlPmtInfId")
    statuses = []
    for transaction in iso.findall(block, "TxInfAndSts"):
        status = _status(iso, transaction, "TxSts")
        if status is None:
            raise MalformedFile(f"{where(transaction)} has no TxSts")
        statuses.append(
            TransactionStatus(
                iso.text(transaction, "OrgnlEndToEndId"),
                status,
                _reason(iso, transaction),
                payment_info_id,
            )
        )
    return statuses
