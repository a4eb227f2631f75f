"""The manifests give every workload that uses Kafka SASL_SSL settings, a login from its own
Secret and the CA at the path the settings name; none of them is given a PLAINTEXT listener,
and the workloads that use no Kafka are given nothing of it. Compose's brokers have no
listener without SASL, deny what no ACL allows, and give each service's own user only the
topics and groups its code uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from services.adapters.kafka.access import kafka_access
from services.contracts.topics import COMMANDS, COMMANDS_DLQ, TOPICS
from services.contracts.topics import EVENTS as EVENT_TOPIC
from services.ledger.commands import CONSUMER_GROUP as LEDGER_GROUP
from services.platform.config import KafkaProtocol, SaslMechanism
from services.platform.settings import load_settings
from services.relay.triggers import CONSUMER_GROUP as RELAY_GROUP
from tests.unit import compose_kafka

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KAFKA_USERS = ("migrate", "ledger", "relay")  # the commands whose code builds Kafka clients
MONITOR = "monitor"  # the Kafka exporter's user: describes settle's topics and groups
LOGIN = {"SETTLE_KAFKA_SASL_USERNAME": "settle", "SETTLE_KAFKA_SASL_PASSWORD": "from-a-secret"}
SASL = {"SASL_SSL", "SASL_PLAINTEXT"}  # SASL_PLAINTEXT only on a network of the brokers' own
# What each service's code does with Kafka (services/apps/, services/adapters/kafka/topics.py)
# and so all its Kafka user may do: no transactional ids, no cluster rights, no wildcards.
GRANTS = {
    "User:migrate": {("topic", t.name, op) for t in TOPICS for op in ("Create", "Describe")},
    "User:ledger": {
        ("topic", COMMANDS, "Read"),
        ("group", LEDGER_GROUP, "Read"),
        ("topic", COMMANDS_DLQ, "Write"),
    },
    "User:relay": {
        ("topic", EVENT_TOPIC, "Read"),
        ("group", RELAY_GROUP, "Read"),
        ("topic", EVENT_TOPIC, "Write"),
    },
    "User:monitor": {
        *{("topic", t.name, "Describe") for t in TOPICS},
        ("group", LEDGER_GROUP, "Describe"),
        ("group", RELAY_GROUP, "Describe"),
    },
}


def _kafka_config() -> dict[str, str]:
    (config,) = yaml.safe_load_all((DEPLOY / "k8s" / "base" / "kafka.yaml").read_text())
    return {k: str(v) for k, v in config["data"].items()}


def _workloads(kafka: bool = True) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, pod spec, container) of every Kubernetes workload that uses Kafka (or not)."""
    found = []
    for path in sorted((DEPLOY / "k8s" / "base").glob("*.yaml")):
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
    (config,) = yaml.safe_load_all((DEPLOY / "k8s" / "base" / "config.yaml").read_text())
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


@pytest.mark.parametrize("service", KAFKA_USERS)
def test_compose_services_reach_kafka_only_over_sasl_ssl(service: str) -> None:
    env = compose_kafka.services()[service]["environment"]
    assert env["SETTLE_KAFKA_SECURITY_PROTOCOL"] == "SASL_SSL"
    properties = compose_kafka.broker_properties(compose_kafka.services()["kafka-1"]["environment"])
    names = compose_kafka.protocols(properties)
    mechanism = env["SETTLE_KAFKA_SASL_MECHANISM"]
    ports = {  # the SASL_SSL listeners that take the services' mechanism
        int(address.rsplit(":", 1)[1])
        for name, address in compose_kafka.listeners(properties).items()
        if names[name] == "SASL_SSL"
        and mechanism in properties[f"listener.name.{name.lower()}.sasl.enabled.mechanisms"]
    }
    assert {int(s.rsplit(":", 1)[1]) for s in env["SETTLE_KAFKA_BOOTSTRAP"].split(",")} == ports


@pytest.mark.parametrize("broker", compose_kafka.BROKERS)
def test_compose_brokers_have_no_listener_without_sasl(broker: str) -> None:
    properties = compose_kafka.broker_properties(compose_kafka.services()[broker]["environment"])
    protocol_of = compose_kafka.protocols(properties)
    assert set(protocol_of.values()) <= SASL, "no PLAINTEXT or SSL listener, even unused"
    listeners = compose_kafka.listeners(properties)
    advertised = compose_kafka.listeners(properties, "advertised.listeners")
    assert set(listeners) == set(protocol_of) and set(advertised) <= set(listeners)
    # Controllers and brokers talk over the same kind of listener as everyone else.
    assert properties["controller.listener.names"] in listeners
    assert properties["inter.broker.listener.name"] in listeners
    # The image demands a JKS keystore and its passwords when it reads "SSL://" there.
    assert "SSL://" not in properties["advertised.listeners"]
    for name in listeners:
        mechanisms = properties[f"listener.name.{name.lower()}.sasl.enabled.mechanisms"]
        for mechanism in mechanisms.split(","):
            jaas = properties[f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"]
            assert jaas.endswith(";"), (name, mechanism)
    for role in ("controller", "inter.broker"):
        assert properties[f"sasl.mechanism.{role}.protocol"] == "PLAIN"


@pytest.mark.parametrize("broker", compose_kafka.BROKERS)
def test_compose_brokers_deny_what_no_acl_allows(broker: str) -> None:
    properties = compose_kafka.broker_properties(compose_kafka.services()[broker]["environment"])
    authorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert properties["authorizer.class.name"] == authorizer
    assert properties["allow.everyone.if.no.acl.found"] == "false"
    assert properties["super.users"] == "User:broker"  # the brokers' own login, no service's
    for name in ("broker", "controller"):
        jaas = properties[f"listener.name.{name}.plain.sasl.jaas.config"]
        assert 'username="broker"' in jaas and "${KAFKA_BROKER_PASSWORD:?" in jaas


def test_each_compose_kafka_service_has_a_user_of_its_own() -> None:
    compose = compose_kafka.services()
    users = {n for n, s in compose.items() if "SETTLE_KAFKA_BOOTSTRAP" in s.get("environment", {})}
    assert users == set(KAFKA_USERS)
    logins = compose_kafka.scram_logins()
    assert set(logins) == users | {MONITOR}, "kafka-access makes the services' users and monitor"
    assert logins[MONITOR] == "SCRAM-SHA-512=[password=$${KAFKA_MONITOR_PASSWORD}]"
    exporter = " ".join(compose["kafka-exporter"]["command"])
    assert "--sasl.username=monitor" in exporter and "${KAFKA_MONITOR_PASSWORD:?}" in exporter
    access_env = compose[compose_kafka.ACCESS]["environment"]
    for service in KAFKA_USERS:
        env = compose[service]["environment"]
        variable = f"KAFKA_{service.upper()}_PASSWORD"
        assert env["SETTLE_KAFKA_SASL_USERNAME"] == service
        assert env["SETTLE_KAFKA_SASL_PASSWORD"] == f"${{{variable}:?}}"
        assert logins[service] == f"SCRAM-SHA-512=[password=$${{{variable}}}]"
        assert access_env[variable].startswith(f"${{{variable}:?")


def test_compose_acls_grant_each_service_only_what_its_code_uses() -> None:
    assert compose_kafka.acl_grants() == GRANTS
    allowed = {"--bootstrap-server", "--command-config", "--add", "--allow-principal"}
    allowed |= {"--operation", "--topic", "--group"}
    for options in compose_kafka.tool_options("kafka-acls.sh"):
        # Literal names only (no --resource-pattern-type prefixed, no "*"), no deny rules.
        assert set(options) <= allowed, options
        assert "*" not in options.get("--topic", []) + options.get("--group", [])


def test_kafka_access_logs_in_as_the_super_user_over_sasl() -> None:
    compose = compose_kafka.services()
    properties = compose_kafka.broker_properties(compose["kafka-1"]["environment"])
    by_port = {a.rsplit(":", 1)[1]: n for n, a in compose_kafka.listeners(properties).items()}
    for tool in ("kafka-configs.sh", "kafka-acls.sh"):
        for options in compose_kafka.tool_options(tool):
            (server,) = options["--bootstrap-server"]
            listener = by_port[server.rsplit(":", 1)[1]]
            mechanisms = properties[f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"]
            assert compose_kafka.protocols(properties)[listener] in SASL and "PLAIN" in mechanisms
            assert options["--command-config"] == ["/tmp/admin.properties"]
    (first, *_) = compose_kafka.access_commands()
    assert first[0] == "printf" and "security.protocol=SASL_SSL" in first
    assert 'username="broker"' in " ".join(first)
