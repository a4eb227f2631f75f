"""The production manifests in deploy/ parse, every settle command they run exists with the
options they pass (a renamed flag cannot silently break a deployment), and each workload is
hardened: pinned images, a locked-down pod, only its own secrets, only its public port behind
a Service, and NetworkPolicies that let in and out only what it needs."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from tests.unit.test_deploy_image import base_images
from tools.cli import cli

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _container_args(doc: dict[str, Any]) -> list[list[str]]:
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    return [c["args"] for c in pod.get("containers", []) if c.get("image", "").startswith("settle")]


def _commands() -> list[tuple[str, list[str]]]:
    found = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            found += [(path.name, args) for args in _container_args(doc)]
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        if "command" in service and service.get("image", "").startswith("settle"):
            found.append((f"compose:{name}", service["command"]))
    return found


def test_every_settle_service_is_deployed() -> None:
    deployed = {args[0] for _, args in _commands()}
    assert {"migrate", "ledger", "relay", "inbox", "reconciler", "console"} <= deployed


@pytest.mark.parametrize(("where", "args"), _commands(), ids=lambda v: str(v))
def test_deployed_commands_parse(where: str, args: list[str]) -> None:
    ctx = click.Context(cli)
    command = cli.get_command(ctx, args[0])
    assert command is not None, f"{where}: no command {args[0]!r}"
    command.make_context(args[0], list(args[1:]), parent=ctx)  # raises on unknown options


# --- hardening: what each workload may reach, hold and do -----------------------------------

K8S = DEPLOY / "k8s"
VERSION = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]["version"]
DB, API, OPS = "SETTLE_DATABASE_URL", "SETTLE_API_TOKENS", "SETTLE_OPERATOR_TOKENS"
STRIPE, WEBHOOK = "STRIPE_API_KEY", "STRIPE_WEBHOOK_SECRET"
SIGNING = "SETTLE_COMMAND_SIGNING_SECRETS"
KAFKA = {"SETTLE_KAFKA_SASL_USERNAME", "SETTLE_KAFKA_SASL_PASSWORD"}
SECRETS = {DB, API, OPS, STRIPE, WEBHOOK, SIGNING, *KAFKA}
# Each workload's secrets: exactly what its code reads (the sections of its settings class, its
# database URL, its Kafka login where it uses Kafka), nothing another workload holds for it.
SECRETS_OF = {
    "settle-ledger": {DB, API, SIGNING, *KAFKA},
    "settle-inbox": {DB, WEBHOOK, OPS},
    "settle-relay": {DB, STRIPE, *KAFKA},
    "settle-reconciler": {DB, STRIPE, OPS},
    "settle-console": {DB, STRIPE, OPS},
    "settle-migrate": {DB, *KAFKA},
    "settle-service-role": {"PGPASSWORD"},  # psql, as the schema's owner
}
# Kafka is reached on its SASL_SSL port only, the one kafka.yaml's bootstrap names.
(_KAFKA,) = yaml.safe_load_all((K8S / "kafka.yaml").read_text())
KAFKA_PORTS = {
    int(a.rsplit(":", 1)[1]) for a in _KAFKA["data"]["SETTLE_KAFKA_BOOTSTRAP"].split(",")
}
PG, RAIL = {5432}, {443}
EGRESS_PORTS = {
    "settle-ledger": PG | KAFKA_PORTS,
    "settle-inbox": PG,
    "settle-relay": PG | KAFKA_PORTS | RAIL,
    "settle-reconciler": PG | RAIL,
    "settle-console": PG | RAIL,
    "settle-migrate": PG | KAFKA_PORTS,
    "settle-service-role": PG,
}
# Where every workload finds the CA that signs the database's certificate: the directory of
# the sslrootcert= its database URL names (README.md).
POSTGRES_CA = "/etc/settle/postgres-ca"
PROMETHEUS = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
}
INGRESS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}
TENANTS = {"namespaceSelector": {"matchLabels": {"settle.io/tenant": "true"}}}
# Who may call each public port; a workload missing here has none.
PUBLIC_CALLERS = {
    "settle-ledger": [INGRESS, TENANTS],
    "settle-inbox": [INGRESS],
    "settle-console": [INGRESS],  # an ingress for operators only
}
# Workloads whose one port serves people, not machines: no admin port, nothing to scrape.
ONE_PORT = {"settle-console"}


def _docs(kind: str) -> dict[str, dict[str, Any]]:
    found = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc["kind"] == kind:
                found[doc["metadata"]["name"]] = doc
    return found


def _workloads() -> dict[str, dict[str, Any]]:
    return {**_docs("Deployment"), **_docs("Job")}


def _option(args: list[str], name: str) -> int | None:
    return int(args[args.index(name) + 1]) if name in args else None


def _ports(workload: dict[str, Any]) -> dict[str, int]:
    """Container port by name: `http` the public port, `admin` the admin port."""
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def _compose_settle() -> dict[str, dict[str, Any]]:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    return {n: s for n, s in services.items() if s.get("image", "").startswith("settle")}


def test_every_image_is_pinned_and_settle_to_the_package_version() -> None:
    images = [
        c["image"]
        for w in _workloads().values()
        for c in w["spec"]["template"]["spec"]["containers"]
    ]
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    images += [s["image"] for s in compose.values()]
    for image in images:
        name, _, tag = image.partition(":")
        assert tag and tag != "latest" and any(c.isdigit() for c in tag), image
        assert name != "settle" or tag == VERSION, image
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    (base,) = base_images()  # its digest: tests/unit/test_deploy_image.py
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-[a-z-]+@sha256:[0-9a-f]{64}", base), base
    (user,) = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) > 0, "a numeric non-root user, so runAsNonRoot can check"


@pytest.mark.parametrize("name", sorted(SECRETS_OF))
def test_each_pod_runs_locked_down_with_only_its_own_secrets(name: str) -> None:
    pod = _workloads()[name]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    context = pod["securityContext"]
    assert context["runAsNonRoot"] is True and context["runAsUser"] > 0
    assert context["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert all("secretRef" not in source for source in container.get("envFrom", []))
    refs = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e]
    assert {r["name"] for r in refs} == {name}, "a Secret of its own"
    assert {r["key"] for r in refs} == SECRETS_OF[name]
    for config in _docs("ConfigMap").values():
        assert not SECRETS & set(config["data"]), "no secret in a shared ConfigMap"
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == POSTGRES_CA]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"] == {"secretName": "settle-postgres-ca"} and mount["readOnly"]


def test_services_expose_only_the_public_ports() -> None:
    workloads = _workloads()
    services = _docs("Service")
    assert set(services) == set(PUBLIC_CALLERS), "a workload with no public port has no Service"
    for name, service in services.items():
        (container,) = workloads[name]["spec"]["template"]["spec"]["containers"]
        ports = _ports(workloads[name])
        assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
        assert ports["http"] == _option(container["args"], "--port")
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
        if name in ONE_PORT:
            assert set(ports) == {"http"}, name
            continue
        assert ports["admin"] == _option(container["args"], "--admin-port") != ports["http"]
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}


def test_prometheus_scrapes_each_admin_port() -> None:
    for name, workload in _docs("Deployment").items():
        if name in ONE_PORT:
            assert "annotations" not in workload["spec"]["template"]["metadata"], name
            continue
        annotations = workload["spec"]["template"]["metadata"]["annotations"]
        assert int(annotations["prometheus.io/port"]) == _ports(workload)["admin"], name


@pytest.mark.parametrize("name", sorted(SECRETS_OF))
def test_network_policies_let_in_and_out_only_what_each_workload_needs(name: str) -> None:
    policies = _docs("NetworkPolicy")
    deny = policies["settle-default-deny"]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    spec = policies[name]["spec"]
    assert spec["podSelector"] == {"matchLabels": {"app": name}}
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    ports = _ports(_workloads()[name])
    allowed = {}
    for rule in spec.get("ingress", []):
        for port in rule["ports"]:
            allowed[port["port"]] = rule["from"]
    expected = {ports["admin"]: [PROMETHEUS]} if "admin" in ports else {}
    if name in PUBLIC_CALLERS:
        expected[ports["http"]] = PUBLIC_CALLERS[name]
    assert allowed == expected
    egress = {p["port"] for rule in spec["egress"] for p in rule["ports"]}
    assert egress == EGRESS_PORTS[name]


def test_compose_publishes_only_public_ports_and_runs_locked_down() -> None:
    services = _compose_settle()
    for name, service in services.items():
        assert service["user"].split(":")[0] != "0" and service["read_only"] is True, name
        assert service["cap_drop"] == ["ALL"], name
        assert "no-new-privileges:true" in service["security_opt"], name
        published = [str(p).rsplit(":", 1)[-1] for p in service.get("ports", [])]
        public = _option(service["command"], "--port")
        assert published == ([str(public)] if name in ("ledger", "inbox", "console") else []), name
        if name == "console":  # for operators on this host only
            assert service["ports"] == [f"127.0.0.1:{public}:{public}"]
        held = SECRETS & set(service["environment"]) - {DB}
        assert held == SECRETS_OF[f"settle-{name}"] - {DB}, name
