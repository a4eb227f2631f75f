"""The local broker's SASL_SSL listener without a broker: its properties, a certificate that a
hostname-checking client trusts for 127.0.0.1 and localhost only, and the client settings."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from pydantic import SecretStr

from services.adapters.kafka.access import KafkaAccess, SaslLogin, TlsFiles, kafka_access
from services.domain.errors import InfrastructureError
from services.platform.config import KafkaProtocol
from services.platform.settings import load_settings
from tools.infra import kafka
from tools.infra.kafka_secure import (
    MECHANISM,
    USERNAME,
    ca_file,
    client_access,
    client_env,
    ensure_certificates,
    keystore_file,
    new_password,
    scram_format_args,
)
from tools.infra.kafka_setup import render_server_properties
from tools.infra.paths import RunPaths, kafka_endpoint


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("sasl_ssl")
    ensure_certificates(directory)
    return directory


def _parse(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def test_the_secure_listener_is_added_beside_the_plaintext_and_controller_ones(
    tls: Path, tmp_path: Path
) -> None:
    props = _parse(render_server_properties(kafka_endpoint("127.0.0.1:59092"), tmp_path, tls))
    assert props["listeners"] == (
        "PLAINTEXT://127.0.0.1:59092,SASL_SSL://127.0.0.1:59094,CONTROLLER://127.0.0.1:59093"
    )
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:59092,SASL_SSL://127.0.0.1:59094"
    assert props["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL"
    )
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["listener.name.sasl_ssl.ssl.keystore.type"] == "PEM"
    assert props["listener.name.sasl_ssl.ssl.keystore.location"] == str(keystore_file(tls))


def test_without_it_the_broker_has_no_sasl_settings(tmp_path: Path) -> None:
    props = _parse(render_server_properties(kafka_endpoint("127.0.0.1:59092"), tmp_path))
    assert not [key for key in props if "sasl" in key or "ssl" in key]


def _handshake(tls: Path, server_name: str) -> None:
    """A TLS handshake in memory: a client trusting the CA against the broker's keystore."""
    client = ssl.create_default_context(cafile=str(ca_file(tls)))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(keystore_file(tls))
    wires = [ssl.MemoryBIO() for _ in range(4)]
    c = client.wrap_bio(wires[0], wires[1], server_hostname=server_name)
    s = server.wrap_bio(wires[1], wires[0], server_side=True)
    for _ in range(10):
        done = 0
        for end in (c, s):
            try:
                end.do_handshake()
                done += 1
            except ssl.SSLWantReadError:
                pass
        if done == 2:
            return
    raise AssertionError("handshake did not finish")


@pytest.mark.parametrize("name", ["127.0.0.1", "localhost"])
def test_a_hostname_checking_client_trusts_the_broker_at_its_local_names(
    tls: Path, name: str
) -> None:
    _handshake(tls, name)


def test_the_certificate_names_no_other_host(tls: Path) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(tls, "kafka.example.com")


def test_certificates_are_made_once_and_kept(tls: Path) -> None:
    before = {p.name: p.read_bytes() for p in tls.iterdir()}
    ensure_certificates(tls)
    assert {p.name: p.read_bytes() for p in tls.iterdir()} == before
    assert keystore_file(tls).stat().st_mode & 0o077 == 0  # the broker's key: owner only


def test_clients_get_the_login_formatted_into_the_broker(tmp_path: Path, tls: Path) -> None:
    directory = tmp_path / "secure"
    directory.mkdir()
    (directory / "ca.pem").write_bytes(ca_file(tls).read_bytes())
    password = new_password(directory)
    assert scram_format_args(password) == [
        "--add-scram",
        f"SCRAM-SHA-512=[name={USERNAME},password={password}]",
    ]
    access = client_access(kafka_endpoint("127.0.0.1:40000"), directory)
    assert access == KafkaAccess(
        "127.0.0.1:40002",
        KafkaProtocol.SASL_SSL,
        SaslLogin(MECHANISM, USERNAME, SecretStr(password)),
        TlsFiles(str(ca_file(directory))),
    )
    # What `settle infra env --kafka-security sasl_ssl` prints reads back as the same access.
    assert kafka_access(load_settings(client_env(access))) == access


def test_a_running_broker_without_the_listener_is_not_taken_for_a_secure_one(
    tls: Path, tmp_path: Path
) -> None:
    paths = RunPaths(root=tmp_path, run=tmp_path, kafka_sasl_ssl=True)
    paths.kafka.mkdir()
    endpoint = kafka_endpoint(paths.kafka_bootstrap)
    paths.kafka_props.write_text(render_server_properties(endpoint, paths.kafka_data))
    with pytest.raises(InfrastructureError, match="runs without its SASL_SSL listener"):
        kafka._require_secure_listener(paths)
    paths.kafka_props.write_text(render_server_properties(endpoint, paths.kafka_data, tls))
    kafka._require_secure_listener(paths)
