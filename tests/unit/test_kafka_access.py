"""Kafka access: the security settings reach every client one way, and a setting that would
connect some other way than configured is refused at start-up, naming its variable."""

from __future__ import annotations

import ast
import ssl
from pathlib import Path

import pytest

from services.adapters.kafka.access import KafkaAccess, kafka_access
from services.adapters.kafka.clients import connection_options
from services.domain.errors import ConfigError
from services.platform.config import KafkaProtocol, SaslMechanism
from services.platform.settings import load_settings
from tools.infra.paths import repo_root

SHARED_KAFKA = Path("services/adapters/kafka/clients.py")


@pytest.fixture(scope="module")
def ca_pem(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real CA certificate, as `settle infra up --kafka-security sasl_ssl` makes it."""
    from tools.infra.kafka_secure import ca_file, ensure_certificates

    directory = tmp_path_factory.mktemp("tls")
    ensure_certificates(directory)
    return str(ca_file(directory))


def sasl_ssl(cafile: str, **extra: str) -> dict[str, str]:
    return {
        "SETTLE_KAFKA_BOOTSTRAP": "k1:9096,k2:9096",
        "SETTLE_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "SETTLE_KAFKA_SASL_USERNAME": "settle-ledger",
        "SETTLE_KAFKA_SASL_PASSWORD": "s3cret-scram",
        "SETTLE_KAFKA_SSL_CAFILE": cafile,
        **extra,
    }


def test_by_default_clients_speak_plaintext_to_the_local_broker() -> None:
    access = kafka_access(load_settings({}))
    assert access == KafkaAccess("127.0.0.1:59092")
    assert connection_options(access) == {
        "bootstrap_servers": "127.0.0.1:59092",
        "security_protocol": "PLAINTEXT",
    }


def test_sasl_ssl_gives_every_client_the_login_and_a_verifying_tls_context(ca_pem: str) -> None:
    access = kafka_access(load_settings(sasl_ssl(ca_pem)))
    options = connection_options(access)
    context = options.pop("ssl_context")
    assert options == {
        "bootstrap_servers": "k1:9096,k2:9096",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "settle-ledger",
        "sasl_plain_password": "s3cret-scram",
    }
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()] == [
        ((("commonName", "settle local Kafka CA"),),)
    ]
    assert "s3cret-scram" not in repr(access) and "s3cret-scram" not in str(access)


def test_the_mechanism_is_the_one_configured(ca_pem: str) -> None:
    env = sasl_ssl(ca_pem, SETTLE_KAFKA_SASL_MECHANISM="SCRAM-SHA-256")
    access = kafka_access(load_settings(env))
    assert access.login is not None and access.login.mechanism is SaslMechanism.SCRAM_SHA_256
    assert connection_options(access)["sasl_mechanism"] == "SCRAM-SHA-256"


def test_ssl_without_a_ca_file_trusts_the_system_cas() -> None:
    env = {"SETTLE_KAFKA_SECURITY_PROTOCOL": "SSL"}
    access = kafka_access(load_settings(env))
    assert access.protocol is KafkaProtocol.SSL and access.login is None
    context = connection_options(access)["ssl_context"]
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname


@pytest.mark.parametrize(
    ("given", "variable"),
    [
        ({"SECURITY_PROTOCOL": "SASL_SSL", "SASL_PASSWORD": "p"}, "SASL_USERNAME"),
        ({"SECURITY_PROTOCOL": "SASL_SSL", "SASL_USERNAME": "u"}, "SASL_PASSWORD"),
        (
            {"SECURITY_PROTOCOL": "SASL_PLAINTEXT", "SASL_USERNAME": "u", "SASL_PASSWORD": ""},
            "SASL_PASSWORD",
        ),
        ({"SECURITY_PROTOCOL": "SSL", "SSL_CAFILE": "/nowhere/ca.pem"}, "SSL_CAFILE"),
        ({"SECURITY_PROTOCOL": "SSL", "SSL_CERTFILE": "/nowhere/c.pem"}, "SSL_CERTFILE"),
        (
            {"SECURITY_PROTOCOL": "SSL", "SSL_CERTFILE": "{ca}", "SSL_KEYFILE": "/nowhere/k.pem"},
            "SSL_KEYFILE",
        ),
        # Settings the protocol would silently ignore: the link would not be what was meant.
        ({"SSL_CAFILE": "{ca}"}, "SSL_CAFILE"),
        ({"SASL_USERNAME": "u"}, "SASL_USERNAME"),
        ({"SECURITY_PROTOCOL": "SSL", "SASL_PASSWORD": "p"}, "SASL_PASSWORD"),
        (
            {
                "SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "SASL_USERNAME": "u",
                "SASL_PASSWORD": "p",
                "SSL_CAFILE": "{ca}",
            },
            "SSL_CAFILE",
        ),
    ],
)
def test_a_setting_that_cannot_work_is_refused_naming_its_variable(
    given: dict[str, str], variable: str, ca_pem: str
) -> None:
    env = {f"SETTLE_KAFKA_{name}": value.format(ca=ca_pem) for name, value in given.items()}
    with pytest.raises(ConfigError) as refused:
        kafka_access(load_settings(env))
    assert refused.value.variable == f"SETTLE_KAFKA_{variable}"


def test_a_client_key_without_its_certificate_is_refused(ca_pem: str) -> None:
    env = {"SETTLE_KAFKA_SECURITY_PROTOCOL": "SSL", "SETTLE_KAFKA_SSL_KEYFILE": ca_pem}
    with pytest.raises(ConfigError) as refused:
        kafka_access(load_settings(env))
    assert refused.value.variable == "SETTLE_KAFKA_SSL_KEYFILE"
    assert "SETTLE_KAFKA_SSL_CERTFILE" in refused.value.problem


def kafka_clients_built(path: Path) -> list[str]:
    """Where a module constructs an aiokafka producer, consumer or admin client."""
    built = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", "")
            if name.startswith("AIOKafka"):
                built.append(f"{path.relative_to(repo_root())}:{node.lineno} {name}")
    return built


def test_kafka_clients_are_built_only_by_the_shared_factories() -> None:
    root = repo_root()
    modules = sorted([*(root / "services").rglob("*.py"), *(root / "tools").rglob("*.py")])
    assert kafka_clients_built(root / SHARED_KAFKA)  # the check sees what it looks for
    elsewhere = [
        site
        for path in modules
        if path != root / SHARED_KAFKA
        for site in kafka_clients_built(path)
    ]
    assert elsewhere == []
