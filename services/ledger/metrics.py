"""The ledger's Prometheus metrics, built on a registry of their own so tests stay isolated."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram

# Every outcome a settlement request can have, so each series exists (at 0) from the start
# and a rate() over it never sees a series appear out of nowhere.
REQUEST_OUTCOMES = (
    "created",
    "replayed",
    "mismatch",
    "in_use",
    "expired",
    "duplicate_reference",
    "unbookable",
    "insufficient_funds",
    "invalid",
    "rate_limited",
    "overloaded",
    "unauthorized",
    "unavailable",
)

# One booking is a few milliseconds; a batch waiting on a slow disk can take seconds.
ACCEPT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


@dataclass(frozen=True, slots=True)
class LedgerMetrics:
    """The ledger's metrics and the registry that exposes them."""

    registry: CollectorRegistry
    requests: Counter  # settle_ledger_requests_total{outcome}: settlement requests by outcome
    accept_seconds: Histogram  # settle_ledger_accept_seconds: time in Acceptor.accept
    kafka_dedupe_hits: Counter  # settle_ledger_kafka_dedupe_hits_total: redelivered commands
    dlq: Counter  # settle_ledger_dlq_total{reason}: commands sent to the dead-letter topic
    batch_size: Histogram  # settle_ledger_batch_size: settlements booked per transaction
    # Each outcome's series of `requests`, looked up once: `labels()` costs more than counting.
    by_outcome: dict[str, Counter]

    def count_request(self, outcome: str) -> None:
        """Count one settlement request under `outcome` (one of REQUEST_OUTCOMES)."""
        self.by_outcome[outcome].inc()


def create_metrics(registry: CollectorRegistry | None = None) -> LedgerMetrics:
    """Register the ledger's metrics on `registry` (default: a new one) and return them."""
    registry = registry if registry is not None else CollectorRegistry()
    requests = Counter(
        "settle_ledger_requests_total",
        "Settlement requests (HTTP and Kafka) by outcome.",
        ["outcome"],
        registry=registry,
    )
    return LedgerMetrics(
        registry=registry,
        requests=requests,
        by_outcome={outcome: requests.labels(outcome=outcome) for outcome in REQUEST_OUTCOMES},
        accept_seconds=Histogram(
            "settle_ledger_accept_seconds",
            "Time to book, replay or refuse one settlement request.",
            buckets=ACCEPT_BUCKETS,
            registry=registry,
        ),
        kafka_dedupe_hits=Counter(
            "settle_ledger_kafka_dedupe_hits_total",
            "Kafka commands already booked under their idempotency key (redeliveries).",
            registry=registry,
        ),
        dlq=Counter(
            "settle_ledger_dlq_total",
            "Commands sent to settlement.commands.dlq, by reason.",
            ["reason"],
            registry=registry,
        ),
        batch_size=Histogram(
            "settle_ledger_batch_size",
            "Settlements booked per PostgreSQL transaction.",
            buckets=BATCH_BUCKETS,
            registry=registry,
        ),
    )
