"""A counterparty statement read into rail objects: Stripe's report-run files, a line at a time.

Stripe gives a period's activity as two CSV reports, each told apart by its header:

    balance_change_from_activity.itemized.3   balance_transaction_id and reporting_category,
                                              no payout_id; settle asks for the optional
                                              columns connected_account_id and
                                              transfer_metadata[settlement_id] (required here:
                                              without it a reversal names no transfer)
    payouts.itemized.3                        payout_id

Each line of a category settle makes becomes one item; a line of any other category (charge,
refund, fee...) is only counted by its category:

    report    reporting_category  becomes
    balance   transfer            a transfer (source_id) of -gross to connected_account_id,
                                  naming the settlement its metadata column names
    balance   transfer_reversal   a Reversal: +gross taken back from the transfer naming the
                                  same settlement (the report names its metadata, not its id)
    payouts   payout              a payout (payout_id) of -gross, status payout_status, to
                                  payout_destination_id, due payout_expected_arrival_date
    payouts   payout_reversal     a Return: that payout failed (its money came back)

Payouts are read from the payouts report only: a payout line of the balance report is counted
with the categories settle does not compare. Amounts become int minor units by the currency's
exponent (2; 0 for zero-decimal currencies such as JPY; 3 for BHD, JOD, KWD, OMR, TND), by text
alone, never through a float. More decimals than the currency has, a malformed number or time,
a sign the category cannot have, a net other than gross - fee, or an unknown payout status is
refused with StatementUnreadable naming the line and the file. A payout is created at
created_utc when the report has that column, else at effective_at_utc.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import NamedTuple, Protocol

from services.adapters.stripe.report_types import BALANCE_REPORT, PAYOUTS_REPORT, SETTLEMENT_COLUMN
from services.domain.money import exponent, is_currency
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import RailObject
from services.reconcile.errors import StatementUnreadable

PAYOUT_STATUSES = frozenset({"pending", "in_transit", "paid", "failed", "canceled"})
_TIME = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})")


class ReportKind(StrEnum):
    """Which Stripe report a file is; the values are Stripe's report types."""

    BALANCE = BALANCE_REPORT
    PAYOUTS = PAYOUTS_REPORT


REQUIRED = {
    ReportKind.BALANCE: (
        "balance_transaction_id",
        "created_utc",
        "currency",
        "gross",
        "fee",
        "net",
        "reporting_category",
        "source_id",
        SETTLEMENT_COLUMN,
    ),
    ReportKind.PAYOUTS: (
        "payout_id",
        "effective_at_utc",
        "currency",
        "gross",
        "fee",
        "net",
        "reporting_category",
        "payout_status",
    ),
}
# The sign each category's gross has: money out of the balance is negative.
_SIGN = {"transfer": -1, "transfer_reversal": 1, "payout": -1, "payout_reversal": 1}
_SIGN_WORD = {1: "positive", -1: "negative"}
_ZERO = {0: "0", 2: "0.00", 3: "0.000"}  # a zero fee as Stripe writes it, by exponent
_TRANSFER, _PAYOUT = PayoutMethod.TRANSFER, PayoutMethod.PAYOUT
_CATEGORIES = {
    ReportKind.BALANCE: frozenset({"transfer", "transfer_reversal"}),
    ReportKind.PAYOUTS: frozenset({"payout", "payout_reversal"}),
}


class Reversal(NamedTuple):
    """A transfer_reversal line: money taken back from the transfer naming the settlement."""

    line: int
    settlement_id: str
    amount: int  # minor units taken back


class Return(NamedTuple):
    """A payout_reversal line: the payout's money came back, so it failed."""

    line: int
    payout_id: str


Item = RailObject | Reversal | Return | str  # str: the category of a line not compared


class Rows(Protocol):
    """A csv.reader: rows of fields, and the line the last one ended on."""

    line_num: int

    def __iter__(self) -> Iterator[list[str]]: ...


def report_kind(header: Sequence[str], name: str) -> ReportKind:
    """The report a file with this header is; StatementUnreadable naming `name` and the
    missing columns if it is neither, or lacks one settle reads."""
    columns = set(header)
    if "payout_id" in columns:
        kind = ReportKind.PAYOUTS
    elif {"balance_transaction_id", "reporting_category"} <= columns:
        kind = ReportKind.BALANCE
        if SETTLEMENT_COLUMN not in columns:
            raise StatementUnreadable(
                1,
                f"{name} lacks {SETTLEMENT_COLUMN}: ask Stripe for the report with that "
                "optional column, else a reversal names no transfer and would be dropped",
            )
    else:
        raise StatementUnreadable(
            1,
            f"{name} is neither report: {ReportKind.BALANCE} needs balance_transaction_id and "
            f"reporting_category, {ReportKind.PAYOUTS} needs payout_id",
        )
    missing = [c for c in REQUIRED[kind] if c not in columns]
    if missing:
        raise StatementUnreadable(1, f"{name} ({kind}) lacks column(s) {', '.join(missing)}")
    return kind


def minor_units(text: str, currency: str) -> int:
    """The int minor units that decimal `text` in major units of `currency` is exactly;
    ValueError if it is not a plain decimal with at most the currency's decimals."""
    return _minor(text, currency, exponent(currency))


def _minor(text: str, currency: str, places: int) -> int:
    """`minor_units` with the currency's exponent known; str methods, not a regular
    expression: a report has three amounts a line, a million lines."""
    negative = text[:1] == "-"
    whole, dot, fraction = (text[1:] if negative else text).partition(".")
    if not (
        whole.isdigit()
        and whole.isascii()  # ASCII digits only, as Stripe writes
        and (not dot or (fraction.isdigit() and fraction.isascii()))
    ):
        raise ValueError(f"{text!r} is not a decimal amount such as -12.50")
    if len(fraction) > places:
        raise ValueError(f"{text!r} has more decimals than {currency}'s {places}")
    value = int(whole + fraction.ljust(places, "0"))
    return -value if negative else value


def read_report(rows: Rows, kind: ReportKind, header: Sequence[str], name: str) -> Iterator[Item]:
    """Each data line of a report as an item, read one line at a time (the header already
    read); StatementUnreadable naming the line and `name` if one cannot be read."""
    lines = _Lines(kind, header)
    for row in rows:
        if not row:
            continue  # a blank line, as a csv.DictReader skips it
        try:
            yield lines.item(row, rows.line_num)
        except (ValueError, IndexError) as e:
            detail = "too few fields" if isinstance(e, IndexError) else str(e)
            raise StatementUnreadable(rows.line_num, f"{name}: {detail}") from None


def seconds(text: str) -> int:
    """Unix seconds of a "YYYY-MM-DD HH:MM:SS" UTC time."""
    found = _TIME.fullmatch(text)
    if found is None:
        raise ValueError(f"{text!r} is not a time such as 2026-11-26 08:00:00")
    day, hour, minute, second = found.groups()
    clock = 3600 * int(hour) + 60 * int(minute) + int(second)
    if int(hour) > 23 or int(minute) > 59 or int(second) > 59:
        raise ValueError(f"{text!r} is not a time of day")
    start = _day_start(day)
    if start is None:
        raise ValueError(f"{text!r} is not a calendar day")
    return start + clock


def arrival(text: str) -> int:
    """Unix seconds of a payout's expected arrival: a "YYYY-MM-DD" day's start, or a time."""
    return seconds(f"{text} 00:00:00" if len(text) == len("2026-11-26") else text)


@functools.lru_cache(maxsize=4096)
def _day_start(day: str) -> int | None:
    """Unix seconds of a day's start; None if it is no calendar day (parsed once a day)."""
    try:
        return int(datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp())
    except ValueError:
        return None


class _Lines:
    """One report's lines read by column position (a dict per line costs more than the line)."""

    def __init__(self, kind: ReportKind, header: Sequence[str]) -> None:
        at = {column: i for i, column in enumerate(header)}
        balance = kind is ReportKind.BALANCE
        self.kind, self.compared = kind, _CATEGORIES[kind]
        self.category, self.currency = at["reporting_category"], at["currency"]
        self.gross, self.fee, self.net = at["gross"], at["fee"], at["net"]
        self.object_id = at["source_id" if balance else "payout_id"]
        self.created = at.get("created_utc", at.get("effective_at_utc", -1))
        self.settlement = at.get(SETTLEMENT_COLUMN, -1)
        self.destination = at.get("connected_account_id" if balance else "payout_destination_id")
        self.status = at.get("payout_status", -1)
        self.arrival = at.get("payout_expected_arrival_date")
        self.currencies: dict[str, tuple[str, int]] = {}  # as written: (ISO code, exponent)
        self.last_time = ("", 0)  # lines come in time order: most repeat the last one's

    def item(self, row: list[str], line: int) -> Item:
        category = row[self.category]
        if category not in self.compared:
            return category
        currency, gross = self._gross(row, category)
        object_id = _field(row, self.object_id, "the object id")
        if category == "transfer_reversal":
            reversed_for = row[self.settlement]
            return Reversal(line, reversed_for, gross) if reversed_for else category
        if category == "payout_reversal":
            return Return(line, object_id)
        created = self._time(_field(row, self.created, "the time"))
        where = (row[self.destination] or None) if self.destination is not None else None
        if self.kind is ReportKind.BALANCE:
            named = row[self.settlement] or None
            return RailObject(
                object_id, _TRANSFER, -gross, 0, currency, where, None, created, named
            )
        status = row[self.status]
        if status not in PAYOUT_STATUSES:
            raise ValueError(f"payout_status {status!r} is none of {sorted(PAYOUT_STATUSES)}")
        due = row[self.arrival] if self.arrival is not None else ""
        due_at = arrival(due) if due else None
        return RailObject(
            object_id, _PAYOUT, -gross, 0, currency, where, status, created, None, due_at
        )

    def _gross(self, row: list[str], category: str) -> tuple[str, int]:
        """The line's currency and gross, once its fee and net are checked against it."""
        written = row[self.currency]
        known = self.currencies.get(written)
        if known is None:
            code = written.upper()
            if not is_currency(code):
                raise ValueError(f"currency {written!r} is not an ISO 4217 code")
            known = self.currencies[written] = (code, exponent(code))
        currency, places = known
        gross_text, fee_text, net_text = row[self.gross], row[self.fee], row[self.net]
        gross = _minor(gross_text, currency, places)
        fee = 0 if fee_text == _ZERO[places] else _minor(fee_text, currency, places)
        # Most lines carry no fee: their net, written as their gross, is not read twice.
        alike = fee == 0 and net_text == gross_text
        if not alike and _minor(net_text, currency, places) != gross - fee:
            raise ValueError(f"net {net_text} is not gross {gross_text} less fee {fee_text}")
        sign = _SIGN[category]
        if gross * sign <= 0:
            raise ValueError(f"a {category} line's gross must be {_SIGN_WORD[sign]}")
        return currency, gross

    def _time(self, text: str) -> int:
        if text != self.last_time[0]:
            self.last_time = (text, seconds(text))
        return self.last_time[1]


def _field(row: list[str], at: int, what: str) -> str:
    value = row[at]
    if not value:
        raise ValueError(f"{what} is empty")
    return value
