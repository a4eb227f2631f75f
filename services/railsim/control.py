"""The simulator's own endpoints: effects, faults on demand, reset, webhook stats, health."""

from __future__ import annotations

import dataclasses
import json

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Gauge, generate_latest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from services.railsim.core import RailSim
from services.railsim.errors import FaultsError
from services.railsim.faults import updated
from services.railsim.webhooks import WebhookSender


def control_routes(sim: RailSim, sender: WebhookSender | None) -> list[BaseRoute]:
    """Routes under /_sim plus /healthz, /readyz and /metrics."""

    async def effects(_: Request) -> Response:
        return JSONResponse(sim.effects())

    async def effects_of(request: Request) -> Response:
        settlement_id = request.path_params["settlement_id"]
        return JSONResponse({"settlement_id": settlement_id, **sim.effects_for(settlement_id)})

    async def faults(request: Request) -> Response:
        if request.method == "POST":
            try:
                changes = json.loads(await request.body() or b"{}")
                if not isinstance(changes, dict):
                    raise FaultsError("the body must be a JSON object of fault settings")
                sim.set_faults(updated(sim.faults, changes))
            except (json.JSONDecodeError, FaultsError) as e:
                return JSONResponse({"error": {"message": str(e)}}, status_code=400)
        return JSONResponse(dataclasses.asdict(sim.faults))

    async def reset(_: Request) -> Response:
        sim.reset()
        if sender is not None:
            sender.clear()
        return JSONResponse({"reset": True, "faults": dataclasses.asdict(sim.faults)})

    async def webhooks(_: Request) -> Response:
        if sender is None:
            return JSONResponse({"enabled": False})
        return JSONResponse({"enabled": True, "url": sender.url, **sender.stats()})

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def metrics(_: Request) -> Response:
        return Response(_exposition(sim, sender), media_type=CONTENT_TYPE_LATEST)

    return [
        Route("/_sim/effects", effects, methods=["GET"]),
        Route("/_sim/effects/{settlement_id}", effects_of, methods=["GET"]),
        Route("/_sim/faults", faults, methods=["GET", "POST"]),
        Route("/_sim/reset", reset, methods=["POST"]),
        Route("/_sim/webhooks", webhooks, methods=["GET"]),
        Route("/healthz", health, methods=["GET"]),
        Route("/readyz", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]


def _exposition(sim: RailSim, sender: WebhookSender | None) -> bytes:
    # A fresh registry per scrape: the numbers live in the core, not in metric objects
    registry = CollectorRegistry()
    summary = sim.effects()
    Gauge("railsim_effects", "Transfers and payouts created", registry=registry).set(
        summary["total"]
    )
    doubled = sum(1 for counts in summary["by_settlement"].values() if sum(counts.values()) > 1)
    Gauge(
        "railsim_settlements_with_extra_effects",
        "Settlements with more than one transfer or payout (guarantee 1 broken)",
        registry=registry,
    ).set(doubled)
    if sender is not None:
        gauge = Gauge("railsim_webhooks", "Webhook deliveries", ["state"], registry=registry)
        for state, value in sender.stats().items():
            gauge.labels(state=state).set(value)
    return generate_latest(registry)
