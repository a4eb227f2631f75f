"""Stripe's report-run files read into rail objects: which report a file is by its columns,
decimal major units to exact int minor units, a bad line named with its file, reversals and
returned payouts kept aside, other categories only counted."""

from __future__ import annotations

import asyncio
import csv
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from railsim.statement import major_units
from services.commands.reconcile_output import print_statement
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import RailObject, RunKind
from services.reconcile.errors import StatementUnreadable
from services.reconcile.statement import (
    Item,
    ReportKind,
    Return,
    Reversal,
    minor_units,
    read_report,
    report_kind,
)
from services.reconcile.statement_source import StatementSource

FIXTURES = Path(__file__).parents[1] / "fixtures" / "stripe_reports"
BALANCE = FIXTURES / "balance_change_from_activity.itemized.3.csv"
PAYOUTS = FIXTURES / "payouts.itemized.3.csv"
BALANCE_HEADER = BALANCE.read_text().splitlines()[0]
PAYOUTS_HEADER = PAYOUTS.read_text().splitlines()[0]
SID = "5b0c1d9e-0000-4000-8000-000000000001"
AT = "2026-11-26 08:00:00"


def balance_line(
    category: str,
    source: str,
    gross: str,
    currency: str = "usd",
    *,
    created: str = AT,
    account: str = "acct_1",
    sid: str = SID,
    fee: str = "0.00",
    net: str | None = None,
) -> str:
    net = gross if net is None else net
    return (
        f"txn_{source},{created},{created},{created},{created},{currency},{gross},{fee},{net},"
        f"{category},{source},,,,,{account},{sid}"
    )


def payout_line(
    category: str,
    payout_id: str,
    gross: str,
    *,
    status: str = "paid",
    arrival: str = "2026-11-28",
    destination: str = "ba_1",
) -> str:
    return (
        f"{payout_id},{AT},{AT},usd,{gross},0.00,{gross},{category},,{arrival},{status},,,"
        f"bank_account,STRIPE PAYOUT,{destination}"
    )


def items(header: str, *lines: str, name: str = "report.csv") -> list[Item]:
    rows = csv.reader(io.StringIO("\n".join([header, *lines])))
    columns = next(rows)
    return list(read_report(rows, report_kind(columns, name), columns, name))


def test_a_transfer_line_is_a_transfer_of_its_exact_amount_in_minor_units() -> None:
    (found,) = items(BALANCE_HEADER, balance_line("transfer", "tr_1", "-1234567890123456.78"))
    created = int(datetime(2026, 11, 26, 8, tzinfo=UTC).timestamp())
    transfer = PayoutMethod.TRANSFER
    expected = RailObject(
        "tr_1", transfer, 123456789012345678, 0, "USD", "acct_1", None, created, SID
    )
    assert found == expected


@pytest.mark.parametrize(
    ("text", "currency", "minor"),
    [
        ("-0.10", "USD", -10),
        ("-12.5", "EUR", -1250),
        ("-1000", "JPY", -1000),
        ("3", "USD", 300),
        ("-1.234", "KWD", -1234),
        ("0.01", "GBP", 1),
    ],
)
def test_decimal_text_becomes_exact_minor_units_by_the_currency_exponent(
    text: str, currency: str, minor: int
) -> None:
    assert minor_units(text, currency) == minor


def test_a_zero_decimal_currency_reads_whole_units_and_refuses_decimals() -> None:
    (found,) = items(BALANCE_HEADER, balance_line("transfer", "tr_1", "-1000", "jpy", fee="0"))
    assert isinstance(found, RailObject) and found.amount == 1000
    with pytest.raises(StatementUnreadable, match=r"line 2: report.csv: .*more decimals than JPY"):
        items(BALANCE_HEADER, balance_line("transfer", "tr_1", "-1000.00", "jpy", fee="0"))


@pytest.mark.parametrize("gross", ['"-12,50"', "-1e3", "abc", "-12.345", "- 1.00", "", "1.00"])
def test_a_malformed_amount_is_refused_naming_its_line_and_file(gross: str) -> None:
    with pytest.raises(StatementUnreadable) as raised:
        items(
            BALANCE_HEADER,
            balance_line("transfer", "tr_1", "-1.00"),
            balance_line("transfer", "tr_2", gross),
            name="balance.csv",
        )
    assert raised.value.line == 3
    assert str(raised.value).startswith("statement line 3: balance.csv: ")


def test_a_net_other_than_gross_less_fee_is_refused() -> None:
    with pytest.raises(StatementUnreadable, match=r"line 2: report.csv: net"):
        items(BALANCE_HEADER, balance_line("transfer", "tr_1", "-1.00", net="-0.99"))


@pytest.mark.parametrize(
    ("category", "gross"), [("transfer_reversal", "-1.00"), ("payout_reversal", "-1.00")]
)
def test_a_sign_the_category_cannot_have_is_refused(category: str, gross: str) -> None:
    header, line = (
        (BALANCE_HEADER, balance_line(category, "trr_1", gross))
        if category.startswith("transfer")
        else (PAYOUTS_HEADER, payout_line(category, "po_1", gross))
    )
    with pytest.raises(StatementUnreadable, match="gross must be positive"):
        items(header, line)


def test_a_malformed_time_is_refused() -> None:
    for created in ("2026-11-26T08:00:00", "2026-02-30 08:00:00", "2026-11-26 24:00:00"):
        with pytest.raises(StatementUnreadable, match=r"line 2: report\.csv: '2026"):
            items(BALANCE_HEADER, balance_line("transfer", "tr_1", "-1.00", created=created))


def test_reversal_lines_are_kept_aside_by_the_settlement_their_metadata_names() -> None:
    found = items(
        BALANCE_HEADER,
        balance_line("transfer_reversal", "trr_1", "2.50"),
        balance_line("transfer_reversal", "trr_2", "1.25", sid=""),
    )
    # A reversal naming no settlement is of a transfer that is not settle's: only counted.
    assert found == [Reversal(2, SID, 250), "transfer_reversal"]


def test_a_payout_line_is_a_payout_with_its_status_destination_and_arrival() -> None:
    (payout, returned) = items(
        PAYOUTS_HEADER,
        payout_line("payout", "po_1", "-5.00", status="in_transit"),
        payout_line("payout_reversal", "po_1", "5.00", status="failed"),
    )
    arrival = int(datetime(2026, 11, 28, tzinfo=UTC).timestamp())
    created = int(datetime(2026, 11, 26, 8, tzinfo=UTC).timestamp())
    assert payout == RailObject(
        "po_1", PayoutMethod.PAYOUT, 500, 0, "USD", "ba_1", "in_transit", created, None, arrival
    )
    assert returned == Return(3, "po_1")


def test_an_unknown_payout_status_is_refused() -> None:
    with pytest.raises(StatementUnreadable, match="payout_status 'sent'"):
        items(PAYOUTS_HEADER, payout_line("payout", "po_1", "-5.00", status="sent"))


def test_lines_of_categories_settle_does_not_make_are_only_counted() -> None:
    found = items(
        BALANCE_HEADER,
        balance_line("charge", "ch_1", "20.00"),
        "",  # a blank line is no line
        balance_line("payout", "po_1", "-20.00"),  # payouts are the payouts report's
        balance_line("transfer", "tr_1", "-1.00"),
    )
    assert found[:2] == ["charge", "payout"] and isinstance(found[2], RailObject)


def test_a_file_is_known_by_its_columns() -> None:
    assert report_kind(BALANCE_HEADER.split(","), "a.csv") is ReportKind.BALANCE
    assert report_kind(PAYOUTS_HEADER.split(","), "b.csv") is ReportKind.PAYOUTS


def test_a_balance_report_without_the_settlement_column_is_refused_asking_for_it() -> None:
    header = BALANCE_HEADER.replace(",transfer_metadata[settlement_id]", "").split(",")
    with pytest.raises(StatementUnreadable, match=r"line 1: a.csv lacks transfer_metadata.*ask"):
        report_kind(header, "a.csv")


def test_a_file_that_is_neither_report_is_refused_naming_it_and_the_columns() -> None:
    with pytest.raises(StatementUnreadable, match=r"x.csv is neither report: .*payout_id"):
        report_kind(["id", "amount"], "x.csv")
    header = PAYOUTS_HEADER.replace(",payout_status", "").split(",")
    with pytest.raises(StatementUnreadable, match=r"b.csv \(payouts.itemized.3\) lacks .*status"):
        report_kind(header, "b.csv")


@given(st.integers(-(2**63), 2**63), st.sampled_from(["USD", "JPY", "KWD"]))
def test_the_simulator_writes_what_the_parser_reads(amount: int, currency: str) -> None:
    assert minor_units(major_units(amount, currency), currency) == amount


def test_the_source_reads_both_reports_counts_every_line_and_pages_its_window() -> None:
    source = StatementSource.open([BALANCE, PAYOUTS])
    assert [f.kind for f in source.files] == [ReportKind.BALANCE, ReportKind.PAYOUTS]
    window = source.window()
    assert window.kind is RunKind.STATEMENT
    start, end = window.seconds()
    assert (_utc(start), _utc(end)) == ("2026-11-26 08:00:00", "2026-11-26 08:20:01")
    pages = asyncio.run(_pages(source, start, start + 6))
    assert [o.object_id for o in pages] == [
        "tr_1QaTransfer00000000001",
        "tr_1QaTransfer00000000002",
    ]
    assert source.lines == 9 and source.rows_read(2) == 9
    summary = source.summary()
    assert summary["out_of_scope"] == {"charge": 1, "fee": 1, "refund": 1}
    assert [r for _, r in source.amends.reversals] == [Reversal(6, f"{SID[:-1]}1", 250)]
    assert [r for _, r in source.amends.returns] == [Return(4, "po_1QaPayout000000000002")]
    # the evidence's source names the files, cut to what its column holds
    assert source.source == f"statement:{BALANCE.name}+{PAYOUTS.name}"[:64]
    assert asyncio.run(source.retrieve(["tr_1QaTransfer00000000001"])) == []


def test_without_a_day_a_bad_line_is_refused_before_any_run(tmp_path: Path) -> None:
    path = tmp_path / "balance.csv"
    path.write_text("\n".join([BALANCE_HEADER, balance_line("transfer", "tr_1", "-1.0.0")]))
    source = StatementSource.open([path])
    with pytest.raises(StatementUnreadable, match=r"line 2: balance\.csv: '-1\.0\.0'"):
        source.window()


def test_a_file_that_cannot_be_read_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(StatementUnreadable, match="cannot be read"):
        StatementSource.open([tmp_path / "absent.csv"])
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(StatementUnreadable):
        StatementSource.open([binary])
    undecodable = tmp_path / "late.csv"
    undecodable.write_bytes((BALANCE_HEADER + "\n").encode() + b"\xff\xfe\n")
    with pytest.raises(StatementUnreadable, match=r"late\.csv cannot be read"):
        StatementSource.open([undecodable]).window()


def test_the_text_report_says_what_the_files_held_besides(
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = StatementSource.open([BALANCE, PAYOUTS])
    list(source.objects(0, 2**40))
    source.amends.uncompared = [SID]
    print_statement(source.summary())
    assert capsys.readouterr().out.splitlines() == [
        f"  statement: 9 line(s) in {BALANCE.name} ({ReportKind.BALANCE}), {PAYOUTS.name}"
        f" ({ReportKind.PAYOUTS}); not compared: charge 1, fee 1, refund 1",
        f"  not compared: settlement={SID} (its transfer predates the files)",
    ]


async def _pages(source: StatementSource, start: int, end: int) -> list[RailObject]:
    return [o async for page in source.pages(start, end) for o in page]


def _utc(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S")
