"""The ledger's Prometheus metrics, built on a registry of their own so tests stay isolated.

The `tenant` label takes only the configured tenants (the tenants of SETTLE_API_TOKENS) and
`unknown` for any other caller, so its cardinality is bounded by configuration, never by
traffic. Every series a request can touch is made once here and looked up by a dict access
per request: `labels()` on the hot path costs more than the count itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.platform.metrics import consumer_lag_gauge

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
UNKNOWN_TENANT = "unknown"
# Why a request was refused with 503: PostgreSQL could not take it, or the backlog was full.
FAIL_CLOSED_REASONS = ("postgresql", "backlog")

# One booking is a few milliseconds; a batch waiting on a slow disk can take seconds.
ACCEPT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BATCH_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
# A same-key wait ends by the lock bound (booking.LOCK_WAIT, 2 s) at the latest; the last
# buckets tell a wait cut off by the bound from one that ended on its own.
INFLIGHT_WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 2.5)


@dataclass(frozen=True, slots=True)
class LedgerMetrics:
    """The ledger's metrics and the registry that exposes them."""

    registry: CollectorRegistry
    requests: Counter  # settle_ledger_requests_total{outcome,tenant}: requests by outcome
    accept_seconds: Histogram  # settle_ledger_accept_seconds: time in Acceptor.accept
    kafka_dedupe_hits: Counter  # settle_ledger_kafka_dedupe_hits_total: redelivered commands
    dlq: Counter  # settle_ledger_dlq_total{reason}: commands sent to the dead-letter topic
    batch_size: Histogram  # settle_ledger_batch_size: settlements booked per transaction
    inflight_wait: Histogram  # settle_ledger_inflight_wait_seconds: waits on a same-key request
    claim_conflicts: Counter  # settle_ledger_claim_conflicts_total{tenant}
    mismatches: Counter  # settle_ledger_fingerprint_mismatches_total{tenant}: 422 reused key
    fail_closed: Counter  # settle_ledger_fail_closed_total{reason}: 503s, nothing booked
    consumer_lag: Gauge  # settle_consumer_lag{service,topic}: the command intake's lag
    tenants: frozenset[str]  # the `tenant` label's values: the configured tenants and unknown
    # The series of each (outcome, tenant) and each tenant, looked up once.
    by_outcome: dict[tuple[str, str], Counter]
    conflicts_by_tenant: dict[str, Counter]
    mismatches_by_tenant: dict[str, Counter]
    closed_by_reason: dict[str, Counter]

    def count_request(self, outcome: str, tenant: str | None) -> None:
        """Count one settlement request of `tenant` (None: not authenticated) under `outcome`
        (one of REQUEST_OUTCOMES); a reused key also counts as a fingerprint mismatch."""
        tenant = tenant if tenant in self.tenants else UNKNOWN_TENANT
        self.by_outcome[(outcome, tenant)].inc()
        if outcome == "mismatch":
            self.mismatches_by_tenant[tenant].inc()

    def count_fail_closed(self, reason: str) -> None:
        """Count a request refused with 503 because `reason` (FAIL_CLOSED_REASONS) could not
        take it."""
        self.closed_by_reason[reason].inc()

    def count_claim_conflict(self, tenant: str, waited: float) -> None:
        """Count a request whose key a concurrent request held, and how long it waited."""
        self.conflicts_by_tenant[tenant if tenant in self.tenants else UNKNOWN_TENANT].inc()
        self.inflight_wait.observe(waited)


def create_metrics(
    registry: CollectorRegistry | None = None, tenants: Iterable[str] = ()
) -> LedgerMetrics:
    """Register the ledger's metrics on `registry` (default: a new one) and return them; the
    `tenant` label takes `tenants` and `unknown`."""
    r = registry if registry is not None else CollectorRegistry()
    labels = frozenset({*tenants, UNKNOWN_TENANT})
    requests, conflicts, mismatches, fail_closed = _idempotency_counters(r)
    return LedgerMetrics(
        registry=r,
        tenants=labels,
        requests=requests,
        by_outcome={
            (o, t): requests.labels(outcome=o, tenant=t) for o in REQUEST_OUTCOMES for t in labels
        },
        claim_conflicts=conflicts,
        conflicts_by_tenant={t: conflicts.labels(tenant=t) for t in labels},
        mismatches=mismatches,
        mismatches_by_tenant={t: mismatches.labels(tenant=t) for t in labels},
        fail_closed=fail_closed,
        closed_by_reason={why: fail_closed.labels(reason=why) for why in FAIL_CLOSED_REASONS},
        inflight_wait=Histogram(
            "settle_ledger_inflight_wait_seconds",
            "How long a request waited on a same-key request still in flight.",
            buckets=INFLIGHT_WAIT_BUCKETS,
            registry=r,
        ),
        consumer_lag=consumer_lag_gauge(r),
        accept_seconds=Histogram(
            "settle_ledger_accept_seconds",
            "Time to book, replay or refuse one settlement request.",
            buckets=ACCEPT_BUCKETS,
            registry=r,
        ),
        kafka_dedupe_hits=Counter(
            "settle_ledger_kafka_dedupe_hits_total",
            "Kafka commands already booked under their idempotency key (redeliveries).",
            registry=r,
        ),
        dlq=Counter(
            "settle_ledger_dlq_total",
            "Commands sent to settlement.commands.dlq, by reason.",
            ["reason"],
            registry=r,
        ),
        batch_size=Histogram(
            "settle_ledger_batch_size",
            "Settlements booked per PostgreSQL transaction.",
            buckets=BATCH_BUCKETS,
            registry=r,
        ),
    )


def _idempotency_counters(r: CollectorRegistry) -> tuple[Counter, Counter, Counter, Counter]:
    """The requests, claim conflicts, fingerprint mismatches and fail-closed counters."""
    requests = Counter(
        "settle_ledger_requests_total",
        "Settlement requests (HTTP and Kafka) by outcome.",
        ["outcome", "tenant"],
        registry=r,
    )
    conflicts = Counter(
        "settle_ledger_claim_conflicts_total",
        "Requests whose idempotency key a concurrent request held.",
        ["tenant"],
        registry=r,
    )
    mismatches = Counter(
        "settle_ledger_fingerprint_mismatches_total",
        "Requests refused 422 idempotency_key_reused: same key, other request.",
        ["tenant"],
        registry=r,
    )
    fail_closed = Counter(
        "settle_ledger_fail_closed_total",
        "Requests refused 503 because a dependency could not take them.",
        ["reason"],
        registry=r,
    )
    return requests, conflicts, mismatches, fail_closed
