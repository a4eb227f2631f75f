"""Each Kubernetes workload of each overlay, as `kubectl kustomize` renders it, starts in
production mode with exactly what its manifests give it: the ConfigMaps it reads, and its own
Secret's keys filled with values shaped like a real deployment's. Production mode refuses
each service with any one of those keys missing, so no workload holds a secret it does not
need, nor lacks one it does."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from services.domain.errors import ConfigError
from services.platform.config import Deployment
from services.platform.service_settings import SERVICES
from services.platform.settings import load_settings
from tests.unit.k8s_render import K8S, OVERLAYS, docs, image_name, workloads

# The workloads that run settle (the service-role Job runs psql).
SETTLE_WORKLOADS = (
    "settle-console",
    "settle-inbox",
    "settle-ledger",
    "settle-migrate",
    "settle-reconciler",
    "settle-relay",
)
# What each Secret key holds in a real deployment (deploy/k8s/README.md): long random values,
# the services' own database role over verified TLS, a Kafka user per workload.
VALUES = {
    "SETTLE_DATABASE_URL": "postgresql+asyncpg://settle_app:0123456789abcdef@settle-db:5432/"
    "settle?sslmode=verify-full&sslrootcert=/etc/settle/postgres-ca/ca.crt",
    "STRIPE_API_KEY": "sk_live_0123456789abcdefghij",
    "STRIPE_WEBHOOK_SECRET": "whsec_0123456789abcdefghij",
    "SETTLE_API_TOKENS": "acme:0123456789abcdefghij",
    "SETTLE_OPERATOR_TOKENS": "ops:jihgfedcba9876543210",
    "SETTLE_COMMAND_SIGNING_SECRETS": "acme:abcdefghij0123456789",
    "SETTLE_KAFKA_SASL_USERNAME": "settle-workload",
    "SETTLE_KAFKA_SASL_PASSWORD": "0123456789abcdefghijklmn",
}


def _settle_workloads(overlay: str) -> dict[str, dict[str, Any]]:
    """The settle container of each Deployment and Job of the overlay, by workload name."""
    found = {}
    for name, doc in workloads(overlay).items():
        (container,) = doc["spec"]["template"]["spec"]["containers"]
        if image_name(container["image"])[1] == "settle":
            found[name] = container
    return found


def _config_maps(overlay: str) -> dict[str, dict[str, str]]:
    return {
        name: {k: str(v) for k, v in doc["data"].items()}
        for name, doc in docs(overlay, "ConfigMap").items()
    }


def _environment(overlay: str, container: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The container's environment, and the variables of it that come from its Secret."""
    maps = _config_maps(overlay)
    env: dict[str, str] = {}
    for source in container["envFrom"]:
        env |= maps[source["configMapRef"]["name"]]
    secret = [e["name"] for e in container["env"] if "valueFrom" in e]
    return env | {name: VALUES[name] for name in secret}, secret


@pytest.fixture(autouse=True)
def _no_process_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    # load_settings counts a variable of the process environment as given.
    for name in list(os.environ):
        if name.upper().startswith(("SETTLE_", "STRIPE_")):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_service_is_checked(overlay: str) -> None:
    assert set(_settle_workloads(overlay)) == set(SETTLE_WORKLOADS)
    commands = {c["args"][0] for c in _settle_workloads(overlay).values()}
    assert commands == {"migrate", "ledger", "relay", "inbox", "reconciler", "console"}


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("name", SETTLE_WORKLOADS)
def test_each_workload_starts_in_production_mode_with_only_its_own_secrets(
    overlay: str, name: str
) -> None:
    container = _settle_workloads(overlay)[name]
    service = container["args"][0]
    env, secret = _environment(overlay, container)
    settings = load_settings(env, kind=SERVICES[service])  # raises ConfigError naming the variable
    assert settings.env is Deployment.PRODUCTION
    for variable in secret:
        with pytest.raises(ConfigError) as refused:
            load_settings({k: v for k, v in env.items() if k != variable}, kind=SERVICES[service])
        assert refused.value.variable == variable, f"{name} holds {variable} without need"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_documented_database_url_verifies_the_server_against_the_mounted_ca(
    overlay: str,
) -> None:
    (url,) = re.findall(r"postgresql\+asyncpg://settle_app:\S+", (K8S / "README.md").read_text())
    query = parse_qs(urlsplit(url).query)
    assert query["sslmode"] == ["verify-full"]
    (ca,) = query["sslrootcert"]
    for name, container in _settle_workloads(overlay).items():
        mounts = [m for m in container["volumeMounts"] if m["mountPath"] == str(Path(ca).parent)]
        assert [m["readOnly"] for m in mounts] == [True], name
