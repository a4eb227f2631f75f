"""The simulator's effects as a counterparty statement: the CSV of Stripe's itemized balance
change report (`balance_change_from_activity.itemized.3`), one line per balance transaction
created in [interval_start, interval_end), oldest first.

Amounts are written as Stripe writes them in that report: decimal major units, negative when
money leaves the balance ("-12.50"; "-1000" for JPY). A transfer's line and its reversals'
name the connected account and the transfer's `settlement_id` metadata; payouts name neither
(the report has no column for a payout's bank account).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from railsim.objects import Payout, Transfer, Wire
from services.domain.money import exponent

COLUMNS = (
    "balance_transaction_id",
    "created_utc",
    "available_on_utc",
    "currency",
    "gross",
    "fee",
    "net",
    "reporting_category",
    "source_id",
    "description",
    "connected_account_id",
    "transfer_metadata[settlement_id]",
)
CREATED_FORMAT = "%Y-%m-%d %H:%M:%S"


def major_units(amount: int, currency: str) -> str:
    """Signed int minor units as the report's decimal text in major units, exactly."""
    places = exponent(currency.upper())
    sign, digits = "-" if amount < 0 else "", str(abs(amount)).rjust(places + 1, "0")
    if not places:
        return sign + digits
    return f"{sign}{digits[:-places]}.{digits[-places:]}"


def itemized_report(
    transactions: Iterable[Wire], objects: Mapping[str, Transfer | Payout], start: int, end: int
) -> str:
    """The report's CSV text for the balance transactions created in [start, end)."""
    reversed_by = {
        r.id: o for o in objects.values() if isinstance(o, Transfer) for r in o.reversals
    }
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for txn in transactions:
        if start <= txn["created"] < end:
            writer.writerow(
                _line(txn, objects.get(txn["source"]) or reversed_by.get(txn["source"]))
            )
    return out.getvalue()


def _line(txn: Wire, cause: Transfer | Payout | None) -> list[str]:
    """One balance transaction's line; `cause` is its transfer (a reversal's too) or payout."""
    currency = txn["currency"]
    transfer = cause if isinstance(cause, Transfer) else None
    return [
        txn["id"],
        _utc(txn["created"]),
        _utc(txn["available_on"]),
        currency,
        major_units(txn["amount"], currency),
        major_units(txn["fee"], currency),
        major_units(txn["net"], currency),
        txn["reporting_category"],
        txn["source"],
        txn["description"] or "",
        transfer.destination if transfer else "",
        transfer.metadata.get("settlement_id", "") if transfer else "",
    ]


def _utc(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime(CREATED_FORMAT)
