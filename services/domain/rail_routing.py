"""Which rail pays a settlement: the one it names, else its tenant's default for the
currency, else the first rail of the deployment that pays the currency to the destination.

A deployment drives one or more rails (`SETTLE_RAILS`), each of which pays some currencies to
some destinations (its `RailReach`). Tenants may set defaults per currency
(`SETTLE_TENANT_RAILS`, `tenant:CURRENCY=rail` pairs separated by commas). A settlement no
configured rail can pay is refused before anything of it is booked, with a code that says
why:

    rail_unavailable            the rail it names (or its tenant's default) is not driven here
    currency_not_supported      no rail it may go to pays its currency
    destination_not_supported   the rail pays the currency, but not to such a destination
    payee_not_supported         the rail pays there, but cannot carry the payee's name (too
                                long, or in characters the rail's files may not hold)

What each rail pays is `REACHES`: Stripe's API (and the simulator that speaks it) pays any
currency to a connected account, which Stripe itself checks; SEPA credit transfers pay euros
to an IBAN in the SEPA zone, naming the payee in at most ISO 20022's 70 characters of the
SEPA character set (a Latin letter with an accent is written as its base letter; a name in
another script cannot be written at all).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from services.domain.money import is_currency
from services.domain.sepa import MAX_CREDITOR_NAME, SEPA_CURRENCY, is_sepa_iban, is_sepa_text

RAIL_UNAVAILABLE = "rail_unavailable"
CURRENCY_NOT_SUPPORTED = "currency_not_supported"
DESTINATION_NOT_SUPPORTED = "destination_not_supported"
PAYEE_NOT_SUPPORTED = "payee_not_supported"


def any_destination(_: str) -> bool:
    """A rail whose destinations are checked by the rail itself (a Stripe account)."""
    return True


@dataclass(frozen=True, slots=True)
class RailReach:
    """What one rail pays: its currencies (None: every one) and the destinations it can
    pay to."""

    name: str
    currencies: frozenset[str] | None = None
    pays_to: Callable[[str], bool] = any_destination
    carries_payee: Callable[[str], bool] = any_destination  # whether its files hold the name

    def pays(self, currency: str) -> bool:
        return self.currencies is None or currency in self.currencies


class RailRefused(Exception):
    """A settlement no configured rail can pay: `code` (see the module docstring) and why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


REACHES: Mapping[str, RailReach] = {
    "sim": RailReach("sim"),
    "stripe": RailReach("stripe"),
    "sepa": RailReach(
        "sepa",
        frozenset({SEPA_CURRENCY}),
        is_sepa_iban,
        lambda payee: is_sepa_text(payee, MAX_CREDITOR_NAME),
    ),
}


# The rails whose money moves through Stripe's API: reconciled against that API's records.
SPEAKS_STRIPE = frozenset({"sim", "stripe"})


# (tenant, currency) to the rail that pays it by default.
TenantRails = Mapping[tuple[str, str], str]


def parse_tenant_rails(text: str) -> dict[tuple[str, str], str]:
    """`tenant:CURRENCY=rail,...` as {(tenant, currency): rail}; ValueError naming the pair
    that is malformed, whose currency is not ISO 4217, or that is given twice."""
    defaults: dict[tuple[str, str], str] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        head, _, rail = pair.partition("=")
        tenant, _, currency = head.partition(":")
        if not tenant or not rail or not is_currency(currency):
            raise ValueError(f"{pair!r} is not tenant:CURRENCY=rail")
        if (tenant, currency) in defaults:
            raise ValueError(f"{tenant}:{currency} is given twice")
        defaults[(tenant, currency)] = rail
    return defaults


def route(
    requested: str | None,
    tenant: str,
    currency: str,
    destination: str,
    payee: str,
    rails: Sequence[RailReach],
    defaults: TenantRails,
) -> str:
    """The rail that pays this settlement; RailRefused when none of `rails` can."""
    by_name = {rail.name: rail for rail in rails}
    named = requested or defaults.get((tenant, currency))
    if named is not None:
        rail = by_name.get(named)
        if rail is None:
            whose = "the settlement's" if requested else f"tenant {tenant}'s default"
            raise RailRefused(RAIL_UNAVAILABLE, f"{whose} rail {named!r} is not driven here")
        candidates = [rail]
    else:
        candidates = list(rails)
    paying = [rail for rail in candidates if rail.pays(currency)]
    if not paying:
        names = ", ".join(rail.name for rail in candidates)
        raise RailRefused(CURRENCY_NOT_SUPPORTED, f"no rail here pays {currency} ({names})")
    reaching = [rail for rail in paying if rail.pays_to(destination)]
    if not reaching:
        names = ", ".join(rail.name for rail in paying)
        raise RailRefused(DESTINATION_NOT_SUPPORTED, f"{names} cannot pay to this destination")
    for rail in reaching:
        if rail.carries_payee(payee):
            return rail.name
    names = ", ".join(rail.name for rail in reaching)
    raise RailRefused(PAYEE_NOT_SUPPORTED, f"{names} cannot carry this payee's name")
