"""docs/metrics.md lists every metric the services register, and nothing else: each service's
registry is built the way its app builds it, and every metric name written in services/ is
read from the code too, so a metric registered elsewhere cannot slip past the page."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from services.inbox.metrics import create_metrics as inbox_metrics
from services.ledger.key_cleanup import deleted_keys_counter
from services.ledger.metrics import create_metrics as ledger_metrics
from services.platform.metrics import CONSUMER_LAG
from services.reconcile.metrics import create_metrics as reconcile_metrics
from services.relay.metrics import create_metrics as relay_metrics

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "metrics.md"
# A metric's name as its constructor's first argument, written out in the code.
CONSTRUCTED = re.compile(r"\b(?:Counter|Gauge|Histogram|Summary)\(\s*\"([a-z_]+)\"")
ROW = re.compile(r"^\| `(settle_[a-z_]+)` \| (counter|gauge|histogram) \|", re.MULTILINE)


def scraped_names(registry: CollectorRegistry) -> dict[str, str]:
    """Each metric of `registry` by the name it is scraped as, with its type."""
    return {
        family.name + ("_total" if family.type == "counter" else ""): family.type
        for family in registry.collect()
    }


def registered() -> dict[str, str]:
    ledger = ledger_metrics(tenants=["acme"])
    deleted_keys_counter(ledger.registry)  # app.py registers the cleanup's counter there
    names: dict[str, str] = {}
    for registry in (
        ledger.registry,
        relay_metrics().registry,
        inbox_metrics().registry,
        reconcile_metrics().registry,
    ):
        names.update(scraped_names(registry))
    return names


def written_in_code() -> set[str]:
    names = set()
    for path in (ROOT / "services").rglob("*.py"):
        for name in CONSTRUCTED.findall(path.read_text()):
            names.add(name)
    return names


def documented() -> dict[str, str]:
    return dict(ROW.findall(PAGE.read_text()))


def test_every_metric_a_service_registers_has_a_row_with_its_type() -> None:
    rows = documented()
    for name, kind in registered().items():
        assert name in rows, f"{name} is not listed in docs/metrics.md"
        assert rows[name] == kind, f"{name} is a {kind}, docs/metrics.md says {rows[name]}"


def test_every_metric_named_in_the_code_has_a_row() -> None:
    rows, names = documented(), written_in_code()
    assert "settle_ledger_idempotency_keys_deleted_total" in names  # the scan reads the code
    assert CONSUMER_LAG in rows  # registered through a constant, which the scan cannot read
    for name in names:
        scraped = {name, f"{name}_total"}
        assert scraped & set(rows), f"{name} (services/) is not listed in docs/metrics.md"


def test_every_row_is_a_metric_a_service_registers() -> None:
    assert set(documented()) == set(registered())
