"""The platform's balance at the rail: one balance transaction per money movement, as Stripe
keeps them, and the balance they add up to (the nostro view a reconciliation reads).

Amounts are signed int minor units, negative when money leaves the platform; `fee` is what
Stripe kept on top (the sum of `fee_details`) and `net = amount - fee` is what the balance
moved by. A movement is `pending` until its `available_on`, then `available`; without fees
or delays (the `none` habits) every one is available at once with `net == amount`.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from enum import StrEnum

from railsim.journal import Journal
from railsim.listing import Ordered
from railsim.objects import Wire, new_id


class MovementType(StrEnum):
    """The balance transaction types the simulator books, named as Stripe names them."""

    TRANSFER = "transfer"  # a transfer out to a connected account
    TRANSFER_REFUND = "transfer_refund"  # a transfer reversed, in full or in part
    PAYOUT = "payout"  # a payout to a bank account
    PAYOUT_FAILURE = "payout_failure"  # a payout's money back: it failed, or was returned
    CHARGE = "charge"  # a card payment taken
    STRIPE_FEE = "stripe_fee"  # a fee Stripe bills on its own (Connect's)


# Stripe's reporting_category for each type (what its balance reports group by)
CATEGORY = {
    MovementType.TRANSFER: "transfer",
    MovementType.TRANSFER_REFUND: "transfer_reversal",
    MovementType.PAYOUT: "payout",
    MovementType.PAYOUT_FAILURE: "payout_reversal",
    MovementType.CHARGE: "charge",
    MovementType.STRIPE_FEE: "fee",
}
DEFAULT_CURRENCY = "usd"  # what Stripe shows for an account that never moved money


class BalanceBook:
    """Balance transactions in the order they happened, the balance per currency, available
    and pending, and which automatic payout took each available movement."""

    def __init__(self, journal: Journal | None = None) -> None:
        # written once; only `status` changes, when the money becomes available
        self.transactions: Ordered[Wire] = Ordered()
        self.swept: dict[str, str] = {}  # balance transaction -> automatic payout
        self._available: dict[str, int] = {}
        self._pending: dict[str, int] = {}
        self._maturing: list[tuple[int, int, str]] = []  # (available_on, position, id)
        self._unswept: dict[str, list[str]] = {}  # available, in no automatic payout yet
        self._journal = journal or Journal()

    def record(
        self,
        type_: MovementType,
        amount: int,
        currency: str,
        source: str | None,
        created: int,
        *,
        fees: Iterable[Wire] = (),
        available_on: int | None = None,
        description: str | None = None,
    ) -> str:
        """Book one movement of signed `amount` caused by object `source`; its id."""
        fee_details = list(fees)
        fee = sum(int(f["amount"]) for f in fee_details)
        available_on = created if available_on is None else available_on
        entry: Wire = {
            "id": new_id("txn"),
            "object": "balance_transaction",
            "amount": amount,
            "available_on": available_on,
            "balance_type": "payments",
            "created": created,
            "currency": currency,
            "description": description,
            "exchange_rate": None,
            "fee": fee,
            "fee_details": fee_details,
            "net": amount - fee,
            "reporting_category": CATEGORY[type_],
            "source": source,
            "status": "available" if available_on <= created else "pending",
            "type": type_.value,
        }
        self.keep(entry)
        if self._journal.enabled:
            self._journal.note({"k": "txn", "v": entry})
        return str(entry["id"])

    def keep(self, entry: Wire) -> None:
        """Take `entry` as booked (a fresh one, or one read back from the journal)."""
        self.transactions.add(entry["id"], entry)
        currency, net = entry["currency"], entry["net"]
        if entry["status"] == "available":
            self._available[currency] = self._available.get(currency, 0) + net
            self._unswept.setdefault(currency, []).append(entry["id"])
            return
        self._pending[currency] = self._pending.get(currency, 0) + net
        position = len(self.transactions.records) - 1
        heapq.heappush(self._maturing, (entry["available_on"], position, entry["id"]))

    def mature(self, now: float) -> None:
        """Make available every pending movement whose `available_on` has come."""
        while self._maturing and self._maturing[0][0] <= now:
            _, position, txn_id = heapq.heappop(self._maturing)
            entry = self.transactions.records[position]
            entry["status"] = "available"
            currency, net = entry["currency"], entry["net"]
            self._pending[currency] -= net
            self._available[currency] = self._available.get(currency, 0) + net
            if txn_id not in self.swept:  # a journal read back may have swept it already
                self._unswept.setdefault(currency, []).append(txn_id)

    def available(self, currency: str) -> int:
        """The available balance in `currency`."""
        return self._available.get(currency, 0)

    def currencies(self) -> list[str]:
        """Every currency the balance has moved in, sorted."""
        return sorted(self._available.keys() | self._pending.keys())

    def sweep(self, currency: str, payout_id: str) -> None:
        """Put every available movement in `currency` not yet paid out into the automatic
        payout `payout_id` (what `GET /v1/balance_transactions?payout=` lists)."""
        taken = self._unswept.pop(currency, [])
        self.assign(payout_id, taken)
        self._journal.note({"k": "swept", "payout": payout_id, "txns": taken})

    def assign(self, payout_id: str, transaction_ids: Iterable[str]) -> None:
        """Note the movements `transaction_ids` as paid out in `payout_id`."""
        taken = set(transaction_ids)
        for txn_id in taken:
            self.swept[txn_id] = payout_id
        for currency, ids in self._unswept.items():
            self._unswept[currency] = [i for i in ids if i not in taken]

    def find(self, transaction_id: str) -> Wire | None:
        """One balance transaction by id, if it exists."""
        position = self.transactions.position.get(transaction_id)
        return None if position is None else self.transactions.records[position]

    def read(self, entry: Wire, key: str) -> object:
        """A field of `entry` as the list filters see it (`payout`: its automatic payout)."""
        return self.swept.get(entry["id"]) if key == "payout" else entry.get(key)

    def balance(self) -> Wire:
        """The balance object of `GET /v1/balance`: what the movements add up to per currency."""
        currencies = self.currencies() or [DEFAULT_CURRENCY]
        return {
            "object": "balance",
            "available": [{"amount": self._available.get(c, 0), "currency": c} for c in currencies],
            "livemode": False,
            "pending": [{"amount": self._pending.get(c, 0), "currency": c} for c in currencies],
        }
