"""The platform's balance at the rail: one balance transaction per money movement, as Stripe
keeps them, and the balance they add up to (the nostro view a reconciliation reads).

Every movement settles at once here (`status: available`, no fees), so `pending` is always
zero; amounts are signed int minor units, negative when money leaves the platform.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from railsim.listing import Ordered
from railsim.objects import Payout, Transfer, Wire, new_id
from railsim.statement import itemized_report


class MovementType(StrEnum):
    """The balance transaction types the simulator's objects cause, named as Stripe names them."""

    TRANSFER = "transfer"  # a transfer out to a connected account
    TRANSFER_REFUND = "transfer_refund"  # a transfer reversed, in full or in part
    PAYOUT = "payout"  # a payout to a bank account
    PAYOUT_FAILURE = "payout_failure"  # a payout's money back: it failed, or was returned


# Stripe's reporting_category for each type (what its balance reports group by)
_CATEGORY = {
    MovementType.TRANSFER: "transfer",
    MovementType.TRANSFER_REFUND: "transfer_reversal",
    MovementType.PAYOUT: "payout",
    MovementType.PAYOUT_FAILURE: "payout_reversal",
}
DEFAULT_CURRENCY = "usd"  # what Stripe shows for an account that never moved money


class BalanceBook:
    """Balance transactions in the order they happened, and the running balance per currency."""

    def __init__(self) -> None:
        # never changed once written, so kept in wire form
        self.transactions: Ordered[Wire] = Ordered()
        self._totals: dict[str, int] = {}

    def record(
        self, type_: MovementType, amount: int, currency: str, source: str, created: int
    ) -> str:
        """Book one movement of signed `amount` caused by object `source`; its id."""
        entry: Wire = {
            "id": new_id("txn"),
            "object": "balance_transaction",
            "amount": amount,
            "available_on": created,
            "balance_type": "payments",
            "created": created,
            "currency": currency,
            "description": None,
            "exchange_rate": None,
            "fee": 0,
            "fee_details": [],
            "net": amount,
            "reporting_category": _CATEGORY[type_],
            "source": source,
            "status": "available",
            "type": type_.value,
        }
        self.transactions.add(entry["id"], entry)
        self._totals[currency] = self._totals.get(currency, 0) + amount
        return str(entry["id"])

    def find(self, transaction_id: str) -> Wire | None:
        """One balance transaction by id, if it exists."""
        position = self.transactions.position.get(transaction_id)
        return None if position is None else self.transactions.records[position]

    def itemized(self, objects: Mapping[str, Transfer | Payout], start: int, end: int) -> str:
        """Stripe's itemized balance change report (CSV) of the movements created in
        [start, end); `objects` are the transfers and payouts that caused them."""
        return itemized_report(self.transactions.records, objects, start, end)

    def balance(self) -> Wire:
        """The balance object of `GET /v1/balance`: what the movements add up to per currency."""
        currencies = sorted(self._totals) or [DEFAULT_CURRENCY]
        return {
            "object": "balance",
            "available": [{"amount": self._totals.get(c, 0), "currency": c} for c in currencies],
            "livemode": False,
            "pending": [{"amount": 0, "currency": c} for c in currencies],
        }
