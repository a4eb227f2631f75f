"""Compose's Prometheus scrapes every settle service on the admin port Compose runs it with
and loads the alert rules mounted beside its config; Compose's Grafana is given the
Prometheus datasource under the uid the dashboards query, and the dashboards where its
provisioning looks for them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tools.infra.procs import tool

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
OBSERVABILITY = DEPLOY / "observability"
PROVISIONING = OBSERVABILITY / "grafana" / "provisioning"
# The option that sets the port each service serves /metrics on.
METRICS_OPTION = {
    "ledger": "--admin-port",
    "inbox": "--admin-port",
    "relay": "--metrics-port",
    "reconciler": "--port",
    "console": "--port",
}
# The exporters Prometheus scrapes beside the services: Compose service and its port.
EXPORTERS = {"postgres": ("postgres-exporter", 9187), "kafka": ("kafka-exporter", 9308)}


def _compose() -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    return services


def _mounts(service: str) -> dict[str, str]:
    """Path in the container -> path on the host (relative to deploy/) of bind mounts."""
    found = {}
    for volume in _compose()[service]["volumes"]:
        source, target = volume.split(":")[:2]
        if source.startswith("./"):
            found[target] = source
    return found


def test_prometheus_scrapes_each_service_on_its_admin_port() -> None:
    config = yaml.safe_load((OBSERVABILITY / "prometheus.yml").read_text())
    scraped, exporters = {}, {}
    for job in config["scrape_configs"]:
        if "static_configs" in job:
            (static,) = job["static_configs"]
            (target,) = static["targets"]
            host, port = target.split(":")
            exporters[job["job_name"]] = (host, int(port))
            continue
        (sd,) = job["dns_sd_configs"]
        scraped[job["job_name"]] = (sd["names"], sd["port"])
    assert exporters == EXPORTERS
    assert {host for host, _ in EXPORTERS.values()} <= set(_compose())
    expected = {}
    for service, option in METRICS_OPTION.items():
        command = _compose()[service]["command"]
        expected[service] = ([service], int(command[command.index(option) + 1]))
    assert scraped == expected


def test_prometheus_loads_the_alert_rules_and_its_config_is_valid() -> None:
    config = yaml.safe_load((OBSERVABILITY / "prometheus.yml").read_text())
    mounts = _mounts("prometheus")
    command = _compose()["prometheus"]["command"]
    (config_path,) = [a.split("=", 1)[1] for a in command if a.startswith("--config.file=")]
    assert mounts[config_path] == "./observability/prometheus.yml"
    for rules in config["rule_files"]:
        assert mounts[str(Path(config_path).parent / rules)] == f"./observability/{rules}"
    promtool = tool("promtool", "prometheus", "Prometheus's config is checked by promtool")
    done = subprocess.run(
        [promtool, "check", "config", "prometheus.yml"],
        cwd=OBSERVABILITY,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_prometheus_alerts_through_compose_alertmanager_by_severity() -> None:
    config = yaml.safe_load((OBSERVABILITY / "prometheus.yml").read_text())
    (manager,) = config["alerting"]["alertmanagers"]
    (static,) = manager["static_configs"]
    assert static["targets"] == ["alertmanager:9093"]
    command = _compose()["alertmanager"]["command"]
    (path,) = [a.split("=", 1)[1] for a in command if a.startswith("--config.file=")]
    assert _mounts("alertmanager")[path] == "./observability/alertmanager.yml"
    routes = yaml.safe_load((OBSERVABILITY / "alertmanager.yml").read_text())["route"]["routes"]
    by_severity = {r["matchers"][0]: r["receiver"] for r in routes}
    assert by_severity == {'severity="page"': "pager", 'severity="ticket"': "tickets"}


def test_grafana_is_provisioned_with_the_datasource_and_dashboards() -> None:
    mounts = _mounts("grafana")
    assert mounts["/etc/grafana/provisioning"] == "./observability/grafana/provisioning"
    datasources = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yaml").read_text())
    (datasource,) = datasources["datasources"]
    assert datasource["url"] == "http://prometheus:9090"
    queried = set()
    for path in (OBSERVABILITY / "dashboards").glob("*.json"):
        for panel in json.loads(path.read_text())["panels"]:
            queried |= {t["datasource"]["uid"] for t in panel.get("targets", [])}
    assert queried == {datasource["uid"]}
    providers = yaml.safe_load((PROVISIONING / "dashboards" / "settle.yaml").read_text())
    (provider,) = providers["providers"]
    assert mounts[provider["options"]["path"]] == "./observability/dashboards"
