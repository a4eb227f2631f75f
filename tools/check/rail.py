"""Facts from the rail: how many transfers and payouts it made per settlement.

`EffectSource` is the port: the counts come a page at a time (`pages`), so a reader of
millions need not hold them all; `effects` sums them for one who may. The simulator answers
from its own complete count (`GET /_sim/effects`, paged by offset); Stripe is asked through
its list API, which sees only what it lists (transfers and payouts created since a lookback),
so its count is not exhaustive, and one settlement's objects may come on several pages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import httpx
import stripe

from services.adapters.stripe import paging
from services.adapters.stripe.http import StripeAPI
from services.adapters.stripe.paging import RawPage, page_of
from services.domain.rail import UnreadableRailObject
from tools.check.errors import SourceUnavailable
from tools.check.facts import RailFacts

PAGE_SIZE = 100  # Stripe's largest page
SIMULATOR_PAGE = 10_000  # settlements per page of the simulator's count (a few MB of JSON)
LIST_CONNECTIONS = 2  # one listing at a time; a spare for a retry
DEFAULT_LOOKBACK = timedelta(days=30)


class EffectSource(Protocol):
    """Where the effects at the rail are counted."""

    exhaustive: bool  # True when the rail counts every object it made (the simulator)
    source: str  # "simulator <url>" or "stripe <base>"

    def pages(self) -> AsyncIterator[Mapping[str, int]]:
        """Effects per settlement id, a page at a time (a settlement may recur on a later
        page: add them up), or SourceUnavailable."""
        ...

    async def effects(self) -> RailFacts:
        """Every effect per settlement id, summed over the pages, or SourceUnavailable."""
        ...


async def summed(rail: EffectSource) -> RailFacts:
    """The rail's pages added up into one count per settlement."""
    counts: Counter[str] = Counter()
    async for page in rail.pages():
        counts.update(page)
    return RailFacts(dict(counts), exhaustive=rail.exhaustive, source=rail.source)


class SimulatorEffects:
    """The simulator's own count of objects created per `metadata[settlement_id]`."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        page_size: int = SIMULATOR_PAGE,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must be an http(s) URL like http://127.0.0.1:12111, not {base_url!r}"
            )
        self.base_url = base_url.rstrip("/")
        self.exhaustive = True
        self.source = f"simulator {self.base_url}"
        self._timeout = timeout
        self._transport = transport
        self._page_size = page_size

    async def pages(self) -> AsyncIterator[Mapping[str, int]]:
        """GET /_sim/effects a page at a time, summed over transfers and payouts per
        settlement (a simulator that does not page answers everything on the first)."""
        async with httpx.AsyncClient(transport=self._transport, timeout=self._timeout) as client:
            offset: int | None = 0
            while offset is not None:
                by_settlement, offset = await self._page(client, offset)
                yield {
                    str(sid): sum(int(n) for n in counts.values())
                    for sid, counts in by_settlement.items()
                    if isinstance(counts, dict)
                }

    async def effects(self) -> RailFacts:
        """Every settlement's effects, summed over transfers and payouts."""
        return await summed(self)

    async def _page(
        self, client: httpx.AsyncClient, offset: int
    ) -> tuple[dict[str, Any], int | None]:
        """One page of the count from `offset`, and where the next starts (None: no more)."""
        url = f"{self.base_url}/_sim/effects"
        try:
            response = await client.get(url, params={"offset": offset, "limit": self._page_size})
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as e:
            raise SourceUnavailable("rail", f"GET {url}: {e!r}") from e
        by_settlement = body.get("by_settlement") if isinstance(body, dict) else None
        if not isinstance(by_settlement, dict):
            raise SourceUnavailable("rail", f"GET {url}: no by_settlement object in the answer")
        following = body.get("next_offset")
        if not isinstance(following, int):
            return by_settlement, None
        if following <= offset:
            raise SourceUnavailable("rail", f"GET {url}: next_offset {following} does not advance")
        return by_settlement, following


_ListPage = Callable[[dict[str, Any]], Awaitable[stripe.StripeObject]]


class StripeEffects:
    """Transfers and payouts listed by Stripe's API, counted per `metadata.settlement_id`."""

    def __init__(
        self,
        api_key: str,
        *,
        api_base: str | None = None,
        timeout: float = 30.0,
        lookback: timedelta = DEFAULT_LOOKBACK,
    ) -> None:
        self._since = int((datetime.now(UTC) - lookback).timestamp())
        self.exhaustive = False
        # The relay's transport: the same timeouts and error classes, read-only calls here.
        self._api = StripeAPI(
            api_key, api_base=api_base, timeout=timeout, connections=LIST_CONNECTIONS, retries=2
        )
        self._client = self._api.client
        self.source = f"stripe {self._api.where}"

    async def pages(self) -> AsyncIterator[Mapping[str, int]]:
        """The transfers, then the payouts, created within the lookback, counted per
        settlement id a listed page at a time."""
        v1 = self._client.v1
        try:
            async for page in self._count(lambda p: v1.transfers.list_async(p)):  # type: ignore[arg-type]
                yield page
            async for page in self._count(lambda p: v1.payouts.list_async(p)):  # type: ignore[arg-type]
                yield page
        except stripe.StripeError as e:
            raise SourceUnavailable("rail", f"stripe list failed: {e}") from e
        finally:
            await self._api.aclose()

    async def effects(self) -> RailFacts:
        """Every transfer and payout created within the lookback, per settlement id."""
        return await summed(self)

    async def _count(self, list_page: _ListPage) -> AsyncIterator[Counter[str]]:
        async def fetch(after: str | None) -> RawPage:
            params: dict[str, Any] = {"limit": PAGE_SIZE, "created": {"gte": self._since}}
            if after is not None:
                params["starting_after"] = after
            try:
                return page_of((await list_page(params)).to_dict())
            except UnreadableRailObject as e:
                raise SourceUnavailable("rail", f"stripe list: {e}") from e

        async for page in paging.pages(fetch):
            counts: Counter[str] = Counter()
            for item in page.items:
                metadata = item.get("metadata")
                if isinstance(metadata, dict) and metadata.get("settlement_id"):
                    counts[str(metadata["settlement_id"])] += 1
            yield counts
