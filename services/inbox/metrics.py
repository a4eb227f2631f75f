"""The inbox's Prometheus metrics, on a registry of their own so tests stay isolated."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.domain.rail_event import SIGNALS
from services.platform.metrics import accepted_to_paid_histogram, with_children

RECEIVED_OUTCOMES = ("stored", "ignored", "duplicate", "rejected")
SIGNATURE_FAILURES = ("missing_signature", "invalid_signature", "stale_signature")
APPLY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# Applied as stored: milliseconds; parked for a settlement not booked yet: the retry backoff,
# seconds to an hour.
LAG_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


@dataclass(frozen=True, slots=True)
class InboxMetrics:
    """The inbox's metrics and the registry that exposes them."""

    registry: CollectorRegistry
    received: (
        Counter  # settle_inbox_received_total{outcome}: signed webhooks by what became of them
    )
    duplicates: Counter  # settle_inbox_duplicates_total: same event id or same change again
    bad_signatures: Counter  # settle_inbox_bad_signatures_total{reason}: refused, not stored
    too_large: Counter  # settle_inbox_too_large_total: bodies over the limit (413)
    applied: Counter  # settle_inbox_applied_total{event_type}: events applied
    parked: Counter  # settle_inbox_parked_total: attempts that found no settlement yet
    dead: Counter  # settle_inbox_dead_total: events given up, waiting for an operator
    mismatched: Counter  # settle_inbox_mismatched_total: events that differ from what was sent
    apply_seconds: Histogram  # settle_inbox_apply_seconds: one apply transaction
    apply_lag: Histogram  # settle_inbox_apply_lag_seconds: webhook received -> applied
    left_to_worker: Counter  # settle_inbox_left_to_worker_total: applies as stored that failed
    oldest_parked: Gauge  # settle_inbox_oldest_parked_seconds: age of the oldest parked event
    dead_now: Gauge  # settle_inbox_dead_events: events dead now, until an operator replays them
    accepted_to_paid: Histogram  # settle_settlement_accepted_to_paid_seconds: paid by a webhook


def create_metrics(registry: CollectorRegistry | None = None) -> InboxMetrics:
    """Register the inbox's metrics on `registry` (default: a new one) and return them."""
    r = registry if registry is not None else CollectorRegistry()
    received = Counter(
        "settle_inbox_received_total", "Signed webhooks by outcome.", ["outcome"], registry=r
    )
    bad = Counter(
        "settle_inbox_bad_signatures_total",
        "Webhooks refused for their signature.",
        ["reason"],
        registry=r,
    )
    applied = Counter(
        "settle_inbox_applied_total", "Rail events applied, by type.", ["event_type"], registry=r
    )
    return InboxMetrics(
        registry=r,
        received=with_children(received, outcome=RECEIVED_OUTCOMES),
        duplicates=Counter(
            "settle_inbox_duplicates_total",
            "Webhooks whose event or change was stored already.",
            registry=r,
        ),
        bad_signatures=with_children(bad, reason=SIGNATURE_FAILURES),
        too_large=Counter(
            "settle_inbox_too_large_total", "Webhook bodies over the size limit.", registry=r
        ),
        applied=with_children(applied, event_type=SIGNALS),
        parked=Counter(
            "settle_inbox_parked_total", "Apply attempts that found no settlement.", registry=r
        ),
        dead=Counter("settle_inbox_dead_total", "Events given up after their budget.", registry=r),
        mismatched=Counter(
            "settle_inbox_mismatched_total",
            "Events set aside as mismatch: their object differs from what the settlement sent.",
            registry=r,
        ),
        apply_seconds=Histogram(
            "settle_inbox_apply_seconds",
            "Duration of one apply transaction.",
            buckets=APPLY_BUCKETS,
            registry=r,
        ),
        apply_lag=Histogram(
            "settle_inbox_apply_lag_seconds",
            "From a webhook received to its event applied (committed).",
            buckets=LAG_BUCKETS,
            registry=r,
        ),
        left_to_worker=Counter(
            "settle_inbox_left_to_worker_total",
            "Webhooks stored whose apply in the same transaction failed, left to the worker.",
            registry=r,
        ),
        oldest_parked=Gauge(
            "settle_inbox_oldest_parked_seconds", "Age of the oldest parked event.", registry=r
        ),
        dead_now=_dead_now(r),
        accepted_to_paid=accepted_to_paid_histogram(r),
    )


def _dead_now(r: CollectorRegistry) -> Gauge:
    """settle_inbox_dead_events: what the worker's watch counts each second."""
    return Gauge(
        "settle_inbox_dead_events",
        "Events dead now: given up, waiting for an operator to replay them.",
        registry=r,
    )
