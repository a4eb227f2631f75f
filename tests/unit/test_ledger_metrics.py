"""The ledger's idempotency metrics: the tenant label bounded by configuration, and claim
conflicts with their in-flight wait counted where the accept core folds a same-key request
onto the one ahead of it. No I/O: the booking is a fake."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from services.ledger.acceptor import Ledger
from services.ledger.metrics import create_metrics
from services.ledger.model import AcceptResult, Outcome, SettlementRequest

REQUESTS = "settle_ledger_requests_total"


def request(key: str, tenant: str = "acme", amount: int = 100) -> SettlementRequest:
    return SettlementRequest(
        tenant=tenant,
        idempotency_key=key,
        reference=f"ref-{key}-{amount}",
        payee="p",
        destination="acct_1",
        amount=amount,
        currency="EUR",
        fingerprint=f"{tenant}/{key}/{amount}".encode(),
    )


class SlowBooks:
    """Books every request it is handed after `seconds`; records the batches."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.batches: list[list[str]] = []

    async def book(self, conn: object, batch: Sequence[SettlementRequest]) -> list[AcceptResult]:
        self.batches.append([r.idempotency_key for r in batch])
        await asyncio.sleep(self.seconds)
        return [AcceptResult(Outcome.CREATED, 201, b"{}", "s-1") for _ in batch]


class FakePool:
    """Hands out a connection the fake books never use."""

    def acquire(self) -> FakePool:
        return self

    async def __aenter__(self) -> object:
        return object()

    async def __aexit__(self, *exc: object) -> None:
        pass


def test_a_configured_tenant_has_its_own_series_and_any_other_counts_as_unknown() -> None:
    metrics = create_metrics(tenants=["acme", "globex"])
    metrics.count_request("created", "acme")
    metrics.count_request("created", "intruder")  # not configured: never a series of its own
    metrics.count_request("unauthorized", None)
    sample = metrics.registry.get_sample_value
    assert sample(REQUESTS, {"outcome": "created", "tenant": "acme"}) == 1
    assert sample(REQUESTS, {"outcome": "created", "tenant": "globex"}) == 0
    assert sample(REQUESTS, {"outcome": "created", "tenant": "unknown"}) == 1
    assert sample(REQUESTS, {"outcome": "unauthorized", "tenant": "unknown"}) == 1
    assert sample(REQUESTS, {"outcome": "created", "tenant": "intruder"}) is None
    tenants = {
        s.labels["tenant"]
        for family in metrics.registry.collect()
        for s in family.samples
        if "tenant" in s.labels
    }
    assert tenants == {"acme", "globex", "unknown"}


def test_a_reused_key_counts_as_a_fingerprint_mismatch_of_its_tenant() -> None:
    metrics = create_metrics(tenants=["acme", "globex"])
    metrics.count_request("mismatch", "acme")
    metrics.count_request("replayed", "acme")
    sample = metrics.registry.get_sample_value
    assert sample("settle_ledger_fingerprint_mismatches_total", {"tenant": "acme"}) == 1
    assert sample("settle_ledger_fingerprint_mismatches_total", {"tenant": "globex"}) == 0


async def test_same_key_requests_in_one_batch_count_claim_conflicts_and_their_wait() -> None:
    metrics = create_metrics(tenants=["acme"])
    pool, books = FakePool(), SlowBooks(seconds=0.05)
    ledger = Ledger(pool, books, workers=1, metrics=metrics, linger=0.02)  # type: ignore[arg-type]
    try:
        first, same, _other_body, alone = await asyncio.gather(
            ledger.accept(request("k-1")),
            ledger.accept(request("k-1")),
            ledger.accept(request("k-1", amount=200)),
            ledger.accept(request("k-2")),
        )
    finally:
        await ledger.stop()
    assert books.batches[0] == ["k-1", "k-2"]  # the later k-1 requests folded onto the first
    assert (first.outcome, same.outcome, alone.outcome) == (
        Outcome.CREATED,
        Outcome.REPLAYED,
        Outcome.CREATED,
    )
    assert books.batches[1] == ["k-1"]  # the other body: answered by the next batch
    sample = metrics.registry.get_sample_value
    assert sample("settle_ledger_claim_conflicts_total", {"tenant": "acme"}) == 2
    assert sample("settle_ledger_inflight_wait_seconds_count") == 2
    # Each waited out the first request's booking.
    waited = sample("settle_ledger_inflight_wait_seconds_sum")
    assert waited is not None and 2 * 0.05 <= waited < 2 * 2.0
    assert sample("settle_ledger_inflight_wait_seconds_bucket", {"le": "0.01"}) == 0


async def test_requests_with_distinct_keys_count_no_conflict() -> None:
    metrics = create_metrics(tenants=["acme"])
    pool, books = FakePool(), SlowBooks(0.0)
    ledger = Ledger(pool, books, workers=1, metrics=metrics)  # type: ignore[arg-type]
    try:
        await asyncio.gather(*(ledger.accept(request(f"k-{n}")) for n in range(5)))
    finally:
        await ledger.stop()
    sample = metrics.registry.get_sample_value
    assert sample("settle_ledger_claim_conflicts_total", {"tenant": "acme"}) == 0
    assert sample("settle_ledger_inflight_wait_seconds_count") == 0
