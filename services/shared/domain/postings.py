"""The chart of accounts and the posting rules every service books by.

Each tenant has four accounts per currency, id ``<tenant>:<kind>:<currency>``:

    funding      the tenant's money available for payouts
    payable      owed to payees: accepted, not yet sent to the rail
    in_transit   sent to the rail, not yet confirmed
    paid_out     confirmed paid by the rail

Postings are signed minor units, debit positive and credit negative; moving A from X to Y is
(X, -A), (Y, +A), so every entry sums to zero per currency. A settlement's money sits in the
holding account of its status, and each change books the move between holding accounts:

    state change                       credit (-A)         debit (+A)
    accepted (from nothing)            funding             payable
    accepted/dispatching -> submitted  payable             in_transit
    accepted/dispatching -> paid       payable             paid_out
    submitted -> paid                  in_transit          paid_out
    -> failed                          payable|in_transit  funding
    paid -> reversed                   paid_out            funding
    -> dispatching, -> needs_review    no entry: the money stays where it is

The journal entry's kind is the target status, and the database allows one entry per kind per
settlement. That holds because money only ever moves forward along funding -> payable ->
in_transit -> paid_out -> funding, so no kind is booked twice with postings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import NamedTuple

from services.shared.domain.settlement import SettlementStatus
from services.shared.money import is_amount, is_currency


class AccountKind(StrEnum):
    """What an account holds; the value is `accounts.kind`."""

    FUNDING = "funding"
    PAYABLE = "payable"
    IN_TRANSIT = "in_transit"
    PAID_OUT = "paid_out"


class Posting(NamedTuple):
    """One line of a journal entry."""

    account_id: str  # "<tenant>:<kind>:<currency>"
    amount: int  # signed minor units: debit positive, credit negative, never zero
    currency: str  # ISO 4217 code, the account's currency


_S = SettlementStatus

# Where a settlement's money sits in each status; None keeps it where it was.
HOLDING: Mapping[SettlementStatus, AccountKind | None] = {
    _S.ACCEPTED: AccountKind.PAYABLE,
    _S.DISPATCHING: AccountKind.PAYABLE,
    _S.SUBMITTED: AccountKind.IN_TRANSIT,
    _S.PAID: AccountKind.PAID_OUT,
    _S.FAILED: AccountKind.FUNDING,
    _S.REVERSED: AccountKind.FUNDING,
    _S.NEEDS_REVIEW: None,
}


def account_id(tenant: str, kind: AccountKind, currency: str) -> str:
    """The id of `tenant`'s `kind` account in `currency`."""
    return f"{tenant}:{kind}:{currency}"


def entry_kind(target: SettlementStatus) -> str:
    """The journal entry kind for the postings of reaching `target`."""
    return target.value


def holding_account(status: SettlementStatus, held_in: AccountKind) -> AccountKind:
    """Where the money sits after reaching `status`, coming from `held_in`."""
    return HOLDING[status] or held_in


def postings_for(
    amount: int, currency: str, tenant: str, held_in: AccountKind, target: SettlementStatus
) -> tuple[list[Posting], AccountKind]:
    """The postings moving `amount` from `held_in` to `target`'s holding account, and that account.

    The list is empty when the money does not move; then no journal entry is written.
    """
    if not is_amount(amount):
        raise ValueError(f"amount must be an int of minor units in 1 .. 2**63-1, not {amount!r}")
    if not is_currency(currency):
        raise ValueError(f"currency must be an ISO 4217 code, not {currency!r}")
    to = holding_account(target, held_in)
    if to == held_in:
        return [], held_in
    return [
        Posting(account_id(tenant, held_in, currency), -amount, currency),
        Posting(account_id(tenant, to, currency), amount, currency),
    ], to


def accept_postings(amount: int, currency: str, tenant: str) -> tuple[list[Posting], AccountKind]:
    """The postings of accepting a settlement: `amount` from funding to payable."""
    return postings_for(amount, currency, tenant, AccountKind.FUNDING, _S.ACCEPTED)


def net_by_account(postings: Iterable[Posting]) -> dict[str, int]:
    """Each account's net of `postings`, leaving out accounts that net to zero."""
    net: dict[str, int] = {}
    for posting in postings:
        net[posting.account_id] = net.get(posting.account_id, 0) + posting.amount
    return {account: total for account, total in net.items() if total != 0}


def is_balanced(postings: Iterable[Posting]) -> bool:
    """True if `postings` sum to zero in every currency, as every journal entry must."""
    by_currency: dict[str, int] = {}
    for posting in postings:
        by_currency[posting.currency] = by_currency.get(posting.currency, 0) + posting.amount
    return all(total == 0 for total in by_currency.values())


def expected_net(
    amount: int,
    currency: str,
    tenant: str,
    final: SettlementStatus,
    held_in: AccountKind | None = None,
) -> dict[str, int]:
    """The net position, per account, that a settlement ending in `final` must have booked.

    `held_in` is needed only for needs_review, whose money stays where it was.
    """
    to = HOLDING[final] or held_in
    if to is None:
        raise ValueError(f"{final} keeps the money where it was: pass held_in")
    if to == AccountKind.FUNDING:
        return {}
    return {
        account_id(tenant, AccountKind.FUNDING, currency): -amount,
        account_id(tenant, to, currency): amount,
    }
