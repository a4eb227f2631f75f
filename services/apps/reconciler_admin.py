"""The reconciler's HTTP app: /healthz, /metrics, and whatever routes are mounted beside them
(`extra_routes`, e.g. operator endpoints), all answering errors in the shared edge's shape.

/healthz says the process is alive, whether or not it holds the reconciler lock: a replica
waiting for the lock is healthy, and says so with `"role": "standby"`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from fastapi import APIRouter, FastAPI, Response
from starlette.routing import BaseRoute

from services.platform.edge import JSON, install_error_handlers
from services.platform.metrics import mount_metrics
from services.reconcile.metrics import ReconcileMetrics

DESCRIPTION = """Reconciles the ledger with the rail on a schedule (one replica at a time);
`/metrics` carries the open breaks, the oldest one's age and the heartbeat of the last
completed run."""


def build_app(
    metrics: ReconcileMetrics,
    is_active: Callable[[], bool],
    extra_routes: Sequence[BaseRoute] = (),
) -> FastAPI:
    """The reconciler's app: /healthz (`is_active` says whether this replica holds the lock),
    /metrics, and `extra_routes` mounted as they are."""
    app = FastAPI(title="settle reconciler", version="1", description=DESCRIPTION)
    install_error_handlers(app)
    app.include_router(_ops_routes(is_active))
    app.router.routes.extend(extra_routes)
    mount_metrics(app, metrics.registry)
    return app


def _ops_routes(is_active: Callable[[], bool]) -> APIRouter:
    router = APIRouter(tags=["operations"])

    @router.get("/healthz", summary="The process is alive (active or standby)")
    async def healthz() -> Response:
        role = "active" if is_active() else "standby"
        return Response(json.dumps({"role": role, "status": "ok"}), media_type=JSON)

    return router
