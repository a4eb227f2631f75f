"""The accept core both ingress paths call: concurrent requests grouped into batches.

Each HTTP request and Kafka command waits while a few booking workers take whatever is
queued, up to `max_batch`, and book it in one transaction (`platform.group_commit`): under load
batches grow and the commit cost is shared; at moderate rates a worker lingers a few
milliseconds for company first; alone, a request pays one transaction. Requests with one tenant
and key in the same batch are folded onto the first: an identical one gets its response as a
replay, a different one waits for the next batch, where the stored record answers it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import asyncpg

from services.adapters.postgres.store_errors import REFUSED, retry_contended, unavailable_when_down
from services.domain.errors import StoreUnavailable
from services.ledger.answers import in_use_result, unbookable_result
from services.ledger.booking import Books
from services.ledger.metrics import LedgerMetrics, create_metrics
from services.ledger.model import AcceptResult, Outcome, SettlementRequest
from services.platform.group_commit import GroupCommit

# A booking transaction costs PostgreSQL about as much CPU as seven more settlements in it, so
# at moderate rates a request waits this long for others to share its commit. Booking
# stamps `accepted` after the wait, so accepted -> paid latency does not include it.
LINGER_S = 0.005


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
        linger: float = LINGER_S,
    ) -> None:
        self.pool = pool
        self.metrics = metrics or create_metrics()
        self.books = books
        self._requests: GroupCommit[SettlementRequest, AcceptResult] = GroupCommit(
            self._book_folded,
            workers=workers,
            max_batch=max_batch,
            stopping=_shutting_down,
            linger=linger,
        )

    async def stop(self) -> None:
        """Stop the booking workers; requests queued or in a batch get StoreUnavailable."""
        await self._requests.stop()

    async def accept(self, request: SettlementRequest) -> AcceptResult:
        """Queue `request` for the next batch and wait for its response."""
        return await self._requests.submit(request)

    async def accept_many(self, requests: list[SettlementRequest]) -> list[AcceptResult]:
        """Book `requests` in the same batches as `accept`, results in order; if any failed,
        the first failure is raised once every request has its answer."""
        # One queue for both ingress paths: Kafka commands and HTTP requests arriving
        # together share commits, and a large poll books as several batches at once.
        answers = await self._requests.submit_many(requests)
        results: list[AcceptResult] = []
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
            results.append(answer)
        return results

    async def _book_folded(self, requests: Sequence[SettlementRequest]) -> list[AcceptResult]:
        """Book a batch in which one tenant and key may appear several times; each request
        after the first of its key counts as a claim conflict, waiting on that first."""
        started = time.monotonic()
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
                continue
            self.metrics.count_claim_conflict(r.tenant, time.monotonic() - started)
            if batch[firsts[(r.tenant, r.idempotency_key)]].fingerprint == r.fingerprint:
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
        started = time.monotonic()
        try:
            with unavailable_when_down("PostgreSQL is unreachable; nothing was booked"):
                return await retry_contended(lambda: self._book_once(batch))
        except REFUSED as e:
            # One request the books cannot hold must not fail its batch-mates: book one
            # by one, and refuse only the request that fails alone.
            if len(batch) == 1:
                return [unbookable_result(batch[0], e)]
        except asyncpg.LockNotAvailableError:
            # A same-key request of another process held us past the bounded wait. Book
            # one by one so only the held requests answer 409.
            if len(batch) == 1:
                self.metrics.count_claim_conflict(batch[0].tenant, time.monotonic() - started)
                return [in_use_result()]
        return [r for one in batch for r in await self._book([one])]

    async def _book_once(self, batch: list[SettlementRequest]) -> list[AcceptResult]:
        async with self.pool.acquire() as conn:
            results = await self.books.book(conn, batch)
        self.metrics.batch_size.observe(len(batch))
        return results


def _as_replay(result: AcceptResult) -> AcceptResult:
    if result.outcome in (Outcome.CREATED, Outcome.DUPLICATE_REFERENCE, Outcome.REPLAYED):
        return AcceptResult(
            Outcome.REPLAYED, result.status, result.body, result.settlement_id, trace=result.trace
        )
    return result
