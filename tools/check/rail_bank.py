"""Facts from the bank of the SEPA rail, and the effects of several rails read as one.

The bank simulator counts its debits per EndToEndId (`GET /v1/effects`), as the rail
simulator counts its transfers: each EndToEndId of settle's is a settlement id
(services/domain/sepa.py), so the count reads per settlement. A deployment that drives
several rails is checked against all of them at once (`AllRails`): a settlement's effects
are summed over every rail, so a settlement paid once on each of two rails counts twice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence

import httpx

from services.domain.sepa import settlement_of
from tools.check.errors import SourceUnavailable
from tools.check.facts import RailFacts
from tools.check.rail import EffectSource, summed


class BankEffects:
    """The bank simulator's own count of debits per EndToEndId, read per settlement."""

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.exhaustive = True
        self.source = f"bank {self.base_url}"
        self._timeout = timeout

    async def pages(self) -> AsyncIterator[Mapping[str, int]]:
        """GET /v1/effects: the debits, one page, keyed by settlement id."""
        url = f"{self.base_url}/v1/effects"
        try:
            async with httpx.AsyncClient(timeout=self._timeout) as client:
                response = await client.get(url)
                response.raise_for_status()
                body = response.json()
        except (httpx.HTTPError, ValueError) as e:
            raise SourceUnavailable("rail", f"GET {url}: {e!r}") from e
        debits = body.get("debits") if isinstance(body, dict) else None
        if not isinstance(debits, dict):
            raise SourceUnavailable("rail", f"GET {url}: no debits object in the answer")
        yield {
            sid: int(count)
            for e2e, count in debits.items()
            if (sid := settlement_of(str(e2e))) is not None and isinstance(count, int)
        }

    async def effects(self) -> RailFacts:
        return await summed(self)


class AllRails:
    """The effects of several rails, one source to the checker."""

    def __init__(self, rails: Sequence[EffectSource]) -> None:
        self.rails = list(rails)
        self.exhaustive = all(rail.exhaustive for rail in rails)
        self.source = " + ".join(rail.source for rail in rails)

    async def pages(self) -> AsyncIterator[Mapping[str, int]]:
        for rail in self.rails:
            async for page in rail.pages():
                yield page

    async def effects(self) -> RailFacts:
        return await summed(self)
