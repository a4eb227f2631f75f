"""The simulator's own endpoints, beside the bank's API: advance the clock a business day,
read or change the faults at run time, health, and the gauges /metrics reports."""

from __future__ import annotations

import json
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from banksim.bank import Bank
from banksim.errors import BadQuery
from banksim.faults import as_json, updated
from banksim.http import clock_answer


def control_routes(bank: Bank) -> list[BaseRoute]:
    """POST /_control/advance, GET|POST /_control/faults, GET /healthz."""

    async def advance(request: Request) -> Response:
        asked = await _json_object(request)
        days = asked.get("days", 1)
        if isinstance(days, bool) or not isinstance(days, int) or days < 1:
            raise BadQuery('send {"days": n} with n >= 1, or no body for one day')
        bank.advance(days)
        return JSONResponse(clock_answer(bank))

    async def faults(request: Request) -> Response:
        if request.method == "POST":
            bank.set_faults(updated(bank.faults, await _json_object(request)))
        return JSONResponse(as_json(bank.faults))

    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return [
        Route("/_control/advance", advance, methods=["POST"]),
        Route("/_control/faults", faults, methods=["GET", "POST"]),
        Route("/healthz", health, methods=["GET"]),
    ]


async def _json_object(request: Request) -> dict[str, object]:
    try:
        body = json.loads(await request.body() or b"{}")
    except json.JSONDecodeError as e:
        raise BadQuery(f"the body is not JSON: {e}") from e
    if not isinstance(body, dict):
        raise BadQuery("the body must be a JSON object")
    return body


class BankCollector(Collector):
    """The bank's gauges, read from its state at each scrape."""

    def __init__(self, bank: Bank) -> None:
        self._bank = bank

    def collect(self) -> Iterator[Metric]:
        """banksim_reports_delivered{kind}, banksim_transfers_debited,
        banksim_end_to_end_ids_debited_more_than_once, banksim_transfers_returned."""
        reports = GaugeMetricFamily(
            "banksim_reports_delivered", "Reports delivered", labels=["kind"]
        )
        for kind, count in self._bank.report_counts().items():
            reports.add_metric([kind], count)
        yield reports
        booked = self._bank.effects()
        debits = booked["debits"].values()
        yield GaugeMetricFamily(
            "banksim_transfers_debited", "Transfer debits booked", value=sum(debits)
        )
        yield GaugeMetricFamily(
            "banksim_end_to_end_ids_debited_more_than_once",
            "EndToEndIds the bank paid more than once (settle's guarantee broken)",
            value=sum(1 for n in debits if n > 1),
        )
        yield GaugeMetricFamily(
            "banksim_transfers_returned", "Returns credited", value=sum(booked["returns"].values())
        )


def bank_registry(bank: Bank) -> CollectorRegistry:
    """A registry that reports the bank's gauges."""
    registry = CollectorRegistry()
    registry.register(BankCollector(bank))
    return registry
