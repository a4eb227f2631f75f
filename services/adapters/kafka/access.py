"""How a Kafka client reaches the brokers: where they are, and how it proves itself to them.

`KafkaAccess` is built once from the settings (`kafka_access`), which refuses a combination
that would connect some other way than the one configured: SASL without a user or password,
TLS files that do not exist, or TLS and SASL settings given for a protocol that ignores
them (a CA file beside PLAINTEXT would otherwise leave the link in clear without a word).
Every producer, consumer and admin client takes one (services.adapters.kafka.clients).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from services.domain.errors import ConfigError
from services.platform.config import KafkaProtocol, SaslMechanism
from services.platform.sections import KafkaSection

PROTOCOL_ENV = "SETTLE_KAFKA_SECURITY_PROTOCOL"
USERNAME_ENV = "SETTLE_KAFKA_SASL_USERNAME"
PASSWORD_ENV = "SETTLE_KAFKA_SASL_PASSWORD"
CAFILE_ENV = "SETTLE_KAFKA_SSL_CAFILE"
CERTFILE_ENV = "SETTLE_KAFKA_SSL_CERTFILE"
KEYFILE_ENV = "SETTLE_KAFKA_SSL_KEYFILE"
MECHANISM_ENV = "SETTLE_KAFKA_SASL_MECHANISM"
SECURITY_VARIABLES = (
    PROTOCOL_ENV,
    MECHANISM_ENV,
    USERNAME_ENV,
    PASSWORD_ENV,
    CAFILE_ENV,
    CERTFILE_ENV,
    KEYFILE_ENV,
)
TLS = frozenset({KafkaProtocol.SSL, KafkaProtocol.SASL_SSL})
SASL = frozenset({KafkaProtocol.SASL_PLAINTEXT, KafkaProtocol.SASL_SSL})


@dataclass(frozen=True)
class SaslLogin:
    """A Kafka principal's SASL login."""

    mechanism: SaslMechanism
    username: str
    password: SecretStr  # shown as '**********' in every repr and log line


@dataclass(frozen=True)
class TlsFiles:
    """PEM files of a TLS link: the CA that signs the brokers, and an optional client pair."""

    cafile: str | None = None  # None: the system's trusted CAs
    certfile: str | None = None  # a client certificate, for brokers that require mutual TLS
    keyfile: str | None = None  # its key, when not in `certfile`


@dataclass(frozen=True)
class KafkaAccess:
    """Bootstrap servers and the security a client uses to reach them (PLAINTEXT unless told)."""

    bootstrap: str
    protocol: KafkaProtocol = KafkaProtocol.PLAINTEXT
    login: SaslLogin | None = None  # set exactly when the protocol is SASL_*
    tls: TlsFiles | None = None  # set exactly when the protocol is SSL or SASL_SSL

    def __post_init__(self) -> None:
        if (self.login is not None) != (self.protocol in SASL):
            raise ValueError(f"{self.protocol} takes a SASL login exactly when it is SASL_*")
        if (self.tls is not None) != (self.protocol in TLS):
            raise ValueError(f"{self.protocol} takes TLS files exactly when it uses TLS")


def kafka_access(settings: KafkaSection) -> KafkaAccess:
    """The access the settings describe, or ConfigError naming the variable that is wrong."""
    protocol = settings.kafka_security_protocol
    login = _login(settings) if protocol in SASL else None
    if protocol not in SASL:
        login_values = {
            USERNAME_ENV: settings.kafka_sasl_username,
            PASSWORD_ENV: settings.kafka_sasl_password,
        }
        _not_used(protocol, login_values)
    files = {
        CAFILE_ENV: settings.kafka_ssl_cafile,
        CERTFILE_ENV: settings.kafka_ssl_certfile,
        KEYFILE_ENV: settings.kafka_ssl_keyfile,
    }
    if protocol not in TLS:
        _not_used(protocol, files)
        return KafkaAccess(settings.kafka_bootstrap, protocol, login)
    for variable, path in files.items():
        if path is not None and not Path(path).is_file():
            raise ConfigError(variable, f"no such file: {path}")
    if settings.kafka_ssl_keyfile and not settings.kafka_ssl_certfile:
        raise ConfigError(KEYFILE_ENV, f"a client key needs its certificate in {CERTFILE_ENV}")
    tls = TlsFiles(*files.values())
    return KafkaAccess(settings.kafka_bootstrap, protocol, login, tls)


def _login(settings: KafkaSection) -> SaslLogin:
    protocol = settings.kafka_security_protocol
    if not settings.kafka_sasl_username:
        raise ConfigError(USERNAME_ENV, f"required when {PROTOCOL_ENV} is {protocol}")
    password = settings.kafka_sasl_password
    if password is None or not password.get_secret_value():
        raise ConfigError(PASSWORD_ENV, f"required when {PROTOCOL_ENV} is {protocol}")
    return SaslLogin(settings.kafka_sasl_mechanism, settings.kafka_sasl_username, password)


def _not_used(protocol: KafkaProtocol, values: Mapping[str, object]) -> None:
    for variable, value in values.items():
        if value is not None:
            raise ConfigError(variable, f"set, but {PROTOCOL_ENV} is {protocol}, which ignores it")
