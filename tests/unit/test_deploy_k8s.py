"""Each Kubernetes overlay (deploy/k8s/overlays/*) renders with `kubectl kustomize` and every
resource of it passes kubernetes-validate's strict schemas, but for the Prometheus Operator's
kinds, which it has no schema for: their PrometheusRule is held equal to
deploy/observability/alerts.yaml instead. Each site setting (the PostgreSQL subnet and host,
the hosts, the TLS Secret, the image registry and tag) is written in one file of its overlay,
and reaches every place the rendered manifests use it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils as kubernetes_validate

from tests.unit.k8s_render import (
    BASE,
    K8S,
    OPERATOR_KINDS,
    OVERLAYS,
    ROOT,
    docs,
    rendered,
    rendered_text,
    workloads,
)

OBSERVABILITY = ROOT / "deploy" / "observability"
# The oldest Kubernetes the manifests are for (their fields: topologySpreadConstraints'
# nodeTaintsPolicy and matchLabelKeys) and the newest kubernetes-validate knows.
VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
# What the base holds where an overlay's setting goes: none of it may reach a cluster.
PLACEHOLDERS = ("192.0.2.", ".settle.invalid", "tls-from-site-yaml", "settle-site")


def _generator() -> ModuleType:
    path = OBSERVABILITY / "prometheus_rule.py"
    spec = importlib.util.spec_from_file_location("prometheus_rule", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _site(overlay: str) -> dict[str, str]:
    """The overlay's site settings: site.yaml's ConfigMap settle-site."""
    (site,) = yaml.safe_load_all((K8S / "overlays" / overlay / "site.yaml").read_text())
    assert site["metadata"]["name"] == "settle-site"
    return {k: str(v) for k, v in site["data"].items()}


def _settle_image(overlay: str) -> dict[str, Any]:
    kustomization = yaml.safe_load((K8S / "overlays" / overlay / "kustomization.yaml").read_text())
    (image,) = [i for i in kustomization["images"] if i["name"] == "settle"]
    return {k: str(v) for k, v in image.items()}


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file())


def _holding(files: list[Path], value: str) -> list[Path]:
    """The files that write `value` whole (not as a part of a longer name or address)."""
    whole = re.compile(rf"(?<![\w.-]){re.escape(value)}(?![\w-]|\.\w)")
    return [p for p in files if whole.search(p.read_text())]


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("version", VERSIONS)
def test_each_overlay_renders_and_passes_strict_validation(overlay: str, version: str) -> None:
    kinds = set()
    for doc in rendered(overlay):
        kinds.add(doc["kind"])
        if doc["kind"] in OPERATOR_KINDS:
            continue
        where = f"{overlay}: {doc['kind']}/{doc['metadata']['name']}"
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{where}: {error.message} at {list(error.path)}")
        assert doc["metadata"]["namespace"] == "settle", where
    assert {"Deployment", "Job", "NetworkPolicy", "Ingress"} <= kinds
    assert kinds >= OPERATOR_KINDS, "the operator's kinds are held by the tests below"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_prometheus_rule_holds_the_alert_rules(overlay: str) -> None:
    alerts = yaml.safe_load((OBSERVABILITY / "alerts.yaml").read_text())
    (rule,) = docs(overlay, "PrometheusRule").values()
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == {"groups": alerts["groups"]}, (
        "run python deploy/observability/prometheus_rule.py"
    )


def test_the_committed_prometheus_rule_is_what_the_generator_makes() -> None:
    committed = (BASE / "prometheus-rule.yaml").read_text()
    assert committed == _generator().render(), "run python deploy/observability/prometheus_rule.py"


def test_the_base_lists_every_manifest_beside_it() -> None:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_site_setting_is_written_in_one_file_of_the_overlay(overlay: str) -> None:
    image = _settle_image(overlay)
    registry = image["newName"].rpartition("/")[0]
    assert registry, "the settle image comes from the overlay's registry"
    settings = {**_site(overlay), "registry": registry, "tag": image["newTag"]}
    assert {"postgres_cidr", "ledger_host", "inbox_host", "console_host"} <= set(settings)
    shared = _files(BASE) + _files(K8S / "components")
    for key, value in settings.items():
        holding = _holding(_files(K8S / "overlays" / overlay), value)
        assert len(holding) == 1, f"{overlay}: {key} {value!r} is written in {holding}"
        if key != "tag":  # the version is the package's, named where it is explained
            assert not _holding(shared, value), f"{overlay}: {key} {value!r} in the base"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_site_setting_reaches_every_place_it_is_used(overlay: str) -> None:
    site, image = _site(overlay), _settle_image(overlay)
    text = rendered_text(overlay)
    assert not [p for p in PLACEHOLDERS if p in text], "a base placeholder left in"
    postgres_rules = 0
    for policy in docs(overlay, "NetworkPolicy").values():
        for rule in policy["spec"].get("egress", []):
            if 5432 in {p["port"] for p in rule["ports"]}:
                assert rule["to"] == [{"ipBlock": {"cidr": site["postgres_cidr"]}}]
                postgres_rules += 1
    assert postgres_rules == len(workloads(overlay))
    hosts = {
        "settle-ledger": site["ledger_host"],
        "settle-inbox": site["inbox_host"],
        "settle-console": site["console_host"],
    }
    for name, ingress in docs(overlay, "Ingress").items():
        assert ingress["spec"]["rules"][0]["host"] == hosts[name]
        assert ingress["spec"]["tls"] == [
            {"hosts": [hosts[name]], "secretName": site["tls_secret"]}
        ]
    (psql,) = docs(overlay, "Job")["settle-service-role"]["spec"]["template"]["spec"]["containers"]
    assert {e["name"]: e.get("value") for e in psql["env"]}["PGHOST"] == site["postgres_host"]
    for workload in workloads(overlay).values():
        for container in workload["spec"]["template"]["spec"]["containers"]:
            if "settle" in container["image"]:
                assert container["image"] == f"{image['newName']}:{image['newTag']}"
