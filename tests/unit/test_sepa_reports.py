"""The bank's reports read whole or refused: pain.002 status reports, camt.054 notifications
and camt.053 statements (two versions), amounts in cents, the kind told by the namespace, and
a statement's balances checked against its booked entries. The fixtures are hand-written and
valid against the official XSDs, which a test here proves."""

from __future__ import annotations

import hashlib
from datetime import date
from pathlib import Path

import pytest

from services.adapters import sepa
from services.adapters.sepa.camt053 import (
    StatementReport,
    balance_gap,
    booked_movement,
    closing_balance_agrees,
    read_camt053,
)
from services.adapters.sepa.camt054 import NotificationReport, read_camt054
from services.adapters.sepa.camt_entries import BankTransactionCode, CreditDebit, EntryStatus
from services.adapters.sepa.errors import HostileFile, MalformedFile
from services.adapters.sepa.pain002 import PaymentStatus, StatusReport, read_pain002
from services.adapters.sepa.reports import kind_of, read_report
from services.adapters.sepa.safe_xml import parse_bank_xml
from services.adapters.sepa.xsd import check_schema, namespace_of, schema_problems
from services.domain.sepa import settlement_of

FIXTURES = Path(__file__).parent.parent / "fixtures" / "sepa"
SCHEMAS = Path(sepa.__file__).parent / "schemas"
NAMES = [
    "pain.002.001.10",
    "pain.002.001.03",
    "camt.054.001.08",
    "camt.053.001.08",
    "camt.053.001.02",
]
OUR_ACCOUNT = "DE89370400440532013000"


def fixture(name: str) -> bytes:
    return (FIXTURES / f"{name}.xml").read_bytes()


@pytest.mark.parametrize("name", NAMES)
def test_each_fixture_is_valid_against_its_official_xsd(name: str) -> None:
    root = check_schema(fixture(name))
    assert namespace_of(root).endswith(name)


@pytest.mark.parametrize(
    ("name", "sha256"),
    [
        ("pain.002.001.10", "2f9f8d0e9891fa9f31ccf0576397afe501614384d688ae6e43ba694b3d24b0cf"),
        ("pain.002.001.03", "dfb211e63f09825ea89f0ceee870db9e82ab2840fbe8b8148d9c4c2a9a99fd87"),
    ],
)
def test_the_xsds_kept_here_are_isos_unmodified(name: str, sha256: str) -> None:
    xsd = SCHEMAS / f"{name}.xsd"
    assert hashlib.sha256(xsd.read_bytes()).hexdigest() == sha256
    assert sha256 in (SCHEMAS / "README.md").read_text()


@pytest.mark.parametrize("name", NAMES)
def test_the_kind_is_told_by_the_namespace(name: str) -> None:
    assert kind_of(fixture(name)) == name[: len("camt.053")]


def test_a_report_of_another_kind_or_version_is_refused() -> None:
    for namespace in ("camt.053.001.04", "camt.052.001.08", "pain.001.001.09", "pain.002.001.11"):
        data = fixture("camt.053.001.08").replace(b"camt.053.001.08", namespace.encode())
        with pytest.raises(MalformedFile, match="not a report settle reads"):
            kind_of(data)
    with pytest.raises(MalformedFile, match="not a report settle reads"):
        kind_of(b"<Document/>")
    with pytest.raises(HostileFile):
        read_report(b'<!DOCTYPE x SYSTEM "file:///etc/passwd"><Document/>')


def test_pain002_reports_the_group_and_each_refused_transfer() -> None:
    report = read_pain002(fixture("pain.002.001.10"))
    assert (report.msg_id, report.original_msg_id) == (
        "BANK-STS-20260302-0001",
        "SETTLE-0a1b2c3d4e5f60718293a4b5c6d7",
    )
    assert report.original_message == "pain.001.001.09"
    assert report.group_status is PaymentStatus.ACCEPTED_TECHNICAL_VALIDATION
    assert report.group_reason is None
    assert [(b.status, b.reason) for b in report.blocks] == [
        (PaymentStatus.PARTIALLY_ACCEPTED, None)
    ]
    assert [(t.end_to_end_id[-2:], t.status, t.reason) for t in report.transactions] == [
        ("81", PaymentStatus.REJECTED, "AC04"),
        ("82", PaymentStatus.REJECTED, "AM04"),
    ]
    assert all(settlement_of(t.end_to_end_id) for t in report.transactions)
    assert report.transactions[0].payment_info_id == "SETTLE-0a1b2c3d4e5f6071829-20260302"


def test_pain002_of_the_older_version_refusing_the_whole_file() -> None:
    report = read_report(fixture("pain.002.001.03"))
    assert isinstance(report, StatusReport)
    assert (report.group_status, report.group_reason) == (PaymentStatus.REJECTED, "FF01")
    assert report.transactions == ()


def test_camt054_reads_a_batch_booking_and_a_return() -> None:
    report = read_camt054(fixture("camt.054.001.08"))
    assert isinstance(read_report(fixture("camt.054.001.08")), NotificationReport)
    (notification,) = report.notifications
    assert (notification.account_iban, notification.currency) == (OUR_ACCOUNT, "EUR")
    batch, returned = notification.entries
    assert (batch.amount, batch.direction, batch.signed) == (15000, CreditDebit.DEBIT, -15000)
    assert batch.batch and batch.batch_count == 2
    assert batch.batch_payment_info_id == "SETTLE-0a1b2c3d4e5f6071829-20260302"
    assert batch.code == BankTransactionCode("PMNT", "ICDT", "ESCT")
    assert [t.amount for t in batch.transactions] == [10000, 5000]
    assert sum(t.amount or 0 for t in batch.transactions) == batch.amount
    assert (returned.direction, returned.amount, returned.code) == (
        CreditDebit.CREDIT,
        2550,
        BankTransactionCode("PMNT", "ICDT", "RRTN"),
    )
    (back,) = returned.transactions
    assert back.return_reason == "AC04"
    assert back.returned_end_to_end_id == "018f3c2a7b4e7c1d9a2b3c4d5e6f7079"
    assert batch.transactions[0].returned_end_to_end_id is None


def test_camt053_version_08_reads_the_statement_whole() -> None:
    report = read_camt053(fixture("camt.053.001.08"))
    assert (report.msg_id, report.version) == ("BANK-STM-20260302", "001.08")
    (statement,) = report.statements
    assert (statement.statement_id, statement.electronic_sequence, statement.legal_sequence) == (
        "STM-2026-061",
        412,
        61,
    )
    assert (statement.account_iban, statement.currency) == (OUR_ACCOUNT, "EUR")
    assert (statement.opening.kind, statement.opening.signed) == ("OPBD", 100000)
    assert (statement.closing.kind, statement.closing.signed) == ("CLBD", 87515)
    assert statement.closing.day == date(2026, 3, 2)
    assert [e.reference for e in statement.entries] == ["N-0001", "N-0002", "N-0003", "N-0004"]
    charge, pending = statement.entries[2], statement.entries[3]
    assert charge.code == BankTransactionCode("PMNT", "ICDT", "CHRG") and charge.amount == 35
    assert pending.status is EntryStatus.PENDING and pending.booking_date is None
    assert statement.entries[1].transactions[0].return_reason == "AC04"


def test_camt053_version_02_reads_the_same_shape() -> None:
    report = read_report(fixture("camt.053.001.02"))
    assert isinstance(report, StatementReport) and report.version == "001.02"
    (statement,) = report.statements
    assert statement.currency == "EUR"  # no Acct/Ccy: the closing balance's
    assert [e.status for e in statement.entries] == [EntryStatus.BOOKED] * 3
    sent, returned, charge = statement.entries
    assert sent.transactions[0].amount == 8000  # AmtDtls/TxAmt/Amt
    assert returned.booking_date == date(2026, 3, 3)  # from BookgDt/DtTm
    assert returned.transactions[0].returned_end_to_end_id == sent.transactions[0].end_to_end_id
    assert returned.transactions[0].return_reason == "MS03"
    assert charge.code == BankTransactionCode("ACMT", "MDOP", "CHRG")


@pytest.mark.parametrize("name", ["camt.053.001.08", "camt.053.001.02"])
def test_the_closing_balance_is_the_opening_plus_the_booked_entries(name: str) -> None:
    (statement,) = read_camt053(fixture(name)).statements
    assert closing_balance_agrees(statement) and balance_gap(statement) == 0
    # the pending entry of .08 moves nothing
    assert booked_movement(statement) == statement.closing.signed - statement.opening.signed


def test_a_statement_that_does_not_add_up_is_seen() -> None:
    data = fixture("camt.053.001.08").replace(b">875.15<", b">875.16<")
    (statement,) = read_camt053(data).statements
    assert not closing_balance_agrees(statement)
    assert balance_gap(statement) == 1


def test_an_overdrawn_account_has_debit_balances_that_add_up() -> None:
    data = fixture("camt.053.001.02").replace(b">499.50<", b">500.50<")
    debit = b"<CdtDbtInd>DBIT</CdtDbtInd>\n        <Dt>"
    data = data.replace(b"<CdtDbtInd>CRDT</CdtDbtInd>\n        <Dt>", debit)
    (statement,) = read_camt053(data).statements
    assert (statement.opening.signed, statement.closing.signed) == (-50000, -50050)
    assert booked_movement(statement) == -50  # 80.00 out, 80.00 back, 0.50 charged
    assert closing_balance_agrees(statement)


@pytest.mark.parametrize(
    ("name", "old", "new", "why"),
    [
        ("camt.053.001.08", b">150.00</Amt>", b">150.001</Amt>", "at most two decimals"),
        ("camt.053.001.08", b">150.00</Amt>", b">-150.00</Amt>", "at most two decimals"),
        ("camt.053.001.08", b">150.00</Amt>", b">1.5E2</Amt>", "at most two decimals"),
        ("camt.053.001.08", b'<Amt Ccy="EUR">150.00', b"<Amt>150.00", "Ccy"),
        ("camt.053.001.08", b"<Cd>CLBD</Cd>", b"<Cd>ITBD</Cd>", "closing (CLBD)"),
        ("camt.053.001.08", b"<Cd>PDNG</Cd>", b"<Cd>WAIT</Cd>", "'WAIT' is not BOOK"),
        ("camt.053.001.08", b"<CdtDbtInd>DBIT", b"<CdtDbtInd>DEBIT", "not CRDT or DBIT"),
        ("camt.053.001.08", b"<MsgId>BANK-STM-20260302</MsgId>", b"", "no GrpHdr/MsgId"),
        ("camt.053.001.08", b"<Dt>2026-03-02</Dt>", b"<Dt>2026-02-30</Dt>", "is not a date"),
        ("camt.053.001.02", b"<Sts>BOOK</Sts>", b"<Sts></Sts>", "is not BOOK"),
        ("camt.054.001.08", b"<IBAN>DE89370400440532013000</IBAN>", b"", "Acct/Id/IBAN"),
        ("camt.054.001.08", b"<Cd>AC04</Cd>", b"", "neither Cd nor Prtry"),
        ("pain.002.001.10", b"<TxSts>RJCT</TxSts>", b"<TxSts>NOPE</TxSts>", "no ISO status"),
        ("pain.002.001.10", b"<TxSts>RJCT</TxSts>", b"", "has no TxSts"),
        (
            "pain.002.001.10",
            b"<OrgnlEndToEndId>018f3c2a7b4e7c1d9a2b3c4d5e6f7082</OrgnlEndToEndId>",
            b"",
            "OrgnlEndToEndId",
        ),
        (
            "pain.002.001.10",
            b"<OrgnlMsgId>SETTLE-0a1b2c3d4e5f60718293a4b5c6d7</OrgnlMsgId>",
            b"",
            "OrgnlMsgId",
        ),
    ],
)
def test_malformed_content_refuses_the_whole_report(
    name: str, old: bytes, new: bytes, why: str
) -> None:
    data = fixture(name)
    assert old in data
    with pytest.raises(MalformedFile) as refused:
        read_report(data.replace(old, new, 1))
    assert why in refused.value.reason
    assert "line" in refused.value.reason or "namespace" in refused.value.reason


def test_a_breach_of_the_xsd_is_named() -> None:
    root = parse_bank_xml(fixture("camt.053.001.08").replace(b"<LglSeqNb>61</LglSeqNb>", b""))
    assert schema_problems(root) == []  # LglSeqNb is optional
    data = fixture("camt.053.001.08").replace(b"<Id>STM-2026-061</Id>", b"")
    with pytest.raises(MalformedFile, match="breaches its XSD: /Document/BkToCstmrStmt/Stmt"):
        check_schema(data)
