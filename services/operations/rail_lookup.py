"""The rail as an operator's resolution asks it, at that moment: every object that names a
settlement, found the way the relay finds one (by metadata, `StripeRail.find_all`) and by the
ids already recorded, each read whole by reconciliation's `RailSource`."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Protocol

from services.adapters.stripe.address import rail_api_base
from services.adapters.stripe.rail import RailLookupFailed, StripeRail
from services.adapters.stripe.source import RailSource
from services.domain.rail import RailInstruction, RailReadError
from services.domain.reconciliation import RailObject
from services.operations.errors import RailUnavailable
from services.platform.sections import RailKeySection


class RailLookup(Protocol):
    """What resolving a settlement asks of the rail."""

    async def objects_for(
        self, instruction: RailInstruction, known: Iterable[str], since: datetime
    ) -> list[RailObject]:
        """Every transfer or payout for the instruction's settlement; RailUnavailable if the
        rail cannot be asked."""
        ...


class StripeLookup:
    """The rail lookup over Stripe's API (or the simulator); close it with `aclose`."""

    def __init__(self, api_key: str, *, api_base: str | None = None) -> None:
        self._search = StripeRail(api_key, api_base=api_base)
        self._read = RailSource(api_key, api_base=api_base)

    async def objects_for(
        self, instruction: RailInstruction, known: Iterable[str], since: datetime
    ) -> list[RailObject]:
        """Objects whose metadata names the settlement (payouts created since `since`) and
        those with the `known` ids, read whole; an id the rail does not know is left out."""
        try:
            found = await self._search.find_all(instruction, since=since)
            return await self._read.retrieve({*found, *known})
        except (RailLookupFailed, RailReadError) as e:
            raise RailUnavailable(f"the rail could not be searched: {e}") from e

    async def aclose(self) -> None:
        """Close both HTTP sessions."""
        await self._search.aclose()
        await self._read.aclose()


def stripe_lookup(settings: RailKeySection, rail_url: str | None = None) -> StripeLookup:
    """The lookup over the rail the settings name (`rail_url`, when given, where the address
    rule allows it: services/adapters/stripe/address.py)."""
    api_base = rail_api_base(settings, rail_url)
    return StripeLookup(settings.stripe_api_key.get_secret_value(), api_base=api_base)


class NoRail:
    """The lookup of a caller whose actions ask nothing of the rail (breaks, replays): any
    question is RailUnavailable, never an answer."""

    async def objects_for(
        self, instruction: RailInstruction, known: Iterable[str], since: datetime
    ) -> list[RailObject]:
        """Always RailUnavailable: this caller has no rail to ask."""
        raise RailUnavailable("no rail is configured here; resolve settlements where one is")
