"""The accept core both ingress paths call: concurrent requests grouped into batches.

Each HTTP request waits on a future while a few booking workers take whatever is queued, up
to `max_batch`, and book it in one transaction: under load batches grow and the commit cost
is shared (group commit); alone, a request pays one transaction. Requests with one tenant
and key in the same batch are folded onto the first: an identical one gets its response as a
replay, a different one waits for the next batch, where the stored record answers it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import asyncpg

from services.ledger.booking import Books, in_use_result, unbookable_result
from services.ledger.metrics import LedgerMetrics, create_metrics
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.shared.errors import StoreUnavailable
from services.shared.store_errors import REFUSED, retry_contended, unavailable_when_down

_Pending = tuple[SettlementRequest, "asyncio.Future[AcceptResult]"]


class Ledger:
    """Implements `Acceptor` on a PostgreSQL pool; `start` it before use, `stop` it after."""

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
        self.max_batch = max_batch
        self._queue: asyncio.Queue[_Pending] = asyncio.Queue()
        self._workers = workers
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Start the booking workers."""
        self._tasks = [asyncio.create_task(self._work()) for _ in range(self._workers)]

    async def stop(self) -> None:
        """Stop the booking workers; queued requests get StoreUnavailable."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        while not self._queue.empty():
            _, future = self._queue.get_nowait()
            if not future.done():
                future.set_exception(StoreUnavailable("the ledger is shutting down"))

    async def accept(self, request: SettlementRequest) -> AcceptResult:
        """Queue `request` for the next batch and wait for its response."""
        future: asyncio.Future[AcceptResult] = asyncio.get_running_loop().create_future()
        await self._queue.put((request, future))
        return await future

    async def accept_many(self, requests: list[SettlementRequest]) -> list[AcceptResult]:
        """Book `requests` directly, in batches of at most `max_batch`; results in order."""
        results: list[AcceptResult] = []
        for start in range(0, len(requests), self.max_batch):
            results += await self._book_folded(requests[start : start + self.max_batch])
        return results

    async def _work(self) -> None:
        while True:
            first = await self._queue.get()
            pending = [first]
            while len(pending) < self.max_batch and not self._queue.empty():
                pending.append(self._queue.get_nowait())
            live = [(r, f) for r, f in pending if not f.done()]
            try:
                results = await self._book_folded([r for r, _ in live])
            except asyncio.CancelledError:
                # Stopping: whoever waits on this batch hears so instead of waiting forever.
                for _, future in live:
                    if not future.done():
                        future.set_exception(StoreUnavailable("the ledger is shutting down"))
                raise
            except Exception as e:  # noqa: BLE001 - not swallowed: every waiting caller gets it
                for _, future in live:
                    if not future.done():
                        future.set_exception(e)
                continue
            for (_, future), result in zip(live, results, strict=True):
                if not future.done():
                    future.set_result(result)

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
