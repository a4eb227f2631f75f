"""The Grafana dashboards committed under deploy/observability/dashboards/ are exactly what
dashboards.py makes (regenerate with `python deploy/observability/dashboards.py`), every
metric a panel queries or an alert reads is one the services register, and every query is
valid PromQL; every metric an alert reads is one the services register, or one of those
listed here that Prometheus or an exporter of deploy/compose.yaml provides."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path
from types import ModuleType

import yaml
from prometheus_client import CollectorRegistry

from services.apps.console import metrics_registry as console_metrics
from services.inbox.metrics import create_metrics as inbox_metrics
from services.ledger.metrics import create_metrics as ledger_metrics
from services.reconcile.metrics import create_metrics as reconcile_metrics
from services.relay.metrics import create_metrics as relay_metrics
from tools.infra.procs import tool

OBSERVABILITY = Path(__file__).resolve().parents[2] / "deploy" / "observability"
SAMPLE_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}
# What the alerts read that no settle service registers, and who provides it.
PROVIDED = {
    "up": "Prometheus, for every scrape target",
    "pg_up": "postgres_exporter",
    "pg_stat_database_numbackends": "postgres_exporter",
    "pg_settings_max_connections": "postgres_exporter",
    "pg_replication_lag_seconds": "postgres_exporter",
    "kafka_brokers": "kafka_exporter",
    "kafka_topic_partition_under_replicated_partition": "kafka_exporter",
}
# PromQL words that are not metric names: keywords, and functions (followed by "(").
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left"}
KEYWORDS |= {"group_right", "offset", "bool"}


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dashboards", OBSERVABILITY / "dashboards.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _queries() -> list[str]:
    found = []
    for path in sorted((OBSERVABILITY / "dashboards").glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            found += [target["expr"] for target in panel.get("targets", [])]
    return found


def _registered() -> set[str]:
    """Every series name the services expose (a counter's _total, a histogram's _bucket...)."""
    names = set()
    # One registry per service, as each runs in its own process (some metrics, such as the
    # consumer lag, are registered by more than one service).
    for create in (ledger_metrics, relay_metrics, inbox_metrics, reconcile_metrics):
        registry = CollectorRegistry()
        create(registry)
        names |= _names(registry)
    return names | _names(console_metrics())


def _names(registry: CollectorRegistry) -> set[str]:
    found = set()
    for family in registry.collect():
        found |= {family.name + s for s in SAMPLE_SUFFIXES.get(family.type, ("",))}
    return found


def _metric_names(expr: str) -> set[str]:
    """The metric names `expr` reads: its words less label matchers and lists, durations,
    strings, numbers, keywords and functions."""
    expr = re.sub(r'"[^"]*"', "", expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\boffset\s+\w+", "", expr)
    words = set(re.findall(r"\b([a-zA-Z_:][\w:]*)\b(?!\s*\()", expr))
    return words - KEYWORDS


def test_the_committed_dashboards_are_what_the_code_makes() -> None:
    committed = {p.name: p.read_text() for p in (OBSERVABILITY / "dashboards").glob("*.json")}
    assert committed == _generator().render(), "run python deploy/observability/dashboards.py"


def test_every_metric_a_panel_queries_is_registered() -> None:
    queried = {name for expr in _queries() for name in re.findall(r"\bsettle_\w+", expr)}
    assert len(queried) >= 20
    assert queried - _registered() == set()


def test_every_query_is_valid_promql(tmp_path: Path) -> None:
    # promtool checks expressions as recording rules: one per panel query.
    rules = [{"record": f"settle:panel_{i}", "expr": e} for i, e in enumerate(_queries())]
    path = tmp_path / "panels.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    promtool = tool("promtool", "prometheus", "the dashboards' queries are checked by promtool")
    done = subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_metric_an_alert_reads_is_registered_or_provided() -> None:
    rules = yaml.safe_load((OBSERVABILITY / "alerts.yaml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    read = {name for expr in exprs for name in _metric_names(expr)}
    assert len(read) >= 20
    assert {name for name in read if name.startswith("settle_")} <= read & _registered()
    assert read - _registered() - set(PROVIDED) == set()
    assert set(PROVIDED) <= read, "list only what an alert reads"
