"""The nostro view: how far the rail's balance moved against how far the ledger says it should.

Money settle sends sits in a tenant's `in_transit` account, then `paid_out`; money that comes
back leaves them for `funding`. So over any window, what left the rail's balance for payees
through settle's own objects (transfers and payouts out, less reversals, failures and
cancellations back, by gross amount) equals what entered those two accounts, per currency:

    rail outflow  = -(sum of the gross of the window's payee balance transactions of settle's)
    ledger inflow =   sum of the window's postings to in_transit and paid_out accounts

A difference is a balance_mismatch for the currency (field `balance`), with actual -
expected. The account is shared: balance transactions of other types (charges, top-ups,
fees) and those of other systems' objects (automatic payouts, destination-charge transfers)
are none of the ledger's business, but they do move the balance, by their net (gross less
the rail's fee): the rail's own closing balance must be its recorded opening balance plus the
net of every transaction of the window, or the transactions read are not the whole story (a
balance_mismatch of field `balance_transactions`). The fees the rail kept on settle's own
moves are booked to the platform's rail fees account (nostro_pass.py), not to a payee's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from services.domain.breaks import BreakType
from services.domain.postings import AccountKind, Posting
from services.domain.reconciliation import BalanceMove, Break, break_key

# Stripe's balance transaction types for money sent to payees and money coming back from them.
PAYEE_TYPES = frozenset(
    {
        "transfer",
        "transfer_cancel",
        "transfer_failure",
        "transfer_refund",
        "payout",
        "payout_cancel",
        "payout_failure",
    }
)
_SENT_ACCOUNTS = frozenset({AccountKind.IN_TRANSIT.value, AccountKind.PAID_OUT.value})


def rail_outflow(moves: Iterable[BalanceMove]) -> dict[str, int]:
    """Per currency, the minor units that left the rail's balance for payees through settle's
    own objects, net of returns."""
    out: dict[str, int] = {}
    for move in moves:
        if move.ours and move.move_type in PAYEE_TYPES:
            out[move.currency] = out.get(move.currency, 0) - move.amount
    return out


def ledger_inflow(postings: Iterable[Posting]) -> dict[str, int]:
    """Per currency, the minor units the postings moved into in_transit and paid_out accounts."""
    into: dict[str, int] = {}
    for posting in postings:
        # The kind is the id's middle part; a tenant may itself contain ":".
        kind = posting.account_id.rsplit(":", 2)[-2]
        if kind in _SENT_ACCOUNTS:
            into[posting.currency] = into.get(posting.currency, 0) + posting.amount
    return into


def balance_breaks(moves: Iterable[BalanceMove], postings: Iterable[Posting]) -> list[Break]:
    """A balance_mismatch for each currency whose rail outflow is not the ledger's inflow."""
    return _mismatches("balance", ledger_inflow(postings), rail_outflow(moves))


def statement_breaks(
    opening: Mapping[str, int], closing: Mapping[str, int], moves: Iterable[BalanceMove]
) -> list[Break]:
    """A balance_mismatch for each currency whose balance moved by another sum than its
    transactions' net: `opening` and `closing` are the rail's balances, per currency."""
    moved: dict[str, int] = dict(opening)
    for move in moves:
        moved[move.currency] = moved.get(move.currency, 0) + move.net
    return _mismatches("balance_transactions", moved, closing)


def _mismatches(field: str, expected: Mapping[str, int], actual: Mapping[str, int]) -> list[Break]:
    found = [
        Break(
            BreakType.BALANCE_MISMATCH,
            None,
            None,
            field,
            expected.get(currency, 0),
            actual.get(currency, 0),
            actual.get(currency, 0) - expected.get(currency, 0),
            currency,
        )
        for currency in expected.keys() | actual.keys()
        if expected.get(currency, 0) != actual.get(currency, 0)
    ]
    return sorted(found, key=break_key)
