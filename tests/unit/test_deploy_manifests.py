"""The production manifests in deploy/ parse, every settle command they run exists with the
options they pass (a renamed flag cannot silently break a deployment), and each workload is
hardened: pinned images, a locked-down pod, only its own secrets, only its public port behind
a Service and an Ingress, probes on the admin port, replicas spread over nodes beside their
disruption budgets, Prometheus scraping each admin port, and NetworkPolicies that let in and
out only what it needs. The Kubernetes checks run on each overlay as rendered by
`kubectl kustomize` (tests/unit/k8s_render.py), what a cluster is given."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from tests.unit.k8s_render import OVERLAYS, docs, image_name, rendered, workloads
from tests.unit.test_deploy_image import base_images
from tools.cli import cli

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _container_args(doc: dict[str, Any]) -> list[list[str]]:
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec", {})
    containers = pod.get("containers", [])
    return [c["args"] for c in containers if image_name(c.get("image", ""))[1] == "settle"]


def _compose_commands() -> list[tuple[str, list[str]]]:
    found = []
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        if "command" in service and service.get("image", "").startswith("settle"):
            found.append((f"compose:{name}", service["command"]))
    return found


def _k8s_commands(overlay: str) -> list[tuple[str, list[str]]]:
    return [
        (f"{overlay}:{doc['metadata']['name']}", args)
        for doc in rendered(overlay)
        for args in _container_args(doc)
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_settle_service_is_deployed(overlay: str) -> None:
    services = {"migrate", "ledger", "relay", "inbox", "reconciler", "console"}
    assert services <= {args[0] for _, args in _k8s_commands(overlay)}
    assert services <= {args[0] for _, args in _compose_commands()}


@pytest.mark.parametrize(("where", "args"), _compose_commands(), ids=lambda v: str(v))
def test_deployed_commands_parse(where: str, args: list[str]) -> None:
    _parse(where, args)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_deployed_k8s_commands_parse(overlay: str) -> None:
    for where, args in _k8s_commands(overlay):
        _parse(where, args)


def _parse(where: str, args: list[str]) -> None:
    ctx = click.Context(cli)
    command = cli.get_command(ctx, args[0])
    assert command is not None, f"{where}: no command {args[0]!r}"
    command.make_context(args[0], list(args[1:]), parent=ctx)  # raises on unknown options


# --- hardening: what each workload may reach, hold and do -----------------------------------

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
    "settle-inbox": {DB, WEBHOOK},  # no operator's token: operators use the reconciler's API
    "settle-relay": {DB, STRIPE, *KAFKA},
    "settle-reconciler": {DB, STRIPE, OPS},
    "settle-console": {DB, STRIPE, OPS},
    "settle-migrate": {DB, *KAFKA},
    "settle-service-role": {"PGPASSWORD"},  # psql, as the schema's owner
}
PG, RAIL = {5432}, {443}
# Where every workload finds the CA that signs the database's certificate: the directory of
# the sslrootcert= its database URL names (deploy/k8s/README.md).
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
# Workloads whose one port serves people, not machines: no admin port; Prometheus scrapes
# /metrics on that one port.
ONE_PORT = {"settle-console"}
# The job label each Deployment's metrics carry: Compose's job names (prometheus.yml), which
# the alert rules and the dashboards select by.
JOBS = {
    job["job_name"]: job["dns_sd_configs"][0]["port"]
    for job in yaml.safe_load((DEPLOY / "observability" / "prometheus.yml").read_text())[
        "scrape_configs"
    ]
    if "dns_sd_configs" in job
}
# What a probe may take before it counts as failed, and how many failures restart a pod.
MIN_TIMEOUT, MIN_FAILURES = 3, 3
WORKLOADS = sorted(SECRETS_OF)
CASES = [(overlay, name) for overlay in OVERLAYS for name in WORKLOADS]


def _kafka_ports(overlay: str) -> set[int]:
    """Kafka is reached on its SASL_SSL port only, the one kafka.yaml's bootstrap names."""
    bootstrap = docs(overlay, "ConfigMap")["settle-kafka"]["data"]["SETTLE_KAFKA_BOOTSTRAP"]
    return {int(address.rsplit(":", 1)[1]) for address in bootstrap.split(",")}


def _egress_ports(overlay: str, name: str) -> set[int]:
    kafka = _kafka_ports(overlay)
    return {
        "settle-ledger": PG | kafka,
        "settle-inbox": PG,
        "settle-relay": PG | kafka | RAIL,
        "settle-reconciler": PG | RAIL,
        "settle-console": PG | RAIL,
        "settle-migrate": PG | kafka,
        "settle-service-role": PG,
    }[name]


def _option(args: list[str], name: str) -> int | None:
    return int(args[args.index(name) + 1]) if name in args else None


def _ports(workload: dict[str, Any]) -> dict[str, int]:
    """Container port by name: `http` the public port, `admin` the admin port."""
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    return {p["name"]: p["containerPort"] for p in container.get("ports", [])}


def _compose_settle() -> dict[str, dict[str, Any]]:
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    return {n: s for n, s in services.items() if s.get("image", "").startswith("settle")}


def _images(overlay: str) -> list[str]:
    return [
        c["image"]
        for w in workloads(overlay).values()
        for c in w["spec"]["template"]["spec"]["containers"]
    ]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_image_is_pinned_and_settle_to_the_package_version(overlay: str) -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    images = _images(overlay) + [s["image"] for s in compose.values()]
    assert {image_name(i)[1] for i in _images(overlay)} >= {"settle"}
    for image in images:
        _, name, tag = image_name(image)
        assert tag and tag != "latest" and any(c.isdigit() for c in tag), image
        assert name != "settle" or tag == VERSION, image
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    (base,) = base_images()  # its digest: tests/unit/test_deploy_image.py
    assert re.fullmatch(r"python:\d+\.\d+\.\d+-[a-z-]+@sha256:[0-9a-f]{64}", base), base
    (user,) = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) > 0, "a numeric non-root user, so runAsNonRoot can check"


@pytest.mark.parametrize(("overlay", "name"), CASES)
def test_each_pod_runs_locked_down_with_only_its_own_secrets(overlay: str, name: str) -> None:
    pod = workloads(overlay)[name]["spec"]["template"]["spec"]
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
    for config in docs(overlay, "ConfigMap").values():
        assert not SECRETS & set(config["data"]), "no secret in a shared ConfigMap"
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == POSTGRES_CA]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"] == {"secretName": "settle-postgres-ca"} and mount["readOnly"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_services_expose_only_the_public_ports(overlay: str) -> None:
    deployed = workloads(overlay)
    services = docs(overlay, "Service")
    assert set(services) == set(PUBLIC_CALLERS), "a workload with no public port has no Service"
    for name, service in services.items():
        (container,) = deployed[name]["spec"]["template"]["spec"]["containers"]
        ports = _ports(deployed[name])
        assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
        assert ports["http"] == _option(container["args"], "--port")
        if name in ONE_PORT:
            assert set(ports) == {"http"}, name
            continue
        assert ports["admin"] == _option(container["args"], "--admin-port") != ports["http"]
        assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "admin"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_ask_the_admin_port_with_room_to_answer(overlay: str) -> None:
    """Liveness on the admin port (a busy public port must not get a pod restarted), on the
    one port of a workload that has no other; every probe with time to answer and several
    failures before it counts."""
    for name, deployment in docs(overlay, "Deployment").items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        port = "http" if name in ONE_PORT else "admin"
        assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}, name
        assert port in _ports(deployment), name
        assert container["readinessProbe"]["httpGet"]["port"] == port, name
        for probe in (container["livenessProbe"], container["readinessProbe"]):
            assert probe["timeoutSeconds"] >= MIN_TIMEOUT, name
            assert probe["failureThreshold"] >= MIN_FAILURES, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_replicas_are_spread_over_nodes_beside_their_disruption_budgets(overlay: str) -> None:
    """A node drain takes one replica at a time (the budget) and never the last one: the
    replicas are on different nodes, and the evicted one can be placed again (a cordoned node
    is left out of the count)."""
    budgets = docs(overlay, "PodDisruptionBudget")
    replicated = {n: d for n, d in docs(overlay, "Deployment").items() if d["spec"]["replicas"] > 1}
    assert {"settle-ledger", "settle-relay"} <= set(replicated)
    assert set(budgets) == set(replicated)
    for name, deployment in replicated.items():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        budget = budgets[name]["spec"]
        assert budget["selector"]["matchLabels"].items() <= labels.items(), name
        assert budget["minAvailable"] >= 1, name
        spread = deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
        (by_node,) = [c for c in spread if c["topologyKey"] == "kubernetes.io/hostname"]
        assert by_node["whenUnsatisfiable"] == "DoNotSchedule" and by_node["maxSkew"] == 1, name
        assert by_node["nodeTaintsPolicy"] == "Honor", name
        for constraint in spread:
            assert constraint["labelSelector"]["matchLabels"].items() <= labels.items(), name
    (reconciler,) = [d for n, d in docs(overlay, "Deployment").items() if n not in replicated]
    assert reconciler["spec"]["strategy"] == {"type": "Recreate"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_jobs_give_up_in_bounded_time(overlay: str) -> None:
    for name, job in docs(overlay, "Job").items():
        assert 1 <= job["spec"]["backoffLimit"] <= 6, name
        assert 0 < job["spec"]["activeDeadlineSeconds"] <= 3600, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_prometheus_scrapes_each_admin_port(overlay: str) -> None:
    """A PodMonitor per Deployment, on the port its NetworkPolicy opens to Prometheus (the
    admin port; the one port of a workload that has no other), under Compose's job name."""
    monitors = docs(overlay, "PodMonitor")
    deployments = docs(overlay, "Deployment")
    assert set(monitors) == set(deployments)
    for name, workload in deployments.items():
        assert "annotations" not in workload["spec"]["template"]["metadata"], name
        (endpoint,) = monitors[name]["spec"]["podMetricsEndpoints"]
        labels = workload["spec"]["template"]["metadata"]["labels"]
        assert monitors[name]["spec"]["selector"]["matchLabels"].items() <= labels.items(), name
        port = "http" if name in ONE_PORT else "admin"
        assert endpoint["port"] == port and endpoint["path"] == "/metrics", name
        (job,) = [r["replacement"] for r in endpoint["relabelings"] if r["targetLabel"] == "job"]
        assert JOBS[job] == _ports(workload)[port], name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_ingresses_reach_only_the_public_ports_over_tls(overlay: str) -> None:
    ingresses = docs(overlay, "Ingress")
    routed = set()
    for name, ingress in ingresses.items():
        (rule,) = ingress["spec"]["rules"]
        (tls,) = ingress["spec"]["tls"]
        assert tls["hosts"] == [rule["host"]] and tls["secretName"], name
        for path in rule["http"]["paths"]:
            backend = path["backend"]["service"]
            assert backend["port"] == {"name": "http"}, name
            routed.add(backend["name"])
    assert routed == set(PUBLIC_CALLERS)
    hosts = [i["spec"]["rules"][0]["host"] for i in ingresses.values()]
    assert len(set(hosts)) == len(hosts), "a host of its own for each"


@pytest.mark.parametrize(("overlay", "name"), CASES)
def test_network_policies_let_in_and_out_only_what_each_workload_needs(
    overlay: str, name: str
) -> None:
    policies = docs(overlay, "NetworkPolicy")
    deny = policies["settle-default-deny"]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    spec = policies[name]["spec"]
    assert spec["podSelector"] == {"matchLabels": {"app": name}}
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    ports = _ports(workloads(overlay)[name])
    allowed: dict[int, list[dict[str, Any]]] = {}
    for rule in spec.get("ingress", []):
        for port in rule["ports"]:
            allowed.setdefault(port["port"], []).extend(rule["from"])
    expected: dict[int, list[dict[str, Any]]] = {}
    if name in PUBLIC_CALLERS:
        expected[ports["http"]] = list(PUBLIC_CALLERS[name])
    scraped = ports["http"] if name in ONE_PORT else ports.get("admin")
    if scraped is not None:
        expected.setdefault(scraped, []).append(PROMETHEUS)
    assert allowed == expected
    egress = {p["port"] for rule in spec["egress"] for p in rule["ports"]}
    assert egress == _egress_ports(overlay, name)


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
