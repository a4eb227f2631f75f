"""The manifests give every workload that uses Kafka SASL_SSL settings, a login from its own
Secret and the CA at the path the settings name; none of them is given a PLAINTEXT listener,
and the workloads that use no Kafka are given nothing of it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from services.adapters.kafka.access import kafka_access
from services.platform.config import KafkaProtocol, SaslMechanism
from services.platform.settings import load_settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KAFKA_USERS = ("migrate", "ledger", "relay")  # the commands whose code builds Kafka clients
LOGIN = {"SETTLE_KAFKA_SASL_USERNAME": "settle", "SETTLE_KAFKA_SASL_PASSWORD": "from-a-secret"}


def _kafka_config() -> dict[str, str]:
    (config,) = yaml.safe_load_all((DEPLOY / "k8s" / "kafka.yaml").read_text())
    return {k: str(v) for k, v in config["data"].items()}


def _workloads(kafka: bool = True) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, pod spec, container) of every Kubernetes workload that uses Kafka (or not)."""
    found = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            pod = (doc or {}).get("spec", {}).get("template", {}).get("spec", {})
            for container in pod.get("containers", []):
                if (container["args"][0] in KAFKA_USERS) == kafka:
                    found.append((doc["metadata"]["name"], pod, container))
    return found


def _secret_keys(container: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Variable -> (Secret, key) of each variable the container takes from a Secret."""
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container.get("env", [])
        if "valueFrom" in e
    }
    return {name: (ref["name"], ref["key"]) for name, ref in refs.items()}


def test_the_kafka_settings_are_sasl_ssl_and_valid_with_their_login(tmp_path: Path) -> None:
    env = _kafka_config() | LOGIN
    settings = load_settings(env)
    assert settings.kafka_security_protocol is KafkaProtocol.SASL_SSL
    assert settings.kafka_sasl_mechanism is SaslMechanism.SCRAM_SHA_512
    ca = tmp_path / "ca.crt"  # stands in for the mounted CA
    ca.write_text("")
    access = kafka_access(load_settings(env | {"SETTLE_KAFKA_SSL_CAFILE": str(ca)}))
    assert access.login is not None and access.tls is not None


def test_the_shared_config_map_names_no_kafka() -> None:
    (config,) = yaml.safe_load_all((DEPLOY / "k8s" / "config.yaml").read_text())
    assert not [key for key in config["data"] if key.startswith("SETTLE_KAFKA")]


def test_every_kafka_workload_gets_the_settings_its_own_login_and_the_ca() -> None:
    workloads = _workloads()
    assert sorted(c["args"][0] for _, _, c in workloads) == sorted(KAFKA_USERS)
    ca_dir = str(Path(_kafka_config()["SETTLE_KAFKA_SSL_CAFILE"]).parent)
    for name, pod, container in workloads:
        sources = [next(iter(s.values()))["name"] for s in container["envFrom"]]
        assert "settle-kafka" in sources, name
        # The login is the workload's own (a Kafka user per workload), never a shared Secret.
        login = {v: ref for v, ref in _secret_keys(container).items() if v in LOGIN}
        assert login == {v: (name, v) for v in LOGIN}, name
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == ca_dir]
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert volume["secret"]["secretName"] == "settle-kafka-ca" and mount["readOnly"]


def test_workloads_without_kafka_are_given_nothing_of_it() -> None:
    others = _workloads(kafka=False)
    assert {c["args"][0] for _, _, c in others} >= {"inbox", "reconciler"}
    for name, pod, container in others:
        sources = [next(iter(s.values()))["name"] for s in container.get("envFrom", [])]
        assert "settle-kafka" not in sources, name
        assert not LOGIN.keys() & _secret_keys(container).keys(), name
        assert "settle-kafka-ca" not in str(pod.get("volumes")), name
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    for service in ("inbox", "reconciler"):
        assert not [k for k in compose[service]["environment"] if k.startswith("SETTLE_KAFKA")]


@pytest.mark.parametrize("service", ["migrate", "ledger", "relay"])
def test_compose_services_reach_kafka_only_over_sasl_ssl(service: str) -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    env = compose["services"][service]["environment"]
    assert env["SETTLE_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    brokers = compose["services"]["kafka-1"]["environment"]
    secure = {
        int(a.rsplit(":", 1)[1])
        for a in brokers["KAFKA_LISTENERS"].split(",")
        if a.startswith("SASL_SSL://")
    }
    assert {int(s.rsplit(":", 1)[1]) for s in env["SETTLE_KAFKA_BOOTSTRAP"].split(",")} == secure
    assert env["SETTLE_KAFKA_SASL_PASSWORD"].startswith("${")  # from the environment, not here
