"""Reading a camt.054.001.08 (BkToCstmrDbtCdtNtfctn): the bank's notice of a booking as it
happens, before the day's statement.

The bank sends a DBIT notification when it books a payment block on its execution date (one
entry with a TxDtls per transfer under batch booking, else one entry per transfer) and a CRDT
one when a transfer comes back. Entries are read as in camt.053 (`camt_entries`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from lxml import etree

from services.adapters.sepa.camt_entries import Entry, read_entry
from services.adapters.sepa.elements import Reader
from services.adapters.sepa.errors import MalformedFile
from services.adapters.sepa.safe_xml import parse_bank_xml
from services.adapters.sepa.xsd import CAMT054_08, namespace_of


@dataclass(frozen=True, slots=True)
class Notification:
    """One Ntfctn: bookings on one account."""

    notification_id: str  # Id
    created_at: datetime | None  # Ntfctn/CreDtTm
    account_iban: str
    currency: str | None  # Acct/Ccy, when the bank gives it
    entries: tuple[Entry, ...]  # in file order


@dataclass(frozen=True, slots=True)
class NotificationReport:
    """A camt.054 file."""

    msg_id: str
    created_at: datetime | None  # GrpHdr/CreDtTm
    notifications: tuple[Notification, ...]


def read_camt054(data: bytes) -> NotificationReport:
    """The notifications of a camt.054 file; HostileFile or MalformedFile naming the problem."""
    return notification_report_of(parse_bank_xml(data))


def notification_report_of(root: etree._Element) -> NotificationReport:
    """The notifications of a parsed camt.054.001.08 document; MalformedFile if it is not one
    or cannot be read whole."""
    namespace = namespace_of(root)
    if namespace != CAMT054_08:
        raise MalformedFile(f"not a camt.054.001.08: the namespace is {namespace!r}")
    iso = Reader(namespace)
    message = iso.need(root, "BkToCstmrDbtCdtNtfctn")
    return NotificationReport(
        iso.text(message, "GrpHdr/MsgId"),
        iso.moment(message, "GrpHdr/CreDtTm"),
        tuple(_notification(iso, n) for n in iso.need_all(message, "Ntfctn")),
    )


def _notification(iso: Reader, element: etree._Element) -> Notification:
    return Notification(
        iso.text(element, "Id"),
        iso.moment(element, "CreDtTm"),
        iso.text(element, "Acct/Id/IBAN"),
        iso.optional(element, "Acct/Ccy"),
        tuple(read_entry(iso, e) for e in iso.findall(element, "Ntry")),
    )
