"""The rail side of a reconciliation: transfers and payouts read through Stripe's own client
(against Stripe, or anything that speaks its API: the simulator, stripe-mock).

Lists go by `created` window, a page of 100 at a time, each page asking for the objects
`starting_after` the last one of the page before, as Stripe's list API pages; objects a
settlement's reference names outside the window are retrieved by id. Every object is read by
`wire.py`. A rail that does not answer, or answers an error, raises RailUnreadable:
reconciliation never takes silence for agreement. Only a 404 on a retrieve is an answer.

List pages are fetched through the client's requestor (its auth, API version, retries and
HTTP client), but their bodies are not made into the library's objects: measured here,
`convert_to_stripe_object` costs about 1.2 ms a transfer (and `to_dict` 0.13 ms more), under
1,000 objects a second, and even `raw_request_async` reads each body into OrderedDicts first
(27 us a transfer). The body is read once, by orjson, in `wire.raw_page_of` (3.5 us).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Protocol

import stripe

from services.adapters.stripe import paging
from services.adapters.stripe.http import StripeAPI
from services.adapters.stripe.paging import RawPage
from services.adapters.stripe.read_limit import ReadLimit
from services.adapters.stripe.wire import balance_move_of, balance_of, rail_object_of, raw_page_of
from services.domain.payout import PayoutMethod
from services.domain.rail import (
    DEFAULT_READ_RATE,
    RailReadError,
    RailUnreadable,
    UnreadableRailObject,
)
from services.domain.rail_routing import SPEAKS_STRIPE
from services.domain.reconciliation import BalanceMove, RailObject

PAGE_SIZE = 100  # Stripe's largest page
SLICES = 4  # stretches of a window each list is read in, side by side
CONNECTIONS = 2 * SLICES + 1  # every stretch of both lists at once; a spare for a retrieve
DEFAULT_TIMEOUT = 30.0  # seconds, per HTTP call
TRANSFER_PREFIX = "tr_"
PAYOUT_PREFIX = "po_"
LISTS = ("/v1/transfers", "/v1/payouts")  # listed in this order


# The rails whose money moves through Stripe's API, and so shows in its records.
STRIPE_API_RAILS = tuple(sorted(SPEAKS_STRIPE))


class RailReader(Protocol):
    """What a run reads the rail's objects through: its API (RailSource), or a statement of
    it (statement_source.StatementSource)."""

    source: str  # the name the run's evidence records the reading under
    rails: tuple[str, ...]  # the rails whose settlements this reading accounts for

    def pages(self, start: int, end: int) -> AsyncIterator[list[RailObject]]:
        """The transfers and payouts created in [start, end), a page at a time."""
        ...

    async def retrieve(self, object_ids: Iterable[str]) -> list[RailObject]:
        """The transfers and payouts with these ids; an unknown id is left out."""

    def rows_read(self, objects: int) -> int:
        """How many rows the reading returned, for the evidence, given the objects it gave."""

    async def aclose(self) -> None:
        """Release what the reader holds."""


class RailSource:
    """Reads the rail's transfers and payouts for reconciliation; close it with `aclose`."""

    source = "rail"
    rails = STRIPE_API_RAILS

    def __init__(
        self,
        api_key: str,
        *,
        api_base: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        read_rate: float = DEFAULT_READ_RATE,
    ) -> None:
        # The relay's transport: the same timeouts and error classes; read-only calls here,
        # so the library may retry them.
        self._api = StripeAPI(
            api_key, api_base=api_base, timeout=timeout, connections=CONNECTIONS, retries=2
        )
        # Every read waits its turn under the rail's read limit, as many in flight as the
        # connections hold.
        self._limit = ReadLimit(read_rate, burst=CONNECTIONS)
        self._client = self._api.client
        self.where = self._api.where

    async def objects(self, start: int, end: int) -> list[RailObject]:
        """Every transfer and payout created in [start, end), transfers first, newest first."""
        found = [o async for page in self.pages(start, end) for o in page]
        return sorted(found, key=lambda o: (o.kind is not PayoutMethod.TRANSFER, -o.created))

    async def pages(self, start: int, end: int) -> AsyncIterator[list[RailObject]]:
        """The transfers and payouts created in [start, end), a page at a time, in no set
        order: each list is read in `SLICES` stretches of the window side by side, so that
        the rail renders one page while the last is read here."""
        queue: asyncio.Queue[list[RailObject] | RailReadError | None] = asyncio.Queue(
            maxsize=2 * SLICES
        )
        walks = [
            asyncio.ensure_future(self._walk(queue, path, a, b))
            for path in LISTS
            for a, b in slices(start, end, SLICES)
        ]
        try:
            running = len(walks)
            while running:
                item = await queue.get()
                if item is None:
                    running -= 1
                elif isinstance(item, RailReadError):
                    raise item
                elif item:
                    yield item
        finally:
            for walk in walks:
                walk.cancel()  # the reader stopped early: the pages on their way are not read
            await asyncio.gather(*walks, return_exceptions=True)

    async def _walk(
        self,
        queue: asyncio.Queue[list[RailObject] | RailReadError | None],
        path: str,
        start: int,
        end: int,
    ) -> None:
        """Page `path` over [start, end) onto `queue`, then None; an error ends the walk."""
        try:
            async for page in paging.pages(lambda after: self._page(path, start, end, after)):
                await queue.put([rail_object_of(item) for item in page.items])
        except RailReadError as e:
            await queue.put(e)
            return
        await queue.put(None)

    async def retrieve(self, object_ids: Iterable[str]) -> list[RailObject]:
        """The transfers and payouts with these ids, read side by side under the read limit;
        an id the rail does not know is left out."""
        ids = sorted(set(object_ids))
        found: list[RailObject | None] = []
        for i in range(0, len(ids), CONNECTIONS):  # at most the connections' worth in flight
            found += await asyncio.gather(*(self._retrieve(o) for o in ids[i : i + CONNECTIONS]))
        return [obj for obj in found if obj is not None]

    def rows_read(self, objects: int) -> int:
        """The objects the rail returned."""
        return objects

    async def aclose(self) -> None:
        """Close the HTTP session."""
        await self._api.aclose()

    async def balance_moves(self, created: Mapping[str, int]) -> AsyncIterator[BalanceMove]:
        """The balance transactions created in `created` (Stripe's range filter: gte, lt...),
        newest first, page after page as the list pages them."""

        async def fetch(after: str | None) -> RawPage:
            # The source expanded: whose money it was (settle's mark) comes with each move.
            params: dict[str, Any] = {
                "created": dict(created),
                "limit": PAGE_SIZE,
                "expand": ["data.source"],
            }
            if after is not None:
                params["starting_after"] = after
            return raw_page_of(await self._body("/v1/balance_transactions", params))

        async for page in paging.pages(fetch):
            for item in page.items:
                yield balance_move_of(item)

    async def _page(self, path: str, start: int, end: int, after: str | None) -> RawPage:
        """One list page: the objects created in [start, end) listed after `after`."""
        params: dict[str, Any] = {"created": {"gte": start, "lt": end}, "limit": PAGE_SIZE}
        if after is not None:
            params["starting_after"] = after
        return raw_page_of(await self._body(path, params))

    async def _body(self, path: str, params: dict[str, Any]) -> bytes:
        """The body of one list request through the library's requestor, unread; an error
        answer is read by the library and raised as RailUnreadable."""
        requestor = self._client._requestor
        await self._limit.wait()
        try:
            body, status, headers = await requestor.request_raw_async(
                "get", path, params, base_address="api", api_mode="V1", usage=["reconcile"]
            )
            if not 200 <= status < 300:
                # The library's own reading of an error answer: it raises its StripeError.
                requestor._interpret_response(body, status, headers, "V1")
                raise stripe.APIError(f"HTTP {status} listing {path}")
        except stripe.StripeError as e:
            raise RailUnreadable(f"listing {path} at {self.where}: {e!r}") from e
        if not isinstance(body, bytes):
            raise RailUnreadable(f"listing {path} at {self.where}: the body is not bytes")
        return body

    async def wire(self, object_id: str) -> dict[str, Any] | None:
        """The transfer or payout `object_id` as the rail renders it now (every field, its
        metadata and amount reversed included); None if the rail does not know it."""
        v1 = self._client.v1
        found: stripe.StripeObject
        await self._limit.wait()
        try:
            if object_id.startswith(TRANSFER_PREFIX):
                found = await v1.transfers.retrieve_async(object_id)
            elif object_id.startswith(PAYOUT_PREFIX):
                found = await v1.payouts.retrieve_async(object_id)
            else:
                raise UnreadableRailObject(
                    object_id, "the id names neither a transfer nor a payout"
                )
        except stripe.InvalidRequestError as e:
            if e.http_status == 404:
                return None
            raise RailUnreadable(f"retrieving {object_id} at {self.where}: {e!r}") from e
        except stripe.StripeError as e:
            raise RailUnreadable(f"retrieving {object_id} at {self.where}: {e!r}") from e
        return found.to_dict()

    async def balance(self) -> dict[str, int]:
        """The account's balance now, per currency (available plus pending)."""
        await self._limit.wait()
        try:
            wire = await self._client.v1.balance.retrieve_async()
        except stripe.StripeError as e:
            raise RailUnreadable(f"reading the balance at {self.where}: {e!r}") from e
        return balance_of(wire.to_dict())

    async def moved_at(self, transaction_id: str) -> int | None:
        """When the balance transaction `transaction_id` was created (Unix seconds); None if
        the rail does not know it."""
        await self._limit.wait()
        try:
            found = await self._client.v1.balance_transactions.retrieve_async(transaction_id)
        except stripe.InvalidRequestError as e:
            if e.http_status == 404:
                return None
            raise RailUnreadable(f"retrieving {transaction_id} at {self.where}: {e!r}") from e
        except stripe.StripeError as e:
            raise RailUnreadable(f"retrieving {transaction_id} at {self.where}: {e!r}") from e
        return balance_move_of(found.to_dict()).created

    async def _retrieve(self, object_id: str) -> RailObject | None:
        found = await self.wire(object_id)
        return rail_object_of(found) if found is not None else None


def slices(start: int, end: int, count: int) -> list[tuple[int, int]]:
    """[start, end) cut into at most `count` adjoining stretches of whole seconds."""
    bounds = sorted({start + (end - start) * i // count for i in range(count + 1)})
    return list(itertools.pairwise(bounds))
