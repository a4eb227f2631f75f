"""The relay's Prometheus metrics, on a registry of their own so tests stay isolated.

What happens at a rail is labelled with the rail (`rail="sim"`, `"stripe"`, `"sepa"`): each
of the relay's dispatchers, one per rail, counts into its own children (`of_rail`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from services.platform.metrics import consumer_lag_gauge, mount_metrics, with_children

RAIL_OUTCOMES = ("accepted", "refused", "retryable", "ambiguous")
POISON_REASONS = ("undecodable", "invalid_settlement_id")
BATCH_BUCKETS = (1, 5, 10, 50, 100, 200, 500, 1000, 2000)
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True, slots=True)
class RelayMetrics:
    """The relay's metrics and the registry that exposes them."""

    registry: CollectorRegistry
    outbox_lag: Gauge  # settle_relay_outbox_lag_seconds: age of the oldest unpublished row
    published: Counter  # settle_relay_published_total: outbox rows published to Kafka
    publish_batch: Histogram  # settle_relay_publish_batch_size: rows per publish transaction
    pruned: Counter  # settle_relay_pruned_total: published rows deleted after retention
    rail_calls: Counter  # settle_relay_rail_calls_total{rail,outcome}
    rail_seconds: Histogram  # settle_relay_rail_call_seconds{rail}: one rail call
    in_flight: Gauge  # settle_relay_in_flight{rail}: instructions `processing` within lease
    stuck: Gauge  # settle_relay_stuck{rail}: instructions `processing` past their lease
    breaker_open: Gauge  # settle_relay_breaker_open{rail}: 1 while the rail's breaker is open
    reclaims: Counter  # settle_relay_reclaims_total{rail}: leases taken over by pass 2
    fence_rejections: Counter  # settle_relay_fence_rejections_total{rail}: stale writes refused
    lookups: Counter  # settle_relay_lookups_total{rail,found}: rail searched before a re-issue
    poison: Counter  # settle_relay_poison_events_total{reason}: event records passed over
    consumer_lag: Gauge  # settle_consumer_lag{service,topic}: the dispatch triggers' lag

    def of_rail(self, rail: str) -> RailMetrics:
        """The children one rail's dispatcher counts into, every one of them present from the
        start (a rate over a series that appears only at the first failure misses it)."""
        for outcome in RAIL_OUTCOMES:
            self.rail_calls.labels(rail=rail, outcome=outcome)
        for found in ("true", "false"):
            self.lookups.labels(rail=rail, found=found)
        return RailMetrics(
            rail=rail,
            calls=self.rail_calls,
            lookups=self.lookups,
            rail_seconds=self.rail_seconds.labels(rail=rail),
            in_flight=self.in_flight.labels(rail=rail),
            stuck=self.stuck.labels(rail=rail),
            breaker_open=self.breaker_open.labels(rail=rail),
            reclaims=self.reclaims.labels(rail=rail),
            fence_rejections=self.fence_rejections.labels(rail=rail),
        )


@dataclass(frozen=True, slots=True)
class RailMetrics:
    """One rail's children of the relay's rail metrics."""

    rail: str
    calls: Counter
    lookups: Counter
    rail_seconds: Histogram
    in_flight: Gauge
    stuck: Gauge
    breaker_open: Gauge
    reclaims: Counter
    fence_rejections: Counter

    def called(self, outcome: str) -> None:
        """One rail call ended with `outcome`."""
        self.calls.labels(rail=self.rail, outcome=outcome).inc()

    def looked(self, found: bool) -> None:
        """One lookup before a re-issue, which found our transfer or not."""
        self.lookups.labels(rail=self.rail, found=str(found).lower()).inc()


def create_metrics(registry: CollectorRegistry | None = None) -> RelayMetrics:
    """Register the relay's metrics on `registry` (default: a new one) and return them."""
    r = registry if registry is not None else CollectorRegistry()
    poison = Counter(
        "settle_relay_poison_events_total",
        "Event records passed over as unusable.",
        ["reason"],
        registry=r,
    )
    return RelayMetrics(
        registry=r,
        outbox_lag=Gauge(
            "settle_relay_outbox_lag_seconds",
            "Age of the oldest unpublished outbox row.",
            registry=r,
        ),
        published=Counter(
            "settle_relay_published_total", "Outbox rows published to Kafka.", registry=r
        ),
        publish_batch=Histogram(
            "settle_relay_publish_batch_size",
            "Outbox rows per publish transaction.",
            buckets=BATCH_BUCKETS,
            registry=r,
        ),
        pruned=Counter(
            "settle_relay_pruned_total",
            "Outbox rows an older relay marked published, deleted after retention.",
            registry=r,
        ),
        poison=with_children(poison, reason=POISON_REASONS),
        consumer_lag=consumer_lag_gauge(r),
        **_rail_families(r),
    )


def _rail_families(r: CollectorRegistry) -> dict[str, Any]:
    """The metrics of what happens at the rails, each labelled with the rail."""
    return {
        "rail_calls": Counter(
            "settle_relay_rail_calls_total",
            "Rail calls by rail and outcome.",
            ["rail", "outcome"],
            registry=r,
        ),
        "lookups": Counter(
            "settle_relay_lookups_total",
            "Rail lookups before a re-issue.",
            ["rail", "found"],
            registry=r,
        ),
        "rail_seconds": Histogram(
            "settle_relay_rail_call_seconds",
            "Duration of one rail call.",
            ["rail"],
            buckets=CALL_BUCKETS,
            registry=r,
        ),
        "in_flight": Gauge(
            "settle_relay_in_flight",
            "Rail instructions processing within their lease.",
            ["rail"],
            registry=r,
        ),
        "stuck": Gauge(
            "settle_relay_stuck",
            "Rail instructions processing past their lease.",
            ["rail"],
            registry=r,
        ),
        "breaker_open": Gauge(
            "settle_relay_breaker_open",
            "1 while the rail's circuit breaker holds its claims back, else 0.",
            ["rail"],
            registry=r,
        ),
        "reclaims": Counter(
            "settle_relay_reclaims_total", "Expired leases taken over.", ["rail"], registry=r
        ),
        "fence_rejections": Counter(
            "settle_relay_fence_rejections_total",
            "Writes refused by the fence.",
            ["rail"],
            registry=r,
        ),
    }


def metrics_app(metrics: RelayMetrics) -> Starlette:
    """/metrics and /healthz of the relay, which serves no other HTTP."""

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/healthz", healthz)])
    mount_metrics(app, metrics.registry)
    return app
