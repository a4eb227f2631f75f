"""/metrics for every service: prometheus-client's own ASGI app over the service's registry."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from prometheus_client import make_asgi_app
from prometheus_client.registry import Collector
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

METRICS_PATH = "/metrics"
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
