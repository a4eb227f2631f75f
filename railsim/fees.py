"""What Stripe keeps, in int minor units: card processing, Instant Payouts, Connect billing.

Each fee is a whole number of minor units, rounded half up from its percentage (integer
arithmetic only), and appears on its balance transaction as one `fee_details` entry, so that
`net = amount - fee` holds on every balance transaction.
"""

from __future__ import annotations

from railsim.objects import Wire

BASIS = 10_000  # percentages are in basis points: 290 is 2.9%
CARD_BASIS_POINTS, CARD_FIXED = 290, 30  # a card charge: 2.9% + 30 minor units
INSTANT_BASIS_POINTS, INSTANT_MINIMUM = 100, 50  # an Instant Payout: 1%, at least 50
CONNECT_BASIS_POINTS, CONNECT_FIXED = 25, 25  # Connect payouts volume: 0.25% + 25 per payout
FEE_TYPES = frozenset({"stripe_fee", "application_fee"})


def share(amount: int, basis_points: int) -> int:
    """`basis_points` of `amount` (>= 0), rounded half up, exactly."""
    return (amount * basis_points + BASIS // 2) // BASIS


def card_fee(amount: int) -> int:
    """Stripe's processing fee on a card charge of `amount`."""
    return share(amount, CARD_BASIS_POINTS) + CARD_FIXED


def instant_payout_fee(amount: int) -> int:
    """Stripe's fee on an Instant Payout of `amount`."""
    return max(share(amount, INSTANT_BASIS_POINTS), INSTANT_MINIMUM)


def connect_fee(volume: int, payouts: int) -> int:
    """Connect's bill for `payouts` money movements to connected accounts worth `volume`."""
    return share(volume, CONNECT_BASIS_POINTS) + CONNECT_FIXED * payouts


def fee_detail(amount: int, currency: str, description: str, type_: str = "stripe_fee") -> Wire:
    """One entry of a balance transaction's `fee_details`, as Stripe renders it."""
    if type_ not in FEE_TYPES:
        raise ValueError(f"a fee's type is one of {sorted(FEE_TYPES)}, not {type_!r}")
    return {
        "amount": amount,
        "application": None,
        "currency": currency,
        "description": description,
        "type": type_,
    }
