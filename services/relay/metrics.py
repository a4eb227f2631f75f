"""The relay's Prometheus metrics, on a registry of their own so tests stay isolated."""

from __future__ import annotations

from dataclasses import dataclass

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
    rail_calls: Counter  # settle_relay_rail_calls_total{outcome}
    rail_seconds: Histogram  # settle_relay_rail_call_seconds: one rail call
    in_flight: Gauge  # settle_relay_in_flight: instructions `processing` within their lease
    stuck: Gauge  # settle_relay_stuck: instructions `processing` past their lease
    reclaims: Counter  # settle_relay_reclaims_total: leases taken over by pass 2
    fence_rejections: Counter  # settle_relay_fence_rejections_total: stale writes refused
    lookups: Counter  # settle_relay_lookups_total{found}: rail searched before a re-issue
    poison: Counter  # settle_relay_poison_events_total{reason}: event records passed over
    consumer_lag: Gauge  # settle_consumer_lag{service,topic}: the dispatch triggers' lag


def create_metrics(registry: CollectorRegistry | None = None) -> RelayMetrics:
    """Register the relay's metrics on `registry` (default: a new one) and return them."""
    r = registry if registry is not None else CollectorRegistry()
    rail_calls = Counter(
        "settle_relay_rail_calls_total", "Rail calls by outcome.", ["outcome"], registry=r
    )
    lookups = Counter(
        "settle_relay_lookups_total", "Rail lookups before a re-issue.", ["found"], registry=r
    )
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
        pruned=Counter("settle_relay_pruned_total", "Published outbox rows deleted.", registry=r),
        rail_calls=with_children(rail_calls, outcome=RAIL_OUTCOMES),
        rail_seconds=Histogram(
            "settle_relay_rail_call_seconds",
            "Duration of one rail call.",
            buckets=CALL_BUCKETS,
            registry=r,
        ),
        in_flight=Gauge(
            "settle_relay_in_flight",
            "Rail instructions processing within their lease.",
            registry=r,
        ),
        stuck=Gauge(
            "settle_relay_stuck", "Rail instructions processing past their lease.", registry=r
        ),
        reclaims=Counter("settle_relay_reclaims_total", "Expired leases taken over.", registry=r),
        fence_rejections=Counter(
            "settle_relay_fence_rejections_total", "Writes refused by the fence.", registry=r
        ),
        lookups=with_children(lookups, found=("true", "false")),
        poison=with_children(poison, reason=POISON_REASONS),
        consumer_lag=consumer_lag_gauge(r),
    )


def metrics_app(metrics: RelayMetrics) -> Starlette:
    """/metrics and /healthz of the relay, which serves no other HTTP."""

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    app = Starlette(routes=[Route("/healthz", healthz)])
    mount_metrics(app, metrics.registry)
    return app
