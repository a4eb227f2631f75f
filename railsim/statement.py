"""Stripe's itemized reports as CSV, rendered from the simulator's balance transactions.

`balance_change_from_activity.itemized.3`: one line per balance transaction created in the
interval, oldest first, payouts and their reversals left out (they have a report of their
own). `payouts.itemized.3`: one line per payout's balance transaction (the payout, and its
money back if it failed or was returned) whose `effective_at` falls in the interval: a
manual payout's creation, an automatic payout's expected arrival, the failure's booking.

Amounts are written as Stripe writes them in these reports: decimal major units, negative
when money leaves the balance ("-12.50"; "-1000" for JPY; three decimals for KWD and the
like); `*_utc` times are "YYYY-MM-DD HH:MM:SS" in UTC, their plain twins in the run's time
zone. A transfer's line and its reversals' name the connected account and carry the
transfer's metadata (`transfer_metadata[KEY]`).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from railsim.objects import Charge, Payout, Transfer, Wire
from services.adapters.stripe.report_types import (
    BALANCE_DEFAULT_COLUMNS,
    BALANCE_REPORT,
    PAYOUTS_DEFAULT_COLUMNS,
)
from services.domain.money import exponent

BALANCE_OPTIONAL = ("connected_account_id", "automatic_payout_id", "charge_id")
PAYOUTS_OPTIONAL = (
    "balance_transaction_id",
    "created_utc",
    "created",
    "available_on_utc",
    "available_on",
    "automatic_payout_id",
)
PAYOUT_CATEGORIES = frozenset({"payout", "payout_reversal"})
METADATA_COLUMN = re.compile(r"transfer_metadata\[([^\[\]]+)\]")
CREATED_FORMAT = "%Y-%m-%d %H:%M:%S"


@dataclass(frozen=True, slots=True)
class Line:
    """What one report line is rendered from: a balance transaction and what caused it."""

    txn: Wire
    transfer: Transfer | None = None  # of a transfer line, or the transfer a reversal is of
    charge: Charge | None = None
    payout: Payout | None = None
    automatic_payout: str | None = None  # the automatic payout that took this movement
    reversed_at: int | None = None  # when a payout's money came back

    @property
    def effective_at(self) -> int:
        """When a payouts report line took effect (see the module's docstring)."""
        payout, created = self.payout, int(self.txn["created"])
        if payout is not None and payout.automatic and self.txn["type"] == "payout":
            return payout.arrival_date
        return created


def major_units(amount: int, currency: str) -> str:
    """Signed int minor units as the report's decimal text in major units, exactly."""
    places = exponent(currency.upper())
    sign, digits = "-" if amount < 0 else "", str(abs(amount)).rjust(places + 1, "0")
    if not places:
        return sign + digits
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


def utc_text(seconds: int, zone: tzinfo = UTC) -> str:
    """Unix `seconds` as the report writes a time, in `zone`."""
    return datetime.fromtimestamp(seconds, zone).strftime(CREATED_FORMAT)


def column_known(report_type: str, column: str) -> bool:
    """Whether `report_type` has the column `column` (defaults, optional, metadata)."""
    if report_type == BALANCE_REPORT:
        known = BALANCE_DEFAULT_COLUMNS + BALANCE_OPTIONAL
        return column in known or METADATA_COLUMN.fullmatch(column) is not None
    return column in PAYOUTS_DEFAULT_COLUMNS + PAYOUTS_OPTIONAL


def render(columns: Sequence[str], lines: Iterable[Line], zone: tzinfo = UTC) -> str:
    """The report's CSV text: the header, then a line per `lines`, in that order."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    cells = [_cell(column) for column in columns]
    for line in lines:
        writer.writerow([cell(line, zone) for cell in cells])
    return out.getvalue()


Cell = Callable[[Line, tzinfo], str]


def _money(field: str) -> Cell:
    return lambda line, _: major_units(line.txn[field], line.txn["currency"])


def _time(read: Callable[[Line], int | None], zoned: bool) -> Cell:
    def cell(line: Line, zone: tzinfo) -> str:
        seconds = read(line)
        return "" if seconds is None else utc_text(seconds, zone if zoned else UTC)

    return cell


def _transfer_metadata(key: str) -> Cell:
    return lambda line, _: line.transfer.metadata.get(key, "") if line.transfer else ""


def _connected_account(line: Line, _: tzinfo) -> str:
    if line.transfer is not None:
        return line.transfer.destination
    return (line.charge.transfer_destination or "") if line.charge else ""


def _arrival(line: Line, _: tzinfo) -> str:
    return utc_text(line.payout.arrival_date)[:10] if line.payout else ""


def _payout(read: Callable[[Payout], str | None]) -> Cell:
    return lambda line, _: (read(line.payout) or "") if line.payout else ""


def _charge(read: Callable[[Charge], str]) -> Cell:
    return lambda line, _: read(line.charge) if line.charge else ""


_CELLS: dict[str, Cell] = {
    "balance_transaction_id": lambda line, _: line.txn["id"],
    "created_utc": _time(lambda line: line.txn["created"], zoned=False),
    "created": _time(lambda line: line.txn["created"], zoned=True),
    "available_on_utc": _time(lambda line: line.txn["available_on"], zoned=False),
    "available_on": _time(lambda line: line.txn["available_on"], zoned=True),
    "currency": lambda line, _: line.txn["currency"],
    "gross": _money("amount"),
    "fee": _money("fee"),
    "net": _money("net"),
    "reporting_category": lambda line, _: line.txn["reporting_category"],
    "source_id": lambda line, _: line.txn["source"] or "",
    "description": lambda line, _: line.txn["description"] or "",
    "customer_facing_amount": _charge(lambda c: major_units(c.amount, c.currency)),
    "customer_facing_currency": _charge(lambda c: c.currency),
    "charge_id": _charge(lambda c: c.id),
    "connected_account_id": _connected_account,
    "automatic_payout_id": lambda line, _: line.automatic_payout or "",
    "payout_id": _payout(lambda p: p.id),
    "effective_at_utc": _time(lambda line: line.effective_at, zoned=False),
    "effective_at": _time(lambda line: line.effective_at, zoned=True),
    "payout_expected_arrival_date": _arrival,
    "payout_status": _payout(lambda p: p.status),
    "payout_reversed_at_utc": _time(lambda line: line.reversed_at, zoned=False),
    "payout_reversed_at": _time(lambda line: line.reversed_at, zoned=True),
    "payout_type": _payout(lambda _: "bank_account"),
    "payout_description": _payout(lambda p: p.description),
    "payout_destination_id": _payout(lambda p: p.destination),
}


def _cell(column: str) -> Cell:
    metadata = METADATA_COLUMN.fullmatch(column)
    if metadata is not None:
        return _transfer_metadata(metadata.group(1))
    return _CELLS[column]


class Causes:
    """What caused each balance transaction: the objects the rail holds, found by `source`."""

    def __init__(
        self,
        objects: Mapping[str, Transfer | Payout],
        charges: Mapping[str, Charge],
        swept: Mapping[str, str],
        find: Callable[[str], Wire | None],
        reversed_by: Mapping[str, Transfer],
    ) -> None:
        self._objects, self._charges, self._swept, self._find = objects, charges, swept, find
        self._reversed = reversed_by

    def line(self, txn: Wire) -> Line:
        """The line of `txn`, with its transfer, charge or payout."""
        source = txn["source"] or ""
        cause = self._objects.get(source) or self._reversed.get(source)
        payout = cause if isinstance(cause, Payout) else None
        failure = payout.failure_balance_transaction if payout else None
        back = self._find(failure) if failure else None
        return Line(
            txn,
            cause if isinstance(cause, Transfer) else None,
            self._charges.get(source),
            payout,
            self._swept.get(txn["id"]),
            int(back["created"]) if back else None,
        )
