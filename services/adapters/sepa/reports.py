"""The bank's reports, told apart by the namespace of their root element (the message and
its version are in it) and read whole: pain.002 status reports, camt.054 notifications and
camt.053 statements.

A report of another kind, or of a version settle does not read, is refused rather than
guessed at:

    namespace (urn:iso:std:iso:20022:tech:xsd:...)   kind       read into
    pain.002.001.10, pain.002.001.03                 pain.002   StatusReport
    camt.054.001.08                                  camt.054   NotificationReport
    camt.053.001.08, camt.053.001.02                 camt.053   StatementReport
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from lxml import etree

from services.adapters.sepa.camt053 import StatementReport, statement_report_of
from services.adapters.sepa.camt054 import NotificationReport, notification_report_of
from services.adapters.sepa.errors import MalformedFile
from services.adapters.sepa.pain002 import StatusReport, status_report_of
from services.adapters.sepa.safe_xml import parse_bank_xml
from services.adapters.sepa.xsd import (
    CAMT053_02,
    CAMT053_08,
    CAMT054_08,
    PAIN002_03,
    PAIN002_10,
    namespace_of,
)

ReportKind = Literal["pain.002", "camt.054", "camt.053"]
Report = StatusReport | NotificationReport | StatementReport

KINDS: dict[str, ReportKind] = {
    PAIN002_10: "pain.002",
    PAIN002_03: "pain.002",
    CAMT054_08: "camt.054",
    CAMT053_08: "camt.053",
    CAMT053_02: "camt.053",
}
_READERS: dict[ReportKind, Callable[[etree._Element], Report]] = {
    "pain.002": status_report_of,
    "camt.054": notification_report_of,
    "camt.053": statement_report_of,
}


def _kind(root: etree._Element) -> ReportKind:
    namespace = namespace_of(root)
    if etree.QName(root).localname != "Document" or namespace not in KINDS:
        raise MalformedFile(
            f"not a report settle reads: root {etree.QName(root).localname!r} in namespace "
            f"{namespace!r}"
        )
    return KINDS[namespace]


def kind_of(data: bytes) -> ReportKind:
    """The kind of report in `data`; HostileFile, or MalformedFile if it is none settle
    reads."""
    return _kind(parse_bank_xml(data))


def read_report(data: bytes) -> Report:
    """The report in `data`, read whole into its kind's value; HostileFile or MalformedFile
    naming the problem."""
    root = parse_bank_xml(data)
    return _READERS[_kind(root)](root)
