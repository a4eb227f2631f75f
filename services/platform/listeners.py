"""Two listeners per HTTP service: the public port its callers reach, and the admin port its
operators and Prometheus reach.

The public app holds only what the service's caller needs (the tenant API, the webhook
endpoint) and a bare liveness probe; operator endpoints, /metrics, /docs, /openapi.json and
readiness details live on the admin app. A path of the admin app asked for on the public port
is simply not there: 404, so its existence is not disclosed (a 401 would confirm it).

One uvicorn server listens on both sockets and hands each request to the app of the port it
arrived on: one set of signal handlers, one graceful shutdown, one event loop, where two
servers in one process would each capture SIGTERM and unwind in turn.
"""

from __future__ import annotations

import asyncio
import socket
from typing import NamedTuple

import uvicorn
from fastapi import APIRouter, FastAPI, Response
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Receive, Scope, Send

from services.platform.api_docs import document_error_shape
from services.platform.edge import JSON, install_error_handlers
from services.platform.metrics import mount_metrics

LIVENESS_PATH = "/healthz"
GRACE_SECONDS = 10  # what a request in flight gets to finish once the service stops


class Listeners(NamedTuple):
    """A service's two ASGI apps."""

    public: ASGIApp  # what the service's callers need, and /healthz
    admin: ASGIApp  # operator endpoints, /metrics, /docs, /openapi.json, readiness


class ByPort:
    """Sends each request to the admin app when it arrived on `admin_port`, else to the
    public app: a connection whose local port is unknown never reaches the admin app."""

    def __init__(self, apps: Listeners, admin_port: int) -> None:
        self._public, self._admin, self._admin_port = apps.public, apps.admin, admin_port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        local = scope.get("server")
        on_admin = local is not None and local[1] == self._admin_port
        await (self._admin if on_admin else self._public)(scope, receive, send)


def liveness_routes() -> APIRouter:
    """GET /healthz: the process answers, and says nothing else."""
    router = APIRouter(tags=["operations"])

    @router.get(LIVENESS_PATH, summary="The process is alive")
    async def healthz() -> Response:
        return Response(b'{"status":"ok"}', media_type=JSON)

    return router


def public_api(title: str, description: str, *, openapi: bool) -> FastAPI:
    """A public port's FastAPI app: error shape and /healthz, no /docs; /openapi.json only
    when its callers are meant to read it."""
    app = FastAPI(
        title=title,
        version="1",
        description=description,
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json" if openapi else None,
    )
    install_error_handlers(app)
    document_error_shape(app)
    app.include_router(liveness_routes())
    return app


def admin_api(title: str, description: str, registry: Collector) -> FastAPI:
    """An admin port's FastAPI app: error shape, /healthz, /metrics over `registry`, /docs
    and /openapi.json; the service adds its operator routes."""
    app = FastAPI(title=title, version="1", description=description, redoc_url=None)
    install_error_handlers(app)
    document_error_shape(app)
    app.include_router(liveness_routes())
    mount_metrics(app, registry)
    return app


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port (0: any free port), not yet listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # A restarted service binds again at once, past its predecessor's TIME_WAIT sockets.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


class ListeningServer:
    """One uvicorn server on a public and an admin socket (bound here, so a port in use fails
    at start); `serve()` runs it until cancelled or signalled."""

    def __init__(self, apps: Listeners, host: str, port: int, admin_port: int) -> None:
        if port == admin_port and port != 0:
            raise ValueError(f"the admin port must differ from the public port {port}")
        self._sockets = [bind(host, port), bind(host, admin_port)]
        self.port, self.admin_port = (s.getsockname()[1] for s in self._sockets)
        # No client address is read, so no proxy-header rewriting on every request; no
        # lifespan: the composition root opens and closes what the apps use.
        config = uvicorn.Config(
            ByPort(apps, self.admin_port),
            log_level="warning",
            access_log=False,
            log_config=None,  # its lines go through the service's own log format
            proxy_headers=False,
            lifespan="off",
            timeout_graceful_shutdown=GRACE_SECONDS,
        )
        self._server = uvicorn.Server(config)

    async def serve(self) -> None:
        """Serve both ports until SIGINT/SIGTERM or cancelled; either way the listeners close
        and requests in flight get up to GRACE_SECONDS to finish."""
        served = asyncio.ensure_future(self._server.serve(sockets=self._sockets))
        try:
            await asyncio.shield(served)
        except asyncio.CancelledError:
            # Cancelled mid-serve, uvicorn would leave its listeners open: stop it its way.
            self._server.should_exit = True
            await served
            raise
        finally:
            for sock in self._sockets:
                sock.close()
