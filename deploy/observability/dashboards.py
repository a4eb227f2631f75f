"""Grafana dashboards as code: the settlement funnel and each service's golden signals (rate,
errors, latency, saturation), built with grafanalib from the services' own metrics.

`python deploy/observability/dashboards.py` writes the JSON under dashboards/ beside this
file, which Grafana provisions (grafana/provisioning/); tests/unit/test_dashboards.py checks
that the committed JSON is what this file makes, and that every metric a panel queries is one
the services register.
"""

from __future__ import annotations

import json
from pathlib import Path

from grafanalib._gen import DashboardEncoder
from grafanalib.core import Dashboard, GridPos, RowPanel, Target, TimeSeries

OUT = Path(__file__).resolve().parent / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}  # grafana/provisioning/datasources
WINDOW = "5m"
# The rail's signals as the inbox counts them (services/domain/rail_event.py SIGNALS).
PAID = 'event_type=~"payout.paid|transfer.created"'
FAILED = 'event_type=~"payout.failed|payout.canceled"'
REVERSED = 'event_type="transfer.reversed"'
# Ledger outcomes that are the service failing the caller, not the caller's own mistake.
LEDGER_ERRORS = 'outcome=~"unavailable|overloaded"'
# Set by the replica holding the reconciler lock; a standby keeps the value it last set.
OLDEST_SUBMITTED = (
    "settle_settlement_oldest_submitted_seconds and on (instance) settle_reconcile_lock_held == 1"
)
# A row of the dashboard: its title and its panels, left to right.
Section = tuple[str, list[TimeSeries]]


def rate(metric: str, by: str = "") -> str:
    """Per-second rate of a counter over the dashboards' window, summed (by `by`)."""
    grouping = f" by ({by}) " if by else ""
    return f"sum{grouping}(rate({metric}[{WINDOW}]))"


def quantile(q: float, histogram: str) -> str:
    """The `q` quantile of a histogram over the window, across every replica."""
    return f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket[{WINDOW}])))"


def panel(title: str, unit: str, *queries: tuple[str, str]) -> TimeSeries:
    """A time series of (expression, legend) pairs; laid out by `rows`."""
    targets = [
        Target(expr=expr, legendFormat=legend, refId=chr(ord("A") + i), datasource=DATASOURCE)
        for i, (expr, legend) in enumerate(queries)
    ]
    return TimeSeries(title=title, dataSource=DATASOURCE, targets=targets, unit=unit)


def rows(*sections: Section) -> list[RowPanel | TimeSeries]:
    """Each (row title, panels) as a row of panels side by side, one row under another."""
    laid: list[RowPanel | TimeSeries] = []
    y = 0
    for title, panels in sections:
        laid.append(RowPanel(title=title, gridPos=GridPos(h=1, w=24, x=0, y=y)))
        width = 24 // len(panels)
        for i, p in enumerate(panels):
            p.gridPos = GridPos(h=8, w=width, x=i * width, y=y + 1)
            laid.append(p)
        y += 9
    return laid


def dashboard(uid: str, title: str, *sections: Section) -> Dashboard:
    """A settle dashboard of `sections`, panels numbered."""
    made = Dashboard(title=title, uid=uid, tags=["settle"], timezone="utc", panels=rows(*sections))
    return made.auto_panel_ids()


def funnel() -> Dashboard:
    """Settlements through each stage: accepted by the ledger, submitted to and accepted by the
    rail, paid or failed as the rail's webhooks say, and the time spent between stages."""
    stages = panel(
        "Settlements per second by stage",
        "ops",
        (rate('settle_ledger_requests_total{outcome="created"}'), "accepted"),
        (rate('settle_relay_rail_calls_total{outcome="accepted"}'), "submitted"),
        (rate(f"settle_inbox_applied_total{{{PAID}}}"), "paid"),
        (rate(f"settle_inbox_applied_total{{{FAILED}}}"), "failed"),
        (rate(f"settle_inbox_applied_total{{{REVERSED}}}"), "reversed"),
    )
    refused = panel(
        "Rail calls by rail and outcome",
        "ops",
        (rate("settle_relay_rail_calls_total", "rail, outcome"), "{{rail}} {{outcome}}"),
    )
    waits = panel(
        "Waiting between stages",
        "s",
        ("max(settle_relay_outbox_lag_seconds)", "accepted, not yet on Kafka"),
        ("max(settle_inbox_oldest_parked_seconds)", "rail event waiting on its settlement"),
    )
    latency = panel(
        "Stage latency",
        "s",
        (quantile(0.99, "settle_ledger_accept_seconds"), "accept p99"),
        (quantile(0.99, "settle_relay_rail_call_seconds"), "rail call p99"),
        (quantile(0.99, "settle_inbox_apply_seconds"), "webhook apply p99"),
    )
    paid = panel(
        "Accepted to paid",
        "s",
        (quantile(0.5, "settle_settlement_accepted_to_paid_seconds"), "p50"),
        (quantile(0.99, "settle_settlement_accepted_to_paid_seconds"), "p99"),
    )
    submitted = panel(
        "Oldest submitted without an outcome",
        "s",
        (f"max({OLDEST_SUBMITTED})", "oldest submitted"),
    )
    return dashboard(
        "settle-funnel",
        "settle: settlement funnel",
        ("Throughput", [stages, refused]),
        ("Time in each stage", [waits, latency]),
        ("Accepted to paid", [paid, submitted]),
    )


def golden(
    service: str, rates: TimeSeries, errors: TimeSeries, latency: str, sat: TimeSeries
) -> Section:
    """One service's row: rate, errors, latency p50/p99 of histogram `latency`, saturation."""
    latencies = panel(
        "Latency",
        "s",
        (quantile(0.5, latency), "p50"),
        (quantile(0.99, latency), "p99"),
    )
    return service, [rates, errors, latencies, sat]


def ledger() -> Section:
    """The ledger: settlement requests by outcome, its own refusals, booking time, batches."""
    return golden(
        "ledger",
        panel("Requests", "ops", (rate("settle_ledger_requests_total", "outcome"), "{{outcome}}")),
        panel(
            "Errors",
            "percentunit",
            (
                f"{rate(f'settle_ledger_requests_total{{{LEDGER_ERRORS}}}')}"
                f" / {rate('settle_ledger_requests_total')}",
                "refused by the ledger",
            ),
            (rate("settle_ledger_dlq_total", "reason"), "dead-lettered: {{reason}}"),
        ),
        "settle_ledger_accept_seconds",
        panel("Batch size p99", "none", (quantile(0.99, "settle_ledger_batch_size"), "p99")),
    )


def relay() -> Section:
    """The relays: outbox rows published, rail calls, their failures, instructions held."""
    return golden(
        "relay",
        panel(
            "Published and called",
            "ops",
            (rate("settle_relay_published_total"), "outbox rows published"),
            (rate("settle_relay_rail_calls_total"), "rail calls"),
        ),
        panel(
            "Errors",
            "ops",
            (rate('settle_relay_rail_calls_total{outcome=~"retryable|ambiguous"}'), "rail"),
            (rate("settle_relay_poison_events_total", "reason"), "poison: {{reason}}"),
            (rate("settle_relay_fence_rejections_total"), "fenced writes"),
        ),
        "settle_relay_rail_call_seconds",
        panel(
            "Instructions and outbox",
            "none",
            ("max(settle_relay_in_flight)", "in flight"),
            ("max(settle_relay_stuck)", "stuck"),
            ("max(settle_relay_outbox_lag_seconds)", "outbox lag (s)"),
        ),
    )


def inbox() -> Section:
    """The inbox: webhooks by outcome, refused and given-up events, apply time, parked age."""
    return golden(
        "inbox",
        panel("Webhooks", "ops", (rate("settle_inbox_received_total", "outcome"), "{{outcome}}")),
        panel(
            "Errors",
            "ops",
            (rate("settle_inbox_bad_signatures_total", "reason"), "{{reason}}"),
            (rate("settle_inbox_dead_total"), "dead"),
            (rate("settle_inbox_mismatched_total"), "mismatched"),
            (rate("settle_inbox_parked_total"), "parked"),
        ),
        "settle_inbox_apply_seconds",
        panel("Oldest parked", "s", ("max(settle_inbox_oldest_parked_seconds)", "oldest")),
    )


def reconciler() -> Section:
    """The reconciler: runs and rows read, failed runs and open breaks, run time, heartbeat."""
    return golden(
        "reconciler",
        panel(
            "Runs and objects read",
            "ops",
            (rate("settle_reconcile_runs_total", "kind"), "runs: {{kind}}"),
            (rate("settle_reconcile_objects_read_total", "source"), "read: {{source}}"),
        ),
        panel(
            "Failed runs and breaks",
            "none",
            (rate('settle_reconcile_runs_total{outcome!="completed"}', "outcome"), "{{outcome}}"),
            ("max by (type) (settle_reconcile_breaks_open)", "open: {{type}}"),
        ),
        "settle_reconcile_run_seconds",
        panel(
            "Heartbeat age",
            "s",
            ("time() - max(settle_reconcile_last_success_timestamp_seconds)", "since success"),
            ("max(settle_reconcile_oldest_open_break_seconds)", "oldest open break"),
        ),
    )


def services() -> Dashboard:
    """The golden signals of the ledger, the relays, the inbox and the reconciler."""
    sections = (ledger(), relay(), inbox(), reconciler())
    return dashboard("settle-services", "settle: golden signals", *sections)


def render() -> dict[str, str]:
    """File name -> JSON text of every dashboard, as committed under dashboards/."""
    made = {"settle-funnel.json": funnel(), "settle-services.json": services()}
    return {
        name: json.dumps(d.to_json_data(), cls=DashboardEncoder, sort_keys=True, indent=2) + "\n"
        for name, d in made.items()
    }


def main() -> None:
    """Write every dashboard's JSON under dashboards/."""
    OUT.mkdir(exist_ok=True)
    for name, text in render().items():
        (OUT / name).write_text(text)


if __name__ == "__main__":
    main()
