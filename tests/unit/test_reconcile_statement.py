"""A statement file read into rail objects: Stripe's itemized balance change report, decimal
major units to exact int minor units, a bad line named, reversals and failures folded in."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from railsim.statement import COLUMNS, major_units
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import RailObject, RunKind
from services.reconcile.errors import StatementUnreadable
from services.reconcile.statement import minor_units, read_statement
from services.reconcile.statement_source import StatementSource

HEADER = ",".join(COLUMNS)
SID = "5b0c1d9e-0000-4000-8000-000000000001"


def line(
    category: str,
    source: str,
    gross: str,
    currency: str = "usd",
    *,
    created: str = "2026-11-26 08:00:00",
    account: str = "acct_1",
    sid: str = SID,
    fee: str = "0.00",
    net: str | None = None,
) -> str:
    net = gross if net is None else net
    return (
        f"txn_{source},{created},{created},{currency},{gross},{fee},{net},{category},{source},"
        f",{account},{sid}"
    )


def read(*lines: str) -> dict[str, RailObject]:
    return dict(read_statement([HEADER, *lines]).objects)


def test_a_transfer_line_is_a_transfer_of_its_exact_amount_in_minor_units() -> None:
    objects = read(line("transfer", "tr_1", "-1234567890123456.78"))
    created = int(datetime(2026, 11, 26, 8, tzinfo=UTC).timestamp())
    assert objects == {
        "tr_1": RailObject(
            "tr_1",
            PayoutMethod.TRANSFER,
            123456789012345678,
            0,
            "USD",
            "acct_1",
            None,
            created,
            SID,
        )
    }


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
    assert read(line("transfer", "tr_1", "-1000", "jpy", fee="0"))["tr_1"].amount == 1000
    with pytest.raises(StatementUnreadable, match=r"line 2: .*more decimals than JPY's 0"):
        read(line("transfer", "tr_1", "-1000.00", "jpy", fee="0"))


@pytest.mark.parametrize("gross", ['"-12,50"', "-1e3", "abc", "-12.345", "- 1.00", "", "1.00"])
def test_a_malformed_amount_is_refused_naming_its_line(gross: str) -> None:
    with pytest.raises(StatementUnreadable) as raised:
        read(line("transfer", "tr_1", "-1.00"), line("transfer", "tr_2", gross))
    assert raised.value.line == 3
    assert str(raised.value).startswith("statement line 3: ")


def test_a_net_other_than_gross_less_fee_is_refused() -> None:
    with pytest.raises(StatementUnreadable, match=r"line 2: net"):
        read(line("transfer", "tr_1", "-1.00", net="-0.99"))


def test_reversal_lines_add_to_the_amount_reversed_of_their_transfer() -> None:
    objects = read(
        line("transfer", "tr_1", "-10.00"),
        line("transfer_reversal", "trr_1", "2.50"),
        line("transfer_reversal", "trr_2", "1.25"),
        line("transfer", "tr_2", "-3.00", sid="other"),
    )
    assert objects["tr_1"].amount_reversed == 375
    assert objects["tr_2"].amount_reversed == 0
    assert set(objects) == {"tr_1", "tr_2"}


def test_reversals_beyond_the_transfer_amount_are_refused() -> None:
    with pytest.raises(StatementUnreadable, match=r"line 4: .*exceed"):
        read(
            line("transfer", "tr_1", "-1.00"),
            line("transfer_reversal", "trr_1", "0.60"),
            line("transfer_reversal", "trr_2", "0.60"),
        )


def test_a_payout_is_paid_unless_a_payout_reversal_line_brings_its_money_back() -> None:
    objects = read(
        line("payout", "po_1", "-5.00", account="", sid=""),
        line("payout", "po_2", "-6.00", account="", sid=""),
        line("payout_reversal", "po_2", "6.00", account="", sid=""),
    )
    assert [(o.kind, o.amount, o.status, o.destination) for o in objects.values()] == [
        (PayoutMethod.PAYOUT, 500, "paid", None),
        (PayoutMethod.PAYOUT, 600, "failed", None),
    ]


def test_lines_of_other_categories_are_counted_not_compared() -> None:
    statement = read_statement(
        [HEADER, line("charge", "ch_1", "20.00"), line("transfer", "tr_1", "-1.00")]
    )
    assert (list(statement.objects), statement.lines) == (["tr_1"], 2)


def test_a_header_without_the_report_columns_is_refused() -> None:
    with pytest.raises(StatementUnreadable, match=r"line 1: .*gross"):
        read_statement(["id,amount", "tr_1,100"])


@given(st.integers(-(2**63), 2**63), st.sampled_from(["USD", "JPY", "KWD"]))
def test_the_simulator_writes_what_the_parser_reads(amount: int, currency: str) -> None:
    assert minor_units(major_units(amount, currency), currency) == amount


def test_the_source_serves_objects_by_created_window_and_by_id(tmp_path: Path) -> None:
    path = tmp_path / "statement.csv"
    path.write_text(
        "\n".join(
            [
                HEADER,
                line("transfer", "tr_1", "-1.00", created="2026-11-26 08:00:00"),
                line("charge", "ch_1", "3.00", created="2026-11-26 08:00:01"),
                line("transfer", "tr_2", "-2.00", created="2026-11-26 08:00:05", sid="b"),
            ]
        )
    )
    source = StatementSource.open(path)
    window = source.window()
    assert window.kind is RunKind.STATEMENT
    start, end = window.seconds()
    assert end - start == 6
    assert [o.object_id for o in asyncio.run(source.objects(start, start + 1))] == ["tr_1"]
    found = asyncio.run(source.retrieve(["tr_2", "tr_9"]))
    assert [o.object_id for o in found] == ["tr_2"]
    assert (source.source, source.rows_read(2)) == ("statement:statement.csv", 3)


def test_a_file_that_cannot_be_read_is_unreadable(tmp_path: Path) -> None:
    with pytest.raises(StatementUnreadable, match="cannot be read"):
        StatementSource.open(tmp_path / "absent.csv")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(StatementUnreadable):
        StatementSource.open(binary)
