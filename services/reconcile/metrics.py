"""The reconciler's Prometheus metrics, on a registry of their own so tests stay isolated.

The gauges are read back from the store after every run (`standing.py`), so they say what the
records say, whichever replica or command wrote them; the counters count this process's work.
Objects read per second is `rate(settle_reconcile_objects_read_total)`, or per run the
objects read over `settle_reconcile_run_seconds`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from services.domain.breaks import BreakType
from services.domain.payout import PayoutMethod
from services.domain.reconciliation import RunKind
from services.platform.config import RailKind
from services.platform.metrics import accepted_to_paid_histogram, with_children

# A run that could not even be recorded (PostgreSQL away) is `unavailable`.
RUN_OUTCOMES = ("completed", "failed", "unavailable")
SOURCES = ("ledger", "rail")
RUN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)
# The oldest submitted settlement is told per rail and method: a transfer's outcome comes in
# minutes, a payout's or a SEPA transfer's in days, and the alerts wait for each accordingly.
SUBMITTED_KEYS = tuple((rail.value, method.value) for rail in RailKind for method in PayoutMethod)


@dataclass(frozen=True, slots=True)
class ReconcileMetrics:
    """The reconciler's metrics and the registry that exposes them."""

    registry: CollectorRegistry
    breaks_open: Gauge  # settle_reconcile_breaks_open{type}: open breaks stored, by type
    oldest_open: Gauge  # settle_reconcile_oldest_open_break_seconds: since its first_seen
    last_success: Gauge  # settle_reconcile_last_success_timestamp_seconds: the heartbeat
    healed: Counter  # settle_reconcile_healed_total: breaks healed from the rail's proof
    runs: Counter  # settle_reconcile_runs_total{kind,outcome}: runs this process made
    objects_read: Counter  # settle_reconcile_objects_read_total{source}: rows the runs read
    out_of_scope: Counter  # settle_reconcile_out_of_scope_objects_total{kind}: not settle's
    run_seconds: Histogram  # settle_reconcile_run_seconds{kind}: one run, start to finish
    lock_held: Gauge  # settle_reconcile_lock_held: 1 while this replica is the reconciler
    oldest_submitted: Gauge  # settle_settlement_oldest_submitted_seconds{rail,method}
    accepted_to_paid: Histogram  # settle_settlement_accepted_to_paid_seconds: paid by a heal
    submitted_keys: set[tuple[str, str]]  # every (rail, method) told so far: reset to 0

    def set_oldest_submitted(self, ages: Mapping[tuple[str, str], float]) -> None:
        """Set each (rail, method)'s oldest submitted age in seconds: those not in `ages`, and
        those it holds no longer, to 0."""
        self.submitted_keys.update(ages)
        for rail, method in self.submitted_keys:
            age = max(ages.get((rail, method), 0.0), 0.0)
            self.oldest_submitted.labels(rail=rail, method=method).set(age)


def create_metrics(registry: CollectorRegistry | None = None) -> ReconcileMetrics:
    """Register the reconciler's metrics on `registry` (default: a new one) and return them."""
    r = registry if registry is not None else CollectorRegistry()
    breaks_open = Gauge(
        "settle_reconcile_breaks_open",
        "Open reconciliation breaks, by type.",
        ["type"],
        registry=r,
    )
    runs = Counter(
        "settle_reconcile_runs_total",
        "Reconciliation runs by kind and outcome.",
        ["kind", "outcome"],
        registry=r,
    )
    objects_read = Counter(
        "settle_reconcile_objects_read_total",
        "Rows reconciliation runs read, by source.",
        ["source"],
        registry=r,
    )
    return ReconcileMetrics(
        registry=r,
        breaks_open=with_children(breaks_open, type=[kind.value for kind in BreakType]),
        oldest_open=Gauge(
            "settle_reconcile_oldest_open_break_seconds",
            "Age of the oldest open break (0 when none is open).",
            registry=r,
        ),
        last_success=Gauge(
            "settle_reconcile_last_success_timestamp_seconds",
            "When the latest completed run finished (Unix time; 0 if none has).",
            registry=r,
        ),
        healed=Counter(
            "settle_reconcile_healed_total", "Breaks healed from the rail's proof.", registry=r
        ),
        runs=with_children(runs, kind=[k.value for k in RunKind], outcome=RUN_OUTCOMES),
        objects_read=with_children(objects_read, source=SOURCES),
        out_of_scope=_out_of_scope(r),
        run_seconds=Histogram(
            "settle_reconcile_run_seconds",
            "Duration of one reconciliation run.",
            ["kind"],
            buckets=RUN_BUCKETS,
            registry=r,
        ),
        lock_held=Gauge(
            "settle_reconcile_lock_held",
            "1 while this replica holds the reconciler lock.",
            registry=r,
        ),
        oldest_submitted=_oldest_submitted(r),
        accepted_to_paid=accepted_to_paid_histogram(r),
        submitted_keys=set(SUBMITTED_KEYS),
    )


def _oldest_submitted(r: CollectorRegistry) -> Gauge:
    """settle_settlement_oldest_submitted_seconds{rail,method}, each known pair at 0."""
    gauge = Gauge(
        "settle_settlement_oldest_submitted_seconds",
        "Time the oldest settlement still submitted has been so, by rail and method (0 when "
        "none is).",
        ["rail", "method"],
        registry=r,
    )
    for rail, method in SUBMITTED_KEYS:
        gauge.labels(rail=rail, method=method)
    return gauge


def _out_of_scope(r: CollectorRegistry) -> Counter:
    """settle_reconcile_out_of_scope_objects_total{kind}, every kind at 0 from the start."""
    counter = Counter(
        "settle_reconcile_out_of_scope_objects",
        "Rail objects runs read that are not settle's (another system's), by kind.",
        ["kind"],
        registry=r,
    )
    return with_children(counter, kind=[m.value for m in PayoutMethod])
