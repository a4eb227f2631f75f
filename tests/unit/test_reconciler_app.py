"""The reconciler's HTTP app without a database: /healthz says whether this replica is the
reconciler or a standby, /metrics carries every break type and run outcome from the start,
and routes handed in (operator endpoints) are served beside them in the shared error shape."""

from __future__ import annotations

import httpx
from fastapi import APIRouter

from services.apps.reconciler_admin import build_app
from services.domain.breaks import BreakType
from services.domain.errors import StoreUnavailable
from services.reconcile.metrics import create_metrics
from tests.unit.test_metrics_endpoints import scrape


async def get(app: object, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://r") as client:
        return await client.get(path)


async def test_healthz_is_ok_for_the_active_replica_and_for_a_standby() -> None:
    metrics = create_metrics()
    active = await get(build_app(metrics, lambda: True), "/healthz")
    standby = await get(build_app(create_metrics(), lambda: False), "/healthz")
    assert (active.status_code, active.json()) == (200, {"role": "active", "status": "ok"})
    assert (standby.status_code, standby.json()) == (200, {"role": "standby", "status": "ok"})


async def test_metrics_show_every_break_type_and_what_was_counted() -> None:
    metrics = create_metrics()
    metrics.breaks_open.labels(type="status_drift").set(3)
    metrics.healed.inc(2)
    metrics.runs.labels(kind="intraday", outcome="failed").inc()
    samples = await scrape(build_app(metrics, lambda: True))
    for kind in BreakType:
        assert ("settle_reconcile_breaks_open", (("type", kind.value),)) in samples
    assert samples[("settle_reconcile_breaks_open", (("type", "status_drift"),))] == 3
    assert samples[("settle_reconcile_healed_total", ())] == 2
    failed = (("kind", "intraday"), ("outcome", "failed"))
    assert samples[("settle_reconcile_runs_total", failed)] == 1
    completed = (("kind", "end_of_day"), ("outcome", "completed"))
    assert samples[("settle_reconcile_runs_total", completed)] == 0
    assert samples[("settle_reconcile_last_success_timestamp_seconds", ())] == 0


async def test_routes_handed_in_are_served_and_answer_errors_in_the_shared_shape() -> None:
    router = APIRouter()

    @router.get("/v1/breaks")
    async def breaks() -> dict[str, list[str]]:
        return {"breaks": []}

    @router.get("/v1/review")
    async def review() -> None:
        raise StoreUnavailable("the store does not answer")

    app = build_app(create_metrics(), lambda: True, extra_routes=router.routes)
    listed = await get(app, "/v1/breaks")
    assert (listed.status_code, listed.json()) == (200, {"breaks": []})
    down = await get(app, "/v1/review")
    assert down.status_code == 503
    assert down.json()["error"]["code"] == "store_unavailable"
    assert (await get(app, "/metrics")).status_code == 200
