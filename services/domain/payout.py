"""How money leaves at the rail: the one name every service uses for it."""

from __future__ import annotations

from enum import StrEnum


class PayoutMethod(StrEnum):
    """A Connect transfer to a connected account, or a payout to a bank account or card.

    SETTLE_STRIPE_METHOD picks it for new settlements; each rail instruction keeps its own.
    """

    TRANSFER = "transfer"
    PAYOUT = "payout"
