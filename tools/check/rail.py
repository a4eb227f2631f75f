"""Facts from the rail: how many transfers and payouts it made per settlement.

`EffectSource` is the port. The simulator answers from its own complete count
(`GET /_sim/effects`); Stripe is asked through its list API, which sees only what it lists
(transfers and payouts created since a lookback), so its count is not exhaustive.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import httpx
import stripe

from services.relay.stripe_http import StripeAiohttp
from tools.check.errors import SourceUnavailable
from tools.check.facts import RailFacts

PAGE_SIZE = 100  # Stripe's largest page
LIST_CONNECTIONS = 2  # one listing at a time; a spare for a retry
DEFAULT_LOOKBACK = timedelta(days=30)


class EffectSource(Protocol):
    """Where the effects at the rail are counted."""

    async def effects(self) -> RailFacts:
        """Effects per settlement id, or SourceUnavailable."""
        ...


class SimulatorEffects:
    """The simulator's own count of objects created per `metadata[settlement_id]`."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must be an http(s) URL like http://127.0.0.1:12111, not {base_url!r}"
            )
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._transport = transport

    async def effects(self) -> RailFacts:
        """GET /_sim/effects, summed over transfers and payouts per settlement."""
        url = f"{self.base_url}/_sim/effects"
        try:
            async with httpx.AsyncClient(transport=self._transport, timeout=self._timeout) as c:
                response = await c.get(url)
                response.raise_for_status()
                body = response.json()
        except (httpx.HTTPError, ValueError) as e:
            raise SourceUnavailable("rail", f"GET {url}: {e!r}") from e
        by_settlement = body.get("by_settlement") if isinstance(body, dict) else None
        if not isinstance(by_settlement, dict):
            raise SourceUnavailable("rail", f"GET {url}: no by_settlement object in the answer")
        effects = {
            str(sid): sum(int(n) for n in counts.values())
            for sid, counts in by_settlement.items()
            if isinstance(counts, dict)
        }
        return RailFacts(effects, exhaustive=True, source=f"simulator {self.base_url}")


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
        if not api_key:
            raise ValueError(
                "api_key is empty: pass a Stripe secret key (sk_test_... or sk_live_...)"
            )
        self._since = int((datetime.now(UTC) - lookback).timestamp())
        self._source = f"stripe {api_base or 'api.stripe.com'}"
        # The relay's transport: the same timeouts and error classes, read-only calls here.
        self._http = StripeAiohttp(timeout, connections=LIST_CONNECTIONS)
        self._client = stripe.StripeClient(
            api_key,
            base_addresses={"api": api_base.rstrip("/")} if api_base else None,
            max_network_retries=2,
            http_client=self._http,
        )

    async def effects(self) -> RailFacts:
        """Every transfer and payout created within the lookback, per settlement id."""
        counts: Counter[str] = Counter()
        v1 = self._client.v1
        try:
            await self._count(lambda p: v1.transfers.list_async(p), counts)  # type: ignore[arg-type]
            await self._count(lambda p: v1.payouts.list_async(p), counts)  # type: ignore[arg-type]
        except stripe.StripeError as e:
            raise SourceUnavailable("rail", f"stripe list failed: {e}") from e
        finally:
            await self._http.close_async()
        return RailFacts(dict(counts), exhaustive=False, source=self._source)

    async def _count(self, list_page: _ListPage, counts: Counter[str]) -> None:
        params: dict[str, Any] = {"limit": PAGE_SIZE, "created": {"gte": self._since}}
        while True:
            page = (await list_page(params)).to_dict()
            items = page.get("data")
            if not isinstance(items, list):
                raise SourceUnavailable("rail", "stripe list: malformed page")
            for item in items:
                metadata = item.get("metadata") if isinstance(item, dict) else None
                if isinstance(metadata, dict) and metadata.get("settlement_id"):
                    counts[str(metadata["settlement_id"])] += 1
            if not page.get("has_more") or not items:
                return
            params = {**params, "starting_after": str(items[-1]["id"])}
