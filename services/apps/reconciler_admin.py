"""The reconciler's HTTP app: /healthz, /metrics, and whatever routes are mounted beside them
(`extra_routes`: the operator API), all answering errors in the shared edge's shape; its
/openapi.json documents them (FastAPI routes), and /docs shows it.

/healthz says the process is alive, whether or not it holds the reconciler lock: a replica
waiting for the lock is healthy, and says so with `"role": "standby"`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from fastapi import APIRouter, FastAPI, Response
from starlette.routing import BaseRoute

from services.platform.api_docs import document_error_shape
from services.platform.edge import JSON, install_error_handlers
from services.platform.metrics import mount_metrics
from services.reconcile.metrics import ReconcileMetrics

DESCRIPTION = """Reconciles the ledger with the rail on a schedule (one replica at a time);
`/metrics` carries the open breaks, the oldest one's age and the heartbeat of the last
completed run.

It serves the operator API (the `settle` operator commands are its clients): settlements under
review, reconciliation breaks, proposals awaiting a second operator, two-person mode and inbox
events. Each of its routes takes `Authorization: Bearer <operator token>` and may name its
operator in `Settle-Operator`. In two-person mode an action that moves money or closes a break
is proposed (202) rather than done (200). Every error has the shape
`{"error": {"code", "message", "field"}}`."""


def build_app(
    metrics: ReconcileMetrics,
    is_active: Callable[[], bool],
    extra_routes: Sequence[BaseRoute] = (),
) -> FastAPI:
    """The reconciler's app: /healthz (`is_active` says whether this replica holds the lock),
    /metrics, and `extra_routes` mounted as they are."""
    app = FastAPI(title="settle reconciler", version="1", description=DESCRIPTION)
    install_error_handlers(app)
    document_error_shape(app)
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
