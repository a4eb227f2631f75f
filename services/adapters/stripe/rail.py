"""The Stripe adapter of the rail port: Connect transfers and payouts through StripeClient.

Stripe's library never retries here (``max_network_retries=0``): the relay's retry policy,
with its fence and lease, is the only one. Every create carries the instruction's
deterministic key as ``Idempotency-Key``; the library would otherwise invent a random one
per POST, which would defeat Stripe's deduplication across our attempts.

HTTP goes through one keep-alive client per rail (``StripeHTTP``), opened on the first call
and closed by ``aclose``, with up to `connections` calls in flight on kept-alive connections.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import stripe
from stripe.params import PayoutListParams, TransferListParams

from services.adapters.stripe import paging
from services.adapters.stripe.http import DEFAULT_CONNECTIONS, StripeAPI
from services.adapters.stripe.outcomes import outcome_of_created, outcome_of_error
from services.adapters.stripe.paging import RawPage, page_of
from services.domain.errors import SettleError
from services.domain.payout import PayoutMethod
from services.domain.rail import RailInstruction, RailResult, UnreadableRailObject
from services.platform.clock import Clock, utc_now
from services.platform.sections import RailKeySection

DEFAULT_TIMEOUT = 10.0  # seconds, per HTTP call
DEFAULT_PAYOUT_LOOKBACK = timedelta(days=7)
DEFAULT_MAX_PAGES = 20
TRANSFER_PAGE_SIZE = 10  # a transfer group holds one settlement's transfers: a handful at most
PAYOUT_PAGE_SIZE = 100  # Stripe's maximum page size
CREATE_PATHS = {PayoutMethod.TRANSFER: "/v1/transfers", PayoutMethod.PAYOUT: "/v1/payouts"}

_ListPage = Callable[[str | None], Awaitable[stripe.StripeObject]]


class RailLookupFailed(SettleError):
    """The rail could not be searched; absence of a result is not proof of absence."""

    retriable = True

    def __init__(self, settlement_id: str, detail: str) -> None:
        super().__init__(f"rail lookup for settlement {settlement_id} failed: {detail}")
        self.settlement_id = settlement_id
        self.detail = detail


class RailLookupIncomplete(RailLookupFailed):
    """The search ran out of pages before it could rule the settlement out; send to review."""

    retriable = False


class StripeRail:
    """The rail port over Stripe's API (or anything that speaks it: stripe-mock, railsim)."""

    def __init__(
        self,
        api_key: str,
        *,
        api_base: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        payout_lookback: timedelta = DEFAULT_PAYOUT_LOOKBACK,
        max_pages: int = DEFAULT_MAX_PAGES,
        connections: int = DEFAULT_CONNECTIONS,
        clock: Clock = utc_now,
    ) -> None:
        if timeout <= 0:
            raise ValueError(
                f"timeout must be a positive number of seconds, e.g. 10.0; got {timeout}"
            )
        if max_pages < 1:
            raise ValueError(f"max_pages must be at least 1, e.g. 20; got {max_pages}")
        if payout_lookback <= timedelta(0):
            raise ValueError("payout_lookback must be a positive timedelta, e.g. timedelta(days=7)")
        self._timeout = timeout
        self._payout_lookback = payout_lookback
        self._max_pages = max_pages
        self._clock = clock
        # No library retries: a POST whose answer was lost is the relay's to judge.
        self._api = StripeAPI(
            api_key, api_base=api_base, timeout=timeout, connections=connections, retries=0
        )
        self._client = self._api.client

    async def send(self, instruction: RailInstruction) -> RailResult:
        """Create the transfer or payout under the instruction's key; classify, never raise."""
        if not instruction.idempotency_key:
            # An empty key would make stripe generate a random one: a second payment risk.
            raise ValueError("instruction.idempotency_key is empty; derive it from the settlement")
        params: dict[str, object] = {
            "amount": instruction.amount,
            "currency": instruction.currency.lower(),
            "destination": instruction.destination,
            "metadata": {"settlement_id": instruction.settlement_id, "tenant": instruction.tenant},
            "description": f"settle settlement {instruction.settlement_id}",
        }
        if instruction.method is PayoutMethod.TRANSFER:
            params["transfer_group"] = instruction.settlement_id
        try:
            # The raw request is the typed create's request, answered and checked alike (a
            # non-2xx answer raises the same StripeError); it skips building a StripeObject of
            # the whole answer, where only its id is read. StripeHTTP bounds the whole call by
            # the timeout: past it, an APIConnectionError caused by AnswerTimeout (AMBIGUOUS).
            response = await self._client.raw_request_async(
                "post",
                CREATE_PATHS[instruction.method],
                **params,
                idempotency_key=instruction.idempotency_key,
            )
        except stripe.StripeError as e:
            return outcome_of_error(e)
        return outcome_of_created(response)

    async def find(
        self, instruction: RailInstruction, *, since: datetime | None = None
    ) -> str | None:
        """The id of a transfer or payout whose metadata names this settlement, or None.

        Payouts are searched from `since` (default: the payout lookback before now). Raises
        RailLookupFailed when Stripe cannot be asked, RailLookupIncomplete when the page
        bound was reached without a match.
        """
        found = await self._search(instruction, since, every=False)
        return found[0] if found else None

    async def find_all(
        self, instruction: RailInstruction, *, since: datetime | None = None
    ) -> list[str]:
        """The ids of every transfer or payout whose metadata names this settlement, searched
        as `find` does to the last page; RailLookupIncomplete if the page bound came first."""
        return await self._search(instruction, since, every=True)

    async def _search(
        self, instruction: RailInstruction, since: datetime | None, *, every: bool
    ) -> list[str]:
        if instruction.method is PayoutMethod.TRANSFER:

            async def transfers(after: str | None) -> stripe.StripeObject:
                params: TransferListParams = {
                    "transfer_group": instruction.settlement_id,
                    "limit": TRANSFER_PAGE_SIZE,
                }
                if after is not None:
                    params["starting_after"] = after
                return await self._client.v1.transfers.list_async(params)

            return await self._scan(instruction.settlement_id, transfers, every)

        start = since if since is not None else self._clock() - self._payout_lookback

        async def payouts(after: str | None) -> stripe.StripeObject:
            params: PayoutListParams = {
                "created": {"gte": int(start.timestamp())},
                "destination": instruction.destination,
                "limit": PAYOUT_PAGE_SIZE,
            }
            if after is not None:
                params["starting_after"] = after
            return await self._client.v1.payouts.list_async(params)

        return await self._scan(instruction.settlement_id, payouts, every)

    async def aclose(self) -> None:
        """Close the HTTP connections; the rail is unusable afterwards."""
        await self._api.aclose()

    async def _scan(self, settlement_id: str, list_page: _ListPage, every: bool) -> list[str]:
        async def fetch(after: str | None) -> RawPage:
            try:
                async with asyncio.timeout(self._timeout):
                    return page_of((await list_page(after)).to_dict())
            except TimeoutError as e:
                raise RailLookupFailed(settlement_id, "timeout") from e
            except stripe.StripeError as e:
                raise RailLookupFailed(settlement_id, outcome_of_error(e).detail) from e
            except UnreadableRailObject as e:
                # Reading a malformed page as "not found" could pay twice.
                raise RailLookupFailed(settlement_id, "malformed list response") from e

        found: list[str] = []
        last = None
        async for last in paging.pages(fetch, self._max_pages):
            for item in last.items:
                ref = item.get("id")
                if not isinstance(ref, str):
                    raise RailLookupFailed(settlement_id, "malformed list response")
                metadata = item.get("metadata")
                if isinstance(metadata, dict) and metadata.get("settlement_id") == settlement_id:
                    found.append(ref)
                    if not every:
                        return found
        if last is not None and last.has_more and last.items:
            raise RailLookupIncomplete(settlement_id, f"no match in {self._max_pages} pages")
        return found


def stripe_rail(
    settings: RailKeySection,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    connections: int = DEFAULT_CONNECTIONS,
) -> StripeRail:
    """The Stripe rail for the relay's composition root, from STRIPE_API_KEY/STRIPE_API_BASE."""
    return StripeRail(
        settings.stripe_api_key.get_secret_value(),
        api_base=settings.stripe_api_base,
        timeout=timeout,
        connections=connections,
    )
