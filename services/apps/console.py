"""Composition root of the console: builds the pool, the rail lookup, the sign-in gate and
the pages, and serves them; nothing connects at import time, and the server starts even when
PostgreSQL is down (pages then show `store_unavailable`)."""

from __future__ import annotations

import logging

import uvicorn
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from services.adapters.postgres.database import create_pool
from services.adapters.postgres.schema_version import require_schema
from services.console.auth import Gate
from services.console.errors import MethodNotAllowed, PageFailed, PageNotFound
from services.console.pages import approvals, audit, login, overview, queues, settlements
from services.console.sessions import SessionStore
from services.console.web import Console, error_page, templates
from services.operations.approval_policy import policy_of
from services.operations.rail_lookup import RailLookup, StripeLookup, stripe_lookup
from services.platform.bearer import BearerAuth
from services.platform.clock import Clock, utc_now
from services.platform.config import Deployment
from services.platform.metrics import mount_metrics
from services.platform.service_settings import ConsoleSettings

POOL_SIZE = 8
log = logging.getLogger(__name__)


def create_app(console: Console) -> Starlette:
    """The console's ASGI app over `console`'s pool, rail lookup and gate."""
    routes = [
        *login.routes(console),
        *overview.routes(console),
        *settlements.routes(console),
        *queues.routes(console),
        *audit.routes(console),
        *approvals.routes(console),
    ]

    async def not_found(request: Request, _: Exception) -> Response:
        return error_page(console, PageNotFound(f"no page at {request.url.path}"), None)

    async def not_allowed(request: Request, _: Exception) -> Response:
        refused = MethodNotAllowed(f"{request.method} is not how {request.url.path} is used")
        return error_page(console, refused, None)

    async def failed(request: Request, error: Exception) -> Response:
        # Shown as a page with its code, and logged with its traceback (never a token: the
        # request's headers and form are not logged).
        log.error("console page %s failed", request.url.path, exc_info=error)
        return error_page(console, PageFailed("the console failed to answer; try again"), None)

    handlers = {404: not_found, 405: not_allowed, Exception: failed}
    app = Starlette(routes=routes, exception_handlers=handlers)
    mount_metrics(app, metrics_registry())
    return app


def metrics_registry() -> CollectorRegistry:
    """The console's /metrics: the process's own figures, enough for Prometheus to see it up
    or down (its alerts read process_start_time_seconds)."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


async def compose(
    settings: ConsoleSettings,
    *,
    rail: RailLookup | None = None,
    clock: Clock = utc_now,
) -> tuple[Console, StripeLookup | None]:
    """The console's parts built from `settings` (the rail lookup given, or one over Stripe's
    API or the simulator, returned to be closed); nothing connects yet."""
    pool = await create_pool(settings, max_size=POOL_SIZE, keep_sessions=True)
    await require_schema(pool)  # a schema older than this code ends the start
    owned = None
    if rail is None:
        rail = owned = stripe_lookup(settings)
    gate = Gate(
        BearerAuth(settings.operator_by_token),
        BearerAuth(settings.tenant_by_token),
        SessionStore(pool, clock),
        secure=settings.env is Deployment.PRODUCTION,
    )
    return Console(pool, rail, gate, templates(), clock, policy_of(settings)), owned


async def serve(settings: ConsoleSettings, host: str, port: int) -> None:
    """Serve the console on `port` until SIGINT or SIGTERM."""
    console, owned = await compose(settings)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(console),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            log_config=None,
        )
    )
    try:
        await server.serve()
    finally:
        if owned is not None:
            await owned.aclose()
        await console.pool.close()
