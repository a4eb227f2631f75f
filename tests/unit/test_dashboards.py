"""The Grafana dashboards committed under deploy/observability/dashboards/ are exactly what
dashboards.py makes (regenerate with `python deploy/observability/dashboards.py`), every
metric a panel queries or an alert reads is one the services register, and every query is
valid PromQL."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path
from types import ModuleType

import yaml
from prometheus_client import CollectorRegistry

from services.inbox.metrics import create_metrics as inbox_metrics
from services.ledger.metrics import create_metrics as ledger_metrics
from services.reconcile.metrics import create_metrics as reconcile_metrics
from services.relay.metrics import create_metrics as relay_metrics
from tools.infra.procs import tool

OBSERVABILITY = Path(__file__).resolve().parents[2] / "deploy" / "observability"
SAMPLE_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}


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
        for family in registry.collect():
            names |= {family.name + s for s in SAMPLE_SUFFIXES.get(family.type, ("",))}
    return names


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


def test_every_metric_an_alert_reads_is_registered() -> None:
    rules = yaml.safe_load((OBSERVABILITY / "alerts.yaml").read_text())
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    read = {name for expr in exprs for name in re.findall(r"\bsettle_\w+", expr)}
    assert len(read) >= 8
    assert read - _registered() == set()
