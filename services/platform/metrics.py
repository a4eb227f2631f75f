"""/metrics for every service: prometheus-client's own ASGI app over the service's registry."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any, TypeVar

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_asgi_app
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

METRICS_PATH = "/metrics"
CONSUMER_LAG = "settle_consumer_lag"
# A settlement is paid within seconds when the rail answers at once, within hours or days when
# the rail batches payouts: both ends are watched.
ACCEPTED_TO_PAID_BUCKETS = (
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    3600.0,
    14400.0,
    86400.0,
    259200.0,
)
_DOCUMENTED = {
    "get": {
        "tags": ["operations"],
        "summary": "Prometheus metrics",
        "responses": {"200": {"description": "The Prometheus text exposition format."}},
    }
}


class _Exposition:
    """prometheus-client's ASGI app as an object: Starlette's Route would wrap a plain function
    as a request handler, while it mounts any other callable as the ASGI app it is."""

    def __init__(self, registry: Collector) -> None:
        self._app = make_asgi_app(registry)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


def mount_metrics(app: Starlette, registry: Collector) -> None:
    """Serve `registry` at GET /metrics on `app`; a FastAPI app also lists it in /openapi.json."""
    # First, so no catch-all route of the app can shadow it.
    app.router.routes.insert(0, Route(METRICS_PATH, _Exposition(registry), methods=["GET"]))
    if isinstance(app, FastAPI):
        _document(app)


def _document(app: FastAPI) -> None:
    # FastAPI documents only its own routes; extending the generated schema is its documented
    # way to describe anything else that is served.
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()  # cached by FastAPI after the first call
        schema["paths"].setdefault(METRICS_PATH, _DOCUMENTED)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def consumer_lag_gauge(registry: CollectorRegistry) -> Gauge:
    """Register settle_consumer_lag{service,topic} on `registry`: messages a Kafka consumer is
    behind its partitions' ends. Topics are settle's own, so the labels stay few."""
    return Gauge(
        CONSUMER_LAG,
        "Messages a consumer is behind the ends of its assigned partitions, by topic.",
        ["service", "topic"],
        registry=registry,
    )


class ConsumerLag:
    """Sets one service's series of settle_consumer_lag, each topic's child made once."""

    def __init__(self, gauge: Gauge, service: str) -> None:
        self._gauge, self._service = gauge, service
        self._by_topic: dict[str, Gauge] = {}

    def record(self, behind: dict[str, int]) -> None:
        """Set each topic's lag to `behind[topic]` messages."""
        for topic, messages in behind.items():
            child = self._by_topic.get(topic)
            if child is None:
                child = self._by_topic[topic] = self._gauge.labels(self._service, topic)
            child.set(messages)


def accepted_to_paid_histogram(registry: CollectorRegistry) -> Histogram:
    """Register settle_settlement_accepted_to_paid_seconds on `registry`: from a settlement's
    acceptance (its `created_at`) to the committed move that made it paid."""
    return Histogram(
        "settle_settlement_accepted_to_paid_seconds",
        "From a settlement accepted to its move to paid committed.",
        buckets=ACCEPTED_TO_PAID_BUCKETS,
        registry=registry,
    )


M = TypeVar("M", Counter, Gauge, Histogram)


def with_children(metric: M, **label_values: Iterable[str]) -> M:
    """`metric` with a child for every combination of the label values given, made now, so
    each series is exported (at 0) before its first sample."""
    names = list(label_values)
    for combination in itertools.product(*label_values.values()):
        metric.labels(**dict(zip(names, combination, strict=True)))
    return metric
