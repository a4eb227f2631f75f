"""GET /: the overview (figures in services.console.overview_queries, charts in SVG)."""

from __future__ import annotations

from datetime import timedelta

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.console.auth import Caller
from services.console.charts import Bar, bar_chart
from services.console.overview_queries import (
    LATENCY_BUCKET,
    LATENCY_SAMPLE,
    WINDOW,
    Overview,
    read_overview,
)
from services.console.web import Console, guarded, render
from services.domain.settlement import SettlementStatus

MINUTE = timedelta(minutes=1)


def throughput_chart(view: Overview) -> object:
    """Settlements accepted and paid in each minute of the window."""
    start = view.now - WINDOW
    slots = []
    for n in range(int(WINDOW / MINUTE)):
        minute = start + n * MINUTE
        counts = view.throughput.get(minute, {})
        slots.append(
            [
                Bar(
                    counts.get(kind, 0),
                    kind,
                    f"{minute:%H:%M} {kind} {counts.get(kind, 0)}",
                    {"minute": minute.isoformat(), "kind": kind, "count": str(counts.get(kind, 0))},
                )
                for kind in ("accepted", "paid")
            ]
        )
    return bar_chart("throughput-chart", "settlements accepted and paid per minute", slots, "/min")


def latency_chart(view: Overview) -> object:
    """Accepted-to-paid p50 and p99 of the settlements paid in each five minutes (the first
    LATENCY_SAMPLE of them)."""
    start = view.now - WINDOW
    slots = []
    for n in range(int(WINDOW / LATENCY_BUCKET)):
        bucket = start + n * LATENCY_BUCKET
        measured, p50, p99 = view.latency.get(bucket, (0, 0.0, 0.0))
        data = {
            "bucket": bucket.isoformat(),
            "measured": str(measured),
            "p50-ms": str(round(p50 * 1000)),
            "p99-ms": str(round(p99 * 1000)),
        }
        slots.append(
            [
                Bar(
                    p50 * 1000, "p50", f"{bucket:%H:%M} p50 {p50 * 1000:.0f} ms of {measured}", data
                ),
                Bar(
                    p99 * 1000, "p99", f"{bucket:%H:%M} p99 {p99 * 1000:.0f} ms of {measured}", data
                ),
            ]
        )
    return bar_chart("latency-chart", "accepted to paid, p50 and p99", slots, "ms")


def routes(console: Console) -> list[Route]:
    """The overview's route."""

    async def overview(request: Request, caller: Caller) -> Response:
        view = await read_overview(console.pool, console.clock())
        return render(
            console,
            "overview.html",
            caller,
            view=view,
            statuses=list(SettlementStatus),
            window=WINDOW,
            sample=LATENCY_SAMPLE,
            throughput=throughput_chart(view),
            latency=latency_chart(view),
            outbox_lag=(view.now - view.outbox_oldest).total_seconds()
            if view.outbox_oldest
            else 0.0,
        )

    return [Route("/", guarded(console, overview), methods=["GET"])]
