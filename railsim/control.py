"""The simulator's own endpoints: effects, faults on demand and the faults each settlement met,
reset, a bulk seed, webhook stats, health."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from railsim.core import RailSim
from railsim.errors import FaultsError
from railsim.faults import updated
from railsim.seed import SeedError, seeded
from railsim.webhooks import WebhookSender


def _effects(sim: RailSim, request: Request) -> Response:
    """The effect counts, or a page of them given `?offset=N&limit=M`."""
    refused = JSONResponse(
        {"error": {"message": "offset must be an integer >= 0 and limit an integer >= 1"}},
        status_code=400,
    )
    try:
        offset = int(request.query_params.get("offset", "0"))
        limit = request.query_params.get("limit")
        page = None if limit is None else int(limit)
    except ValueError:
        return refused
    if offset < 0 or (page is not None and page < 1):
        return refused
    return JSONResponse(sim.effects(offset, page))


def control_routes(sim: RailSim, sender: WebhookSender | None) -> list[BaseRoute]:
    """Routes under /_sim plus /healthz and /readyz (`SimCollector` feeds /metrics)."""

    async def effects(request: Request) -> Response:
        return _effects(sim, request)

    async def effects_of(request: Request) -> Response:
        settlement_id = request.path_params["settlement_id"]
        return JSONResponse({"settlement_id": settlement_id, **sim.effects_for(settlement_id)})

    async def reset(_: Request) -> Response:
        sim.reset()
        if sender is not None:
            sender.clear()
        return JSONResponse({"reset": True, "faults": dataclasses.asdict(sim.faults)})

    async def seed(request: Request) -> Response:
        try:
            objects = seeded(await request.body())
        except SeedError as e:
            return JSONResponse({"error": {"message": str(e)}}, status_code=400)
        sim.seed(objects)
        return JSONResponse({"seeded": len(objects)})

    async def webhooks(_: Request) -> Response:
        withheld = sim.withheld_webhooks()["count"]
        if sender is None:
            return JSONResponse({"enabled": False, "withheld": withheld})
        return JSONResponse(
            {"enabled": True, "url": sender.url, **sender.stats(), "withheld": withheld}
        )

    async def withheld(_: Request) -> Response:
        return JSONResponse(sim.withheld_webhooks())

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return [
        Route("/_sim/effects", effects, methods=["GET"]),
        Route("/_sim/effects/{settlement_id}", effects_of, methods=["GET"]),
        Route("/_sim/faults", _faults(sim), methods=["GET", "POST"]),
        Route("/_sim/faults/met", _faults_met(sim), methods=["POST"]),
        Route("/_sim/reset", reset, methods=["POST"]),
        Route("/_sim/seed", seed, methods=["POST"]),
        Route("/_sim/webhooks", webhooks, methods=["GET"]),
        Route("/_sim/webhooks/withheld", withheld, methods=["GET"]),
        Route("/healthz", health, methods=["GET"]),
        Route("/readyz", health, methods=["GET"]),
    ]


def _faults(sim: RailSim) -> Callable[[Request], Awaitable[Response]]:
    """GET|POST /_sim/faults: the settings in force, after applying a POSTed change."""

    async def endpoint(request: Request) -> Response:
        if request.method == "POST":
            try:
                changes = json.loads(await request.body() or b"{}")
                if not isinstance(changes, dict):
                    raise FaultsError("the body must be a JSON object of fault settings")
                sim.set_faults(updated(sim.faults, changes))
            except (json.JSONDecodeError, FaultsError) as e:
                return JSONResponse({"error": {"message": str(e)}}, status_code=400)
        return JSONResponse(dataclasses.asdict(sim.faults))

    return endpoint


def _faults_met(sim: RailSim) -> Callable[[Request], Awaitable[Response]]:
    """POST /_sim/faults/met: {"settlement_ids": [...]} in, {"met": {id: [fault, ...]}} out."""

    async def endpoint(request: Request) -> Response:
        try:
            asked = json.loads(await request.body() or b"{}")
        except json.JSONDecodeError:
            asked = None
        ids = asked.get("settlement_ids") if isinstance(asked, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            message = 'send {"settlement_ids": ["<settlement id>", ...]}'
            return JSONResponse({"error": {"message": message}}, status_code=400)
        return JSONResponse({"met": sim.faults_met(ids)})

    return endpoint


class SimCollector(Collector):
    """The simulator's gauges, read from the core at each scrape: the numbers live there,
    not in metric objects."""

    def __init__(self, sim: RailSim, sender: WebhookSender | None) -> None:
        self._sim, self._sender = sim, sender

    def collect(self) -> Iterator[Metric]:
        """railsim_effects, railsim_settlements_with_extra_effects, railsim_webhooks{state},
        railsim_webhooks_withheld."""
        summary = self._sim.effects()
        yield GaugeMetricFamily(
            "railsim_effects", "Transfers and payouts created", value=summary["total"]
        )
        by_settlement = summary["by_settlement"].values()
        yield GaugeMetricFamily(
            "railsim_settlements_with_extra_effects",
            "Settlements with more than one transfer or payout (guarantee 1 broken)",
            value=sum(1 for counts in by_settlement if sum(counts.values()) > 1),
        )
        yield GaugeMetricFamily(
            "railsim_webhooks_withheld",
            "Events never sent (the webhook_drop fault)",
            value=self._sim.withheld_webhooks()["count"],
        )
        if self._sender is not None:
            gauge = GaugeMetricFamily("railsim_webhooks", "Webhook deliveries", labels=["state"])
            for state, value in self._sender.stats().items():
                gauge.add_metric([state], value)
            yield gauge


def sim_registry(sim: RailSim, sender: WebhookSender | None) -> CollectorRegistry:
    """A registry that reports the simulator's gauges."""
    registry = CollectorRegistry()
    registry.register(SimCollector(sim, sender))
    return registry
