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
    paid|partly_reversed -> reversed   paid_out            funding     (what is left)
       -> partly_reversed                paid_out            funding     (the part just back)
    -> dispatching, -> needs_review    no entry: the money stays where it is

settle's own accounts belong to the tenant named `platform` (no tenant may take the name):
a rail's charge on settle's account at the rail (a bank's fee for a transfer) moves the
charge from `platform:funding:<CUR>`, settle's own money there, to `platform:rail_fees:<CUR>`
(`charge_postings`). Those entries belong to no settlement. An operator correcting the books
from a reconciliation break moves money the same way between the platform's funding and its
other accounts (`platform_postings`): `write_offs` (what settle lost or found at the rail) and
`suspense` (money waiting to be explained). They are `PlatformAccount`s, not `AccountKind`s,
because booking opens every `AccountKind` for each tenant and no tenant has these.

A reversal books only what came back since the last one recorded (`reversal_postings`): the
delta between the cumulative amounts reversed before and after, so a settlement partly
reversed holds `amount - amount_reversed` in paid_out and has the rest back in funding.

The journal entry's kind is the target status, and the database allows one entry per kind per
settlement. That holds because money only ever moves forward along funding -> payable ->
in_transit -> paid_out -> funding, so no kind is booked twice with postings. Partial
reversals are the one step that may repeat; their kind names the cumulative amount reached
(`partly_reversed:<amount_reversed>`), so each part is booked once and only once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import NamedTuple

from services.domain.money import is_amount, is_currency
from services.domain.settlement import SettlementStatus


class AccountKind(StrEnum):
    """What an account holds; the value is `accounts.kind`."""

    FUNDING = "funding"
    PAYABLE = "payable"
    IN_TRANSIT = "in_transit"
    PAID_OUT = "paid_out"


PLATFORM = "platform"  # the tenant name of settle's own accounts


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
    _S.PARTLY_REVERSED: AccountKind.PAID_OUT,  # what has not come back yet
    _S.NEEDS_REVIEW: None,
}


def account_id(tenant: str, kind: AccountKind, currency: str) -> str:
    """The id of `tenant`'s `kind` account in `currency`."""
    return f"{tenant}:{kind}:{currency}"


def entry_kind(target: SettlementStatus, amount_reversed: int = 0) -> str:
    """The journal entry kind for the postings of reaching `target` (with `amount_reversed`
    back in all, for a partial reversal)."""
    if target is _S.PARTLY_REVERSED:
        return f"{target.value}:{amount_reversed}"
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


def reversal_postings(
    currency: str, tenant: str, reversed_before: int, reversed_after: int
) -> list[Posting]:
    """The postings of a reversal that brings the cumulative amount back from
    `reversed_before` to `reversed_after`: only the difference, from paid_out to funding."""
    delta = reversed_after - reversed_before
    if not is_amount(delta):
        raise ValueError(f"a reversal must bring money back, not {delta!r} minor units")
    if not is_currency(currency):
        raise ValueError(f"currency must be an ISO 4217 code, not {currency!r}")
    return [
        Posting(account_id(tenant, AccountKind.PAID_OUT, currency), -delta, currency),
        Posting(account_id(tenant, AccountKind.FUNDING, currency), delta, currency),
    ]


def step_postings(
    amount: int,
    currency: str,
    tenant: str,
    held_in: AccountKind,
    target: SettlementStatus,
    reversed_before: int,
    reversed_after: int,
) -> tuple[list[Posting], AccountKind]:
    """The postings of one step to `target` and where the money then sits: a reversal books
    what came back since `reversed_before`, any other step moves the whole `amount`."""
    if target in (_S.PARTLY_REVERSED, _S.REVERSED) and held_in is AccountKind.PAID_OUT:
        postings = reversal_postings(currency, tenant, reversed_before, reversed_after)
        return postings, holding_account(target, held_in)
    return postings_for(amount, currency, tenant, held_in, target)


def accept_postings(amount: int, currency: str, tenant: str) -> tuple[list[Posting], AccountKind]:
    """The postings of accepting a settlement: `amount` from funding to payable."""
    return postings_for(amount, currency, tenant, AccountKind.FUNDING, _S.ACCEPTED)


class PlatformAccount(StrEnum):
    """settle's own accounts beside its funding; the value is `accounts.kind`."""

    RAIL_FEES = "rail_fees"  # what the rails charged
    WRITE_OFFS = "write_offs"  # settle's loss (or, debited the other way, its gain)
    SUSPENSE = "suspense"  # money booked while its cause is found


def platform_postings(account: PlatformAccount, amount: int, currency: str) -> list[Posting]:
    """The postings moving `amount` from the platform's funding to its `account` (a negative
    `amount` moves it back)."""
    if type(amount) is not int or not is_amount(abs(amount)):
        raise ValueError(f"amount must be a non-zero int of minor units, not {amount!r}")
    if not is_currency(currency):
        raise ValueError(f"currency must be an ISO 4217 code, not {currency!r}")
    return [
        Posting(account_id(PLATFORM, AccountKind.FUNDING, currency), -amount, currency),
        Posting(f"{PLATFORM}:{account}:{currency}", amount, currency),
    ]


def charge_postings(amount: int, currency: str) -> list[Posting]:
    """The postings of a rail's charge of `amount` on settle's own account at the rail."""
    if not is_amount(amount):
        raise ValueError(f"a charge must be an int of minor units in 1 .. 2**63-1, not {amount!r}")
    return platform_postings(PlatformAccount.RAIL_FEES, amount, currency)


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
    amount_reversed: int = 0,
) -> dict[str, int]:
    """The net position, per account, that a settlement ending in `final` must have booked.

    `held_in` is needed only for needs_review, whose money stays where it was;
    `amount_reversed` only for partly_reversed, whose reversed part is back in funding.
    """
    to = HOLDING[final] or held_in
    if to is None:
        raise ValueError(f"{final} keeps the money where it was: pass held_in")
    out = amount - amount_reversed if final is _S.PARTLY_REVERSED else amount
    if to == AccountKind.FUNDING or out == 0:
        return {}
    return {
        account_id(tenant, AccountKind.FUNDING, currency): -out,
        account_id(tenant, to, currency): out,
    }
