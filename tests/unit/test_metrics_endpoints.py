"""/metrics of the relay and the rail simulator: prometheus-client's exposition of what each
process counted, served the one shared way. No I/O beyond the in-process ASGI app."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families
from starlette.types import ASGIApp

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.faults import Faults
from railsim.http import create_app as railsim_app
from railsim.params import Kind
from services.relay.metrics import create_metrics, metrics_app

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(app: ASGIApp) -> Samples:
    """GET /metrics on `app`; every sample by name and labels."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://m") as client:
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


async def test_the_relays_metrics_show_what_it_counted() -> None:
    metrics = create_metrics()
    metrics.published.inc(3)
    metrics.of_rail("stripe").called("ambiguous")
    metrics.of_rail("sepa")
    samples = await scrape(metrics_app(metrics))
    assert samples[("settle_relay_published_total", ())] == 3
    stripe_ambiguous = (("outcome", "ambiguous"), ("rail", "stripe"))
    assert samples[("settle_relay_rail_calls_total", stripe_ambiguous)] == 1
    assert (
        samples[("settle_relay_rail_calls_total", (("outcome", "ambiguous"), ("rail", "sepa")))]
        == 0
    )
    assert (
        samples[("settle_relay_rail_calls_total", (("outcome", "accepted"), ("rail", "stripe")))]
        == 0
    )


async def test_the_relay_still_answers_healthz() -> None:
    transport = httpx.ASGITransport(app=metrics_app(create_metrics()))
    async with httpx.AsyncClient(transport=transport, base_url="http://m") as client:
        response = await client.get("/healthz")
    assert (response.status_code, response.text) == (200, "ok")


def transfer(sim: RailSim, settlement: str, key: str) -> None:
    form = [
        ("amount", "700"),
        ("currency", "gbp"),
        ("destination", "acct_ok"),
        ("metadata[settlement_id]", settlement),
    ]
    assert sim.create(Kind.TRANSFER, form, key).status == 200


async def test_the_simulators_metrics_are_read_from_its_core_at_each_scrape() -> None:
    sim = RailSim(clock=ManualClock())
    app = railsim_app(sim)
    assert (await scrape(app))[("railsim_effects", ())] == 0
    transfer(sim, "s-1", "k-1")
    transfer(sim, "s-1", "k-2")  # a second transfer for one settlement: guarantee 1 broken
    transfer(sim, "s-2", "k-3")
    samples = await scrape(app)
    assert samples[("railsim_effects", ())] == 3
    assert samples[("railsim_settlements_with_extra_effects", ())] == 1


async def test_the_simulator_counts_the_events_it_withheld() -> None:
    sim = RailSim(clock=ManualClock(), faults=Faults(webhook_drop=1))
    app = railsim_app(sim)
    assert (await scrape(app))[("railsim_webhooks_withheld", ())] == 0
    transfer(sim, "s-1", "k-1")
    assert (await scrape(app))[("railsim_webhooks_withheld", ())] == 1
