"""settle_inbox_apply_lag_seconds: from a webhook received to its event applied, observed once
the apply committed. No I/O: `committed` is the worker's step after the transaction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.domain.rail_event import InboxStatus
from services.inbox.apply import Outcome
from services.inbox.metrics import create_metrics
from services.inbox.store import StoredEvent
from services.inbox.worker import InboxWorker

RECEIVED = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
LAG = "settle_inbox_apply_lag_seconds"


def stored(n: int, received_at: datetime = RECEIVED) -> StoredEvent:
    return StoredEvent(
        n, f"evt_{n}", "transfer.paid", None, None, 0, InboxStatus.RECEIVED, received_at
    )


def test_an_applied_event_observes_the_time_since_its_webhook_was_received() -> None:
    metrics = create_metrics()
    worker = InboxWorker(None, metrics, clock=lambda: RECEIVED + timedelta(seconds=90))  # type: ignore[arg-type]
    applied = Outcome(InboxStatus.APPLIED, None)
    worker.committed([stored(1), stored(2, RECEIVED + timedelta(seconds=89))], [applied] * 2)
    sample = metrics.registry.get_sample_value
    assert sample(f"{LAG}_count") == 2
    assert sample(f"{LAG}_sum") == 91
    assert sample(f"{LAG}_bucket", {"le": "1.0"}) == 1
    assert sample(f"{LAG}_bucket", {"le": "60.0"}) == 1
    assert sample(f"{LAG}_bucket", {"le": "300.0"}) == 2


def test_events_not_applied_observe_no_apply_lag() -> None:
    metrics = create_metrics()
    worker = InboxWorker(None, metrics, clock=lambda: RECEIVED + timedelta(seconds=5))  # type: ignore[arg-type]
    outcomes = [
        Outcome(InboxStatus.PARKED, "no settlement yet"),
        Outcome(InboxStatus.IGNORED, "already there"),
    ]
    worker.committed([stored(1), stored(2)], outcomes)
    assert metrics.registry.get_sample_value(f"{LAG}_count") == 0
