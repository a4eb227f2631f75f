"""The accept core both ingress paths call: concurrent requests grouped into batches.

Each HTTP request waits while a few booking workers take whatever is queued, up to
`max_batch`, and book it in one transaction (`shared.group_commit`): under load batches grow
and the commit cost is shared; alone, a request pays one transaction. Requests with one tenant
and key in the same batch are folded onto the first: an identical one gets its response as a
replay, a different one waits for the next batch, where the stored record answers it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import asyncpg

from services.ledger.booking import Books, in_use_result, unbookable_result
from services.ledger.metrics import LedgerMetrics, create_metrics
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.shared.errors import StoreUnavailable
from services.shared.group_commit import GroupCommit
from services.shared.store_errors import REFUSED, retry_contended, unavailable_when_down


def _shutting_down() -> StoreUnavailable:
    return StoreUnavailable("the ledger is shutting down")


class Ledger:
    """Implements `Acceptor` on a PostgreSQL pool; `stop` it after use."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        books: Books,
        workers: int = 4,
        max_batch: int = 200,
        metrics: LedgerMetrics | None = None,
    ) -> None:
        self.pool = pool
        self.metrics = metrics or create_metrics()
        self.books = books
        self.workers = workers
        self.max_batch = max_batch
        self._requests: GroupCommit[SettlementRequest, AcceptResult] = GroupCommit(
            self._book_folded, workers=workers, max_batch=max_batch, stopping=_shutting_down
        )

    async def stop(self) -> None:
        """Stop the booking workers; requests queued or in a batch get StoreUnavailable."""
        await self._requests.stop()

    async def accept(self, request: SettlementRequest) -> AcceptResult:
        """Queue `request` for the next batch and wait for its response."""
        return await self._requests.submit(request)

    async def accept_many(self, requests: list[SettlementRequest]) -> list[AcceptResult]:
        """Book `requests` directly, in batches of at most `max_batch`, up to `workers` batches
        at once; results in order. If a batch fails, the others finish before it is raised."""
        # Batches at once, so one batch's validation and minting runs while another waits
        # on PostgreSQL. A key in two of them is decided by the one that commits first.
        gate = asyncio.Semaphore(self.workers)

        async def book(batch: Sequence[SettlementRequest]) -> list[AcceptResult]:
            async with gate:
                return await self._book_folded(batch)

        size = self.max_batch
        batches = [requests[start : start + size] for start in range(0, len(requests), size)]
        booked = await asyncio.gather(*(book(b) for b in batches), return_exceptions=True)
        results: list[AcceptResult] = []
        for outcome in booked:
            if isinstance(outcome, BaseException):
                raise outcome
            results += outcome
        return results

    async def _book_folded(self, requests: Sequence[SettlementRequest]) -> list[AcceptResult]:
        """Book a batch in which one tenant and key may appear several times."""
        firsts: dict[tuple[str, str], int] = {}  # tenant and key -> position in `batch`
        batch: list[SettlementRequest] = []
        leads: set[int] = set()  # positions in `requests` that lead their key
        for n, r in enumerate(requests):
            if (r.tenant, r.idempotency_key) not in firsts:
                firsts[(r.tenant, r.idempotency_key)] = len(batch)
                batch.append(r)
                leads.add(n)
        booked = await self._book(batch) if batch else []
        results: list[AcceptResult] = []
        later: list[int] = []
        for n, r in enumerate(requests):
            lead = booked[firsts[(r.tenant, r.idempotency_key)]]
            if n in leads:
                results.append(lead)
            elif batch[firsts[(r.tenant, r.idempotency_key)]].fingerprint == r.fingerprint:
                results.append(_as_replay(lead))
            else:
                results.append(lead)  # placeholder, answered below by the stored record
                later.append(n)
        if later:
            answered = await self._book_folded([requests[n] for n in later])
            for n, result in zip(later, answered, strict=True):
                results[n] = result
        return results

    async def _book(self, batch: list[SettlementRequest]) -> list[AcceptResult]:
        # PostgreSQL down or restarting: nothing was booked; fail closed. Contended: the same
        # batch runs again, as another transaction got in the way.
        try:
            with unavailable_when_down("PostgreSQL is unreachable; nothing was booked"):
                return await retry_contended(lambda: self._book_once(batch))
        except REFUSED as e:
            # One request the books cannot hold must not fail its batch-mates: book one
            # by one, and refuse only the request that fails alone.
            if len(batch) == 1:
                return [unbookable_result(e)]
        except asyncpg.LockNotAvailableError:
            # A same-key request of another process held us past the bounded wait. Book
            # one by one so only the held requests answer 409.
            if len(batch) == 1:
                return [in_use_result()]
        return [r for one in batch for r in await self._book([one])]

    async def _book_once(self, batch: list[SettlementRequest]) -> list[AcceptResult]:
        async with self.pool.acquire() as conn:
            results = await self.books.book(conn, batch)
        self.metrics.batch_size.observe(len(batch))
        return results


def _as_replay(result: AcceptResult) -> AcceptResult:
    if result.outcome in (Outcome.CREATED, Outcome.DUPLICATE_REFERENCE, Outcome.REPLAYED):
        return AcceptResult(Outcome.REPLAYED, result.status, result.body, result.settlement_id)
    return result
