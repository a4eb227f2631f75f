"""A counterparty statement read into rail objects: Stripe's itemized balance change report.

The file is the CSV of Stripe's `balance_change_from_activity.itemized.3` report: one line
per balance transaction, amounts in major units as decimal text ("-12.50", "-1000" for JPY).
The columns read (others, and lines of other reporting categories, are left alone):

    balance_transaction_id  created_utc ("YYYY-MM-DD HH:MM:SS")  currency  gross  fee  net
    reporting_category  source_id  connected_account_id  transfer_metadata[settlement_id]

    reporting_category  source_id   becomes
    transfer            tr_...      a transfer of -gross to connected_account_id
    transfer_reversal   trr_...     +gross added to the amount reversed of the transfer in the
                                    file that names the same settlement (the report names the
                                    related transfer's metadata, not its id)
    payout              po_...      a payout of -gross, `paid` (the report shows money that
                                    left the balance; a closed period's payout has arrived)
    payout_reversal     po_...      that payout `failed` (its money came back)

Amounts become int minor units by the currency's exponent (2; 0 for zero-decimal currencies
such as JPY; 3 for BHD, JOD, KWD, OMR, TND), by text alone, never through a float: more
decimals than the currency has, a malformed number, a sign the category cannot have, or a net
other than gross - fee is refused with StatementUnreadable naming the line. The report names
no payout's bank account, so a payout read from it has no destination. A reversal whose
transfer is not in the file (made before the statement's period) is counted, not compared.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import NamedTuple

from services.domain.money import exponent, is_currency
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import RailObject
from services.reconcile.errors import StatementUnreadable

SETTLEMENT_COLUMN = "transfer_metadata[settlement_id]"
REQUIRED_COLUMNS = (
    "balance_transaction_id",
    "created_utc",
    "currency",
    "gross",
    "fee",
    "net",
    "reporting_category",
    "source_id",
)
CREATED_FORMAT = "%Y-%m-%d %H:%M:%S"
_DECIMAL = re.compile(r"(-?)([0-9]+)(?:\.([0-9]+))?")  # ASCII digits only, as Stripe writes
# The sign each category's gross has: money out of the balance is negative.
_SIGN = {"transfer": -1, "transfer_reversal": 1, "payout": -1, "payout_reversal": 1}


class Statement(NamedTuple):
    """What a statement file says: its transfers and payouts, and how many lines it had."""

    objects: dict[str, RailObject]  # by object id, in the order the file first names them
    lines: int  # data lines read (the header not counted), every category included


def minor_units(text: str, currency: str) -> int:
    """The int minor units that decimal `text` in major units of `currency` is exactly;
    ValueError if it is not a plain decimal with at most the currency's decimals."""
    found = _DECIMAL.fullmatch(text)
    if found is None:
        raise ValueError(f"{text!r} is not a decimal amount such as -12.50")
    sign, whole, fraction = found.group(1), found.group(2), found.group(3) or ""
    places = exponent(currency)
    if len(fraction) > places:
        raise ValueError(f"{text!r} has more decimals than {currency}'s {places}")
    value = int(whole + fraction.ljust(places, "0"))
    return -value if sign else value


def read_statement(lines: Iterable[str]) -> Statement:
    """The transfers and payouts in a statement's CSV lines (header first), read one line at a
    time; StatementUnreadable naming the line if one cannot be read."""
    rows = csv.DictReader(lines)
    missing = [c for c in REQUIRED_COLUMNS if c not in (rows.fieldnames or ())]
    if missing:
        raise StatementUnreadable(1, f"the header lacks column(s) {', '.join(missing)}")
    objects: dict[str, RailObject] = {}
    reversals: list[tuple[int, str, int]] = []  # (line, settlement id, minor units)
    count = 0
    try:
        for row in rows:
            count += 1
            try:
                _read_line(row, rows.line_num, objects, reversals)
            except ValueError as e:
                raise StatementUnreadable(rows.line_num, str(e)) from None
    except csv.Error as e:
        raise StatementUnreadable(rows.line_num, f"not CSV: {e}") from None
    transfers: dict[str, list[str]] = {}
    for obj in objects.values():
        if obj.kind is PayoutMethod.TRANSFER and obj.settlement_id is not None:
            transfers.setdefault(obj.settlement_id, []).append(obj.object_id)
    for line, settlement_id, amount in reversals:
        _reverse(objects, transfers.get(settlement_id, []), line, amount)
    return Statement(objects, count)


def _read_line(
    row: Mapping[str, str | None],
    line: int,
    objects: dict[str, RailObject],
    reversals: list[tuple[int, str, int]],
) -> None:
    """Read one line into `objects` (or `reversals`, applied once every transfer is known)."""
    category = _field(row, "reporting_category")
    sign = _SIGN.get(category)
    if sign is None:
        return  # charges, fees, refunds...: not money settle sends
    currency = _field(row, "currency").upper()
    if not is_currency(currency):
        raise ValueError(f"currency {row['currency']!r} is not an ISO 4217 code")
    gross, fee, net = (minor_units(_field(row, c), currency) for c in ("gross", "fee", "net"))
    if net != gross - fee:
        raise ValueError(f"net {row['net']} is not gross {row['gross']} less fee {row['fee']}")
    if gross * sign <= 0:
        raise ValueError(
            f"a {category} line's gross must be {'positive' if sign > 0 else 'negative'}"
        )
    source_id = _field(row, "source_id")
    settlement_id = row.get(SETTLEMENT_COLUMN) or None
    if category == "transfer_reversal":
        if settlement_id is not None:
            reversals.append((line, settlement_id, gross))
        return
    if category == "payout_reversal":
        payout = objects.get(source_id)
        if payout is None or payout.kind is not PayoutMethod.PAYOUT:
            return  # a payout made before the statement's period: its own statement shows it
        objects[source_id] = payout._replace(status="failed")
        return
    if source_id in objects:
        raise ValueError(f"{source_id} has a second {category} line")
    transfer = category == "transfer"
    objects[source_id] = RailObject(
        source_id,
        PayoutMethod.TRANSFER if transfer else PayoutMethod.PAYOUT,
        -gross,
        0,
        currency,
        (row.get("connected_account_id") or None) if transfer else None,
        None if transfer else "paid",
        _created(_field(row, "created_utc")),
        settlement_id,
    )


def _reverse(objects: dict[str, RailObject], owners: list[str], line: int, amount: int) -> None:
    """Add a reversal line's amount to `owners`, the transfers in the file naming its
    settlement: there must be at most one."""
    if not owners:
        return  # a transfer made before the statement's period
    if len(owners) > 1:
        raise StatementUnreadable(line, f"the reversal could be of any of {', '.join(owners)}")
    transfer = objects[owners[0]]
    taken = transfer.amount_reversed + amount
    if taken > transfer.amount:
        raise StatementUnreadable(line, f"reversals of {transfer.object_id} exceed its amount")
    objects[transfer.object_id] = transfer._replace(amount_reversed=taken)


def _field(row: Mapping[str, str | None], column: str) -> str:
    value = row.get(column)
    if not value:
        raise ValueError(f"`{column}` is empty")
    return value


def _created(text: str) -> int:
    """Unix seconds of a `created_utc` value."""
    try:
        return int(datetime.strptime(text, CREATED_FORMAT).replace(tzinfo=UTC).timestamp())
    except ValueError:
        raise ValueError(f"created_utc {text!r} is not {CREATED_FORMAT}") from None
