"""The rail side of a reconciliation: transfers and payouts read through Stripe's own client
(against Stripe, or anything that speaks its API: the simulator, stripe-mock).

Lists go by `created` window with the library's auto-pagination; objects a settlement's
reference names outside the window are retrieved by id. Every object is read by `wire.py`.
A rail that does not answer, or answers an error, raises RailUnreadable: reconciliation
never takes silence for agreement. Only a 404 on a retrieve is an answer (no such object).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any, Protocol

import stripe

from services.reconcile.errors import RailUnreadable, UnreadableRailObject
from services.reconcile.model import RailObject
from services.reconcile.wire import balance_move_of, rail_object_of
from services.relay.stripe_http import StripeAiohttp

PAGE_SIZE = 100  # Stripe's largest page
CONNECTIONS = 2  # one listing at a time; a spare for a retry
DEFAULT_TIMEOUT = 30.0  # seconds, per HTTP call
TRANSFER_PREFIX = "tr_"
PAYOUT_PREFIX = "po_"


class RailReader(Protocol):
    """What a run reads the rail's objects through: its API (RailSource), or a statement of
    it (statement_source.StatementSource)."""

    source: str  # the name the run's evidence records the reading under

    async def objects(self, start: int, end: int) -> list[RailObject]:
        """Every transfer and payout created in [start, end)."""

    async def retrieve(self, object_ids: Iterable[str]) -> list[RailObject]:
        """The transfers and payouts with these ids; an unknown id is left out."""

    def rows_read(self, objects: int) -> int:
        """How many rows the reading returned, for the evidence, given the objects it gave."""

    async def aclose(self) -> None:
        """Release what the reader holds."""


class RailSource:
    """Reads the rail's transfers and payouts for reconciliation; close it with `aclose`."""

    source = "rail"

    def __init__(
        self, api_key: str, *, api_base: str | None = None, timeout: float = DEFAULT_TIMEOUT
    ) -> None:
        if not api_key:
            raise ValueError(
                "api_key is empty: pass a Stripe secret key (sk_test_... or sk_live_...)"
            )
        self.where = api_base or "api.stripe.com"
        # The relay's transport: the same timeouts and error classes; read-only calls here,
        # so the library may retry them.
        self._http = StripeAiohttp(timeout, connections=CONNECTIONS)
        self._client = stripe.StripeClient(
            api_key,
            base_addresses={"api": api_base.rstrip("/")} if api_base else None,
            max_network_retries=2,
            http_client=self._http,
        )

    @property
    def client(self) -> stripe.StripeClient:
        """Stripe's client this source reads through (the nostro view reads the balance)."""
        return self._client

    async def objects(self, start: int, end: int) -> list[RailObject]:
        """Every transfer and payout created in [start, end), transfers first."""
        window: dict[str, Any] = {"created": {"gte": start, "lt": end}, "limit": PAGE_SIZE}
        v1 = self._client.v1
        try:
            transfers = await v1.transfers.list_async(window)  # type: ignore[arg-type]
            found = [o async for o in _read_all(transfers.auto_paging_iter())]
            payouts = await v1.payouts.list_async(window)  # type: ignore[arg-type]
            found += [o async for o in _read_all(payouts.auto_paging_iter())]
        except stripe.StripeError as e:
            raise RailUnreadable(f"listing by created window at {self.where}: {e!r}") from e
        return found

    async def retrieve(self, object_ids: Iterable[str]) -> list[RailObject]:
        """The transfers and payouts with these ids; an id the rail does not know is left out."""
        found: list[RailObject] = []
        for object_id in sorted(set(object_ids)):
            obj = await self._retrieve(object_id)
            if obj is not None:
                found.append(obj)
        return found

    def rows_read(self, objects: int) -> int:
        """The objects the rail returned."""
        return objects

    async def aclose(self) -> None:
        """Close the HTTP session."""
        await self._http.close_async()

    async def wire(self, object_id: str) -> dict[str, Any] | None:
        """The transfer or payout `object_id` as the rail renders it now (every field, its
        metadata and amount reversed included); None if the rail does not know it."""
        v1 = self._client.v1
        found: stripe.StripeObject
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

    async def moved_at(self, transaction_id: str) -> int | None:
        """When the balance transaction `transaction_id` was created (Unix seconds); None if
        the rail does not know it."""
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


async def _read_all(items: AsyncIterator[Any]) -> AsyncIterator[RailObject]:
    """Each listed object read into a RailObject; a malformed one raises UnreadableRailObject."""
    async for item in items:
        yield rail_object_of(item.to_dict())
