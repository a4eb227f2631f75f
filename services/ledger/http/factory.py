"""Builds the ledger's two HTTP apps from the ports app.py hands in; nothing connects here.

The public app (the tenant-facing port) serves the tenant API, its OpenAPI document at
/openapi.json (tenants build their clients from it) and /healthz; the admin app serves
/readyz, /metrics (every tenant's volumes), /docs and its own /openapi.json.
"""

from __future__ import annotations

from fastapi import FastAPI

from services.ledger.admission import Admission, admission_of
from services.ledger.http import docs
from services.ledger.http.accounts import account_routes
from services.ledger.http.fast_path import SettlementFastPath
from services.ledger.http.ops import readiness_routes
from services.ledger.http.readers import reader_dependency
from services.ledger.http.settlements import CreateSettlement, settlement_routes
from services.ledger.metrics import LedgerMetrics, create_metrics
from services.ledger.ports import Acceptor
from services.ledger.readiness import ReadinessProbe
from services.ledger.views import SettlementReader
from services.platform.api_docs import add_links
from services.platform.bearer import BearerAuth
from services.platform.listeners import admin_api, public_api
from services.platform.service_settings import LedgerSettings

DESCRIPTION = """Books settlements in the settle ledger, exactly once per idempotency key.

Every error has the shape `{"error": {"code", "message", "field"}}`. Amounts are integers in
minor units. Another tenant's resources answer 404, never their data."""
ADMIN_DESCRIPTION = """The ledger's admin port: readiness of PostgreSQL and Kafka and the
Prometheus metrics. Reachable by operators and Prometheus only, never by tenants."""


def create_app(
    acceptor: Acceptor,
    reads: SettlementReader,
    settings: LedgerSettings,
    *,
    metrics: LedgerMetrics | None = None,
    admission: Admission | None = None,
) -> SettlementFastPath:
    """The ledger's tenant API over the given ports (an ASGI app: POST /v1/settlements served
    in front of the FastAPI app, `.api`); `metrics` defaults to a fresh registry, `admission`
    to the limits and backlog `settings` configure."""
    metrics = metrics if metrics is not None else create_metrics()
    if admission is None:
        admission = admission_of(settings)
    auth = BearerAuth(settings.tenant_by_token)
    app = public_api("settle ledger", DESCRIPTION, openapi=True)
    add_links(app, docs.LINKS)
    create = CreateSettlement(acceptor, auth, metrics, admission)
    reader = reader_dependency(auth, admission)  # the reads' tenant, under its read rate
    app.include_router(settlement_routes(create, reads, reader))
    app.include_router(account_routes(reads, reader))
    return SettlementFastPath(app, create)


def create_admin_app(readiness: ReadinessProbe, metrics: LedgerMetrics) -> FastAPI:
    """The ledger's admin API: /healthz, /readyz, /metrics of `metrics`, /docs, /openapi.json."""
    app = admin_api("settle ledger admin", ADMIN_DESCRIPTION, metrics.registry)
    app.include_router(readiness_routes(readiness))
    return app
