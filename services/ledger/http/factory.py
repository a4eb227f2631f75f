"""Builds the ledger's HTTP app from the ports app.py hands in; nothing connects here."""

from __future__ import annotations

from fastapi import FastAPI

from services.ledger.admission import Admission
from services.ledger.http.accounts import account_routes
from services.ledger.http.fast_path import SettlementFastPath
from services.ledger.http.ops import ops_routes
from services.ledger.http.settlements import CreateSettlement, settlement_routes
from services.ledger.metrics import LedgerMetrics, create_metrics
from services.ledger.ports import Acceptor
from services.ledger.readiness import ReadinessProbe
from services.ledger.views import SettlementReader
from services.shared.config import Settings
from services.shared.edge import BearerAuth, install_error_handlers
from services.shared.metrics import mount_metrics

DESCRIPTION = """Books settlements in the settle ledger, exactly once per idempotency key.

Every error has the shape `{"error": {"code", "message", "field"}}`. Amounts are integers in
minor units. Another tenant's resources answer 404, never their data."""


def create_app(
    acceptor: Acceptor,
    reads: SettlementReader,
    settings: Settings,
    readiness: ReadinessProbe,
    *,
    metrics: LedgerMetrics | None = None,
    admission: Admission | None = None,
) -> SettlementFastPath:
    """The ledger's HTTP API over the given ports (an ASGI app: POST /v1/settlements served in
    front of the FastAPI app, `.api`); `metrics` defaults to a fresh registry, `admission` to
    the limits and backlog `settings` configure."""
    metrics = metrics if metrics is not None else create_metrics()
    if admission is None:
        admission = Admission(settings.tenant_limits, settings.accept_backlog)
    auth = BearerAuth(settings.tenant_by_token)
    app = FastAPI(title="settle ledger", version="1", description=DESCRIPTION)
    install_error_handlers(app)
    create = CreateSettlement(acceptor, auth, metrics, admission)
    app.include_router(settlement_routes(create, reads, auth))
    app.include_router(account_routes(reads, auth))
    app.include_router(ops_routes(readiness))
    mount_metrics(app, metrics.registry)
    return SettlementFastPath(app, create)
