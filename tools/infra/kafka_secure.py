"""The local broker's SASL_SSL listener, beside its PLAINTEXT one (`settle infra up
--kafka-security sasl_ssl`): TLS with a certificate of a local CA, SCRAM-SHA-512 logins.

The CA and the broker's certificate (for 127.0.0.1 and localhost) are made once with openssl
under <run>/kafka/sasl_ssl/ and kept; Kafka reads them as PEM. The SCRAM login is written
into the metadata when the storage is formatted, so a broker formatted without it cannot
gain it here (`settle infra down --purge` first). The inter-broker and controller listeners
stay PLAINTEXT on loopback: only clients use the secure one.
"""

from __future__ import annotations

import ipaddress
import secrets
import subprocess
from collections.abc import Sequence
from pathlib import Path

from pydantic import SecretStr

from services.adapters.kafka.access import KafkaAccess, SaslLogin, TlsFiles
from services.domain.errors import InfrastructureError
from services.platform.config import KafkaProtocol, SaslMechanism
from tools.infra.paths import KafkaEndpoint
from tools.infra.procs import tool

USERNAME = "settle"
MECHANISM = SaslMechanism.SCRAM_SHA_512
LISTENER = "SASL_SSL"
CA_DAYS, BROKER_DAYS = 3650, 825
LOCAL_NAMES = ("127.0.0.1", "localhost")  # what clients of the local broker connect to
OPENSSL_TIMEOUT_S = 60


def ca_file(directory: Path) -> Path:
    """The local CA's certificate: what clients trust (SETTLE_KAFKA_SSL_CAFILE)."""
    return directory / "ca.pem"


def keystore_file(directory: Path) -> Path:
    """The broker's key and certificate chain in one PEM file (ssl.keystore.type=PEM)."""
    return directory / "broker.pem"


def password_file(directory: Path) -> Path:
    """The SCRAM password of USERNAME, written when the storage is formatted with it."""
    return directory / "scram-password"


def ensure_certificates(directory: Path, names: Sequence[str] = LOCAL_NAMES) -> None:
    """Make the CA and a broker certificate for the host `names` (addresses or DNS names)
    under `directory`, unless they are there."""
    if ca_file(directory).exists() and keystore_file(directory).exists():
        return
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)  # the CA's key and the broker's key are in here
    openssl = tool("openssl", "openssl", "the broker's TLS certificates are made with openssl")
    ca_key, key, csr = directory / "ca.key", directory / "broker.key", directory / "broker.csr"
    extensions = directory / "broker.ext"
    extensions.write_text(
        f"subjectAltName={_alt_names(names)}\nextendedKeyUsage=serverAuth\n"
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
    )
    new_key = ["-newkey", "rsa:2048", "-nodes"]
    _make_ca(openssl, directory, ca_key, new_key)
    _openssl(
        openssl, "req", *new_key, "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={names[0]}"
    )
    cert = directory / "broker.crt"
    _openssl(
        openssl,
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca_file(directory)),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        str(BROKER_DAYS),
        "-extfile",
        str(extensions),
    )
    # Written last: its presence says the whole set is complete.
    pem = key.read_text() + cert.read_text() + ca_file(directory).read_text()
    keystore_file(directory).write_text(pem)
    keystore_file(directory).chmod(0o600)
    for scratch in (csr, extensions, cert, key, directory / "ca.srl"):
        scratch.unlink(missing_ok=True)


def _make_ca(openssl: str, directory: Path, ca_key: Path, new_key: list[str]) -> None:
    """The local CA: its key and its self-signed certificate."""
    _openssl(
        openssl,
        "req",
        "-x509",
        *new_key,
        "-keyout",
        str(ca_key),
        "-out",
        str(ca_file(directory)),
        "-days",
        str(CA_DAYS),
        "-subj",
        "/CN=settle local Kafka CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )


def _alt_names(names: Sequence[str]) -> str:
    """openssl's subjectAltName value: IP: for addresses, DNS: for names."""

    def kind(name: str) -> str:
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return "DNS"
        return "IP"

    return ",".join(f"{kind(name)}:{name}" for name in names)


def _openssl(openssl: str, *args: str) -> None:
    done = subprocess.run(
        [openssl, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=OPENSSL_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise InfrastructureError(f"openssl {args[0]} failed: {done.stderr.strip()[-2000:]}")


def new_password(directory: Path) -> str:
    """A fresh SCRAM password for USERNAME, kept in `directory` (readable by its owner only)."""
    password = secrets.token_urlsafe(24)
    path = password_file(directory)
    path.write_text(password + "\n")
    path.chmod(0o600)
    return password


def scram_format_args(password: str) -> list[str]:
    """StorageTool `format` arguments that create USERNAME's SCRAM-SHA-512 login."""
    return ["--add-scram", f"{MECHANISM.value}=[name={USERNAME},password={password}]"]


def listener_properties(endpoint: KafkaEndpoint, directory: Path) -> dict[str, str]:
    """server.properties entries of the SASL_SSL listener (added to the PLAINTEXT ones)."""
    prefix = f"listener.name.{LISTENER.lower()}"
    mechanism = MECHANISM.value.lower()
    return {
        "sasl.enabled.mechanisms": MECHANISM.value,
        f"{prefix}.sasl.enabled.mechanisms": MECHANISM.value,
        f"{prefix}.{mechanism}.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        f"{prefix}.ssl.keystore.type": "PEM",
        f"{prefix}.ssl.keystore.location": str(keystore_file(directory)),
        "inter.broker.listener.name": "PLAINTEXT",
    }


def formatted_password(directory: Path) -> str:
    """The SCRAM password the broker's storage was formatted with; InfrastructureError if it
    was formatted without one (a login cannot be added to it here)."""
    try:
        return password_file(directory).read_text().strip()
    except FileNotFoundError as e:
        raise InfrastructureError(
            f"no SCRAM login at {password_file(directory)}: the broker was formatted without "
            "one; `settle infra down --purge`, then `settle infra up --kafka-security sasl_ssl`"
        ) from e


def client_access(endpoint: KafkaEndpoint, directory: Path) -> KafkaAccess:
    """How a client reaches the SASL_SSL listener as USERNAME, trusting the local CA."""
    login = SaslLogin(MECHANISM, USERNAME, SecretStr(formatted_password(directory)))
    tls = TlsFiles(cafile=str(ca_file(directory)))
    return KafkaAccess(
        f"{endpoint.host}:{endpoint.secure_port}", KafkaProtocol.SASL_SSL, login, tls
    )


def client_env(access: KafkaAccess) -> dict[str, str]:
    """The SETTLE_KAFKA_* variables that make settle's clients use `access`."""
    env = {
        "SETTLE_KAFKA_BOOTSTRAP": access.bootstrap,
        "SETTLE_KAFKA_SECURITY_PROTOCOL": access.protocol.value,
    }
    if access.login is not None:
        env["SETTLE_KAFKA_SASL_MECHANISM"] = access.login.mechanism.value
        env["SETTLE_KAFKA_SASL_USERNAME"] = access.login.username
        env["SETTLE_KAFKA_SASL_PASSWORD"] = access.login.password.get_secret_value()
    if access.tls is not None and access.tls.cafile is not None:
        env["SETTLE_KAFKA_SSL_CAFILE"] = access.tls.cafile
    return env
