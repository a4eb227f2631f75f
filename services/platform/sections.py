"""The sections that say where things are: the database, Kafka, the rails, telemetry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, ClassVar
from urllib.parse import parse_qs, urlsplit

from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator
from pydantic_settings import NoDecode

from services.domain.errors import ConfigError
from services.domain.payout import PayoutMethod
from services.domain.rail_routing import parse_tenant_rails
from services.platform.bank import BankSection
from services.platform.config import (
    LOCAL_DATABASE_URL,
    LOCAL_KAFKA_BOOTSTRAP,
    LOCAL_SECRETS,
    KafkaProtocol,
    RailKind,
    SaslMechanism,
    Section,
    weakness,
)
from services.platform.logs import LogFormat, LogLevel
from services.platform.rail_hosts import RAIL_HOSTS, STRIPE_API, parse_hosts, pinned_refusals
from services.platform.tracing import TraceExporter

VERIFYING_SSLMODES = ("verify-full", "verify-ca")
KAFKA_AUTH = "SASL_SSL with a user and password, or SSL with a client certificate and key"


def _rail_list(value: object) -> object:
    if not isinstance(value, str):
        return value
    names = [name.strip() for name in value.split(",") if name.strip()]
    if len(set(names)) != len(names):
        raise ValueError("names a rail twice")
    return tuple(names)


def _defaults(value: object) -> object:
    return parse_tenant_rails(value) if isinstance(value, str) else value


POOLED = "SETTLE_DATABASE_POOLED"


class DatabaseSection(Section):
    """The PostgreSQL database; in production its server's certificate is verified.
    `SETTLE_DATABASE_POOLED=true` says the URL goes through a transaction-mode pooler
    (PgBouncer): the pool then keeps no prepared statements (docs/pooling.md)."""

    database_url: str = Field(LOCAL_DATABASE_URL, alias="SETTLE_DATABASE_URL")
    database_pooled: bool = Field(False, alias=POOLED)

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        if not value.startswith(("postgresql://", "postgresql+asyncpg://")):
            raise ValueError("must be a postgresql:// or postgresql+asyncpg:// URL")
        return value.replace("postgresql://", "postgresql+asyncpg://", 1)

    def production_refusals(self) -> Iterator[ConfigError]:
        modes = parse_qs(urlsplit(self.database_url).query).get("sslmode", [])
        # libpq and asyncpg read the last sslmode given; only the verify modes check who answers.
        if not modes or modes[-1] not in VERIFYING_SSLMODES:
            yield ConfigError(
                "SETTLE_DATABASE_URL",
                "must verify the server's TLS certificate in production mode: add "
                "sslmode=verify-full (or verify-ca) to its query, and sslrootcert=<CA file>",
            )


class SessionDatabaseSection(DatabaseSection):
    """The database of a service that holds sessions (a LISTEN, a session advisory lock,
    settings and a name on each session): a transaction pooler would hand its session's
    statements to other server connections, so it is refused in every mode."""

    SESSION_USE: ClassVar[str] = "a PostgreSQL session of its own"

    @model_validator(mode="after")
    def _direct(self) -> SessionDatabaseSection:
        if self.database_pooled:
            raise ConfigError(
                POOLED,
                f"is true, but this service needs {self.SESSION_USE}, which a transaction "
                "pooler does not keep: give it a direct SETTLE_DATABASE_URL (to PostgreSQL, "
                f"not PgBouncer) and unset {POOLED}",
            )
        return self


class KafkaSection(Section):
    """The brokers, how a client proves itself to them (TLS: a CA file to verify the brokers,
    a client certificate and key for mutual TLS; SASL: a SCRAM user and password), and the
    prefix of this deployment's topics. In production a client authenticates over TLS."""

    kafka_bootstrap: str = Field(LOCAL_KAFKA_BOOTSTRAP, alias="SETTLE_KAFKA_BOOTSTRAP")
    kafka_security_protocol: KafkaProtocol = Field(
        KafkaProtocol.PLAINTEXT, alias="SETTLE_KAFKA_SECURITY_PROTOCOL"
    )
    kafka_sasl_mechanism: SaslMechanism = Field(
        SaslMechanism.SCRAM_SHA_512, alias="SETTLE_KAFKA_SASL_MECHANISM"
    )
    kafka_sasl_username: str | None = Field(None, alias="SETTLE_KAFKA_SASL_USERNAME")
    kafka_sasl_password: SecretStr | None = Field(None, alias="SETTLE_KAFKA_SASL_PASSWORD")
    kafka_ssl_cafile: str | None = Field(None, alias="SETTLE_KAFKA_SSL_CAFILE")
    kafka_ssl_certfile: str | None = Field(None, alias="SETTLE_KAFKA_SSL_CERTFILE")
    kafka_ssl_keyfile: str | None = Field(None, alias="SETTLE_KAFKA_SSL_KEYFILE")
    topic_prefix: str = Field("", alias="SETTLE_TOPIC_PREFIX", pattern=r"^[A-Za-z0-9._-]*$")

    @field_validator("kafka_bootstrap")
    @classmethod
    def _host_ports(cls, value: str) -> str:
        for server in value.split(","):
            host, _, port = server.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ValueError("must be host:port[,host:port...]")
        return value

    def topic(self, name: str) -> str:
        """The Kafka topic `name` under this deployment's prefix."""
        return f"{self.topic_prefix}{name}"

    def production_refusals(self) -> Iterator[ConfigError]:
        protocol = self.kafka_security_protocol
        if protocol is KafkaProtocol.SASL_SSL:
            yield from self._sasl_refusals()
        elif protocol is KafkaProtocol.SSL:
            if not self.kafka_ssl_certfile:
                yield ConfigError(
                    "SETTLE_KAFKA_SSL_CERTFILE", f"is unset; Kafka needs {KAFKA_AUTH}"
                )
            if not self.kafka_ssl_keyfile:
                yield ConfigError("SETTLE_KAFKA_SSL_KEYFILE", f"is unset; Kafka needs {KAFKA_AUTH}")
        else:
            cleartext = protocol is KafkaProtocol.SASL_PLAINTEXT
            clear = " (SASL_PLAINTEXT sends the password in clear)" if cleartext else ""
            yield ConfigError(
                "SETTLE_KAFKA_SECURITY_PROTOCOL",
                f"is {protocol.value}{clear}; production mode needs {KAFKA_AUTH}",
            )

    def _sasl_refusals(self) -> Iterator[ConfigError]:
        if not self.kafka_sasl_username:
            yield ConfigError("SETTLE_KAFKA_SASL_USERNAME", "is unset; SASL_SSL needs a user")
        if self.kafka_sasl_password is None:
            yield ConfigError("SETTLE_KAFKA_SASL_PASSWORD", "is unset; SASL_SSL needs one")
            return
        problem = weakness([self.kafka_sasl_password], "production mode")
        if problem is not None:
            yield ConfigError("SETTLE_KAFKA_SASL_PASSWORD", problem)


class RailSection(BankSection):
    """Which rails pay and how: the rails this deployment drives (`SETTLE_RAILS`, or the one
    `SETTLE_RAIL` names), each tenant's default rail per currency, the Stripe API's address
    (unset: Stripe's own API, or the local simulator for `sim`), the Stripe method, whether
    that rail honours keys, and the bank of the SEPA rail (`BankSection`). In production the
    simulator is refused, and a rail's address is Stripe's own or on a host the deploy names
    in `SETTLE_RAIL_HOSTS` (services/platform/rail_hosts.py)."""

    rail: RailKind = Field(RailKind.SIM, alias="SETTLE_RAIL")
    rails_named: Annotated[tuple[RailKind, ...], NoDecode, BeforeValidator(_rail_list)] = Field(
        (), alias="SETTLE_RAILS"
    )
    tenant_rails: Annotated[dict[tuple[str, str], str], NoDecode, BeforeValidator(_defaults)] = (
        Field({}, alias="SETTLE_TENANT_RAILS")
    )
    stripe_api_base: str | None = Field(None, alias="STRIPE_API_BASE")
    rail_hosts: Annotated[frozenset[str], NoDecode, BeforeValidator(parse_hosts)] = Field(
        frozenset(), alias=RAIL_HOSTS
    )
    stripe_method: PayoutMethod = Field(PayoutMethod.TRANSFER, alias="SETTLE_STRIPE_METHOD")
    rail_idempotent: bool = Field(True, alias="SETTLE_RAIL_IDEMPOTENT")

    @field_validator("stripe_api_base")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @model_validator(mode="after")
    def _rails_agree(self) -> RailSection:
        speaking = [rail for rail in self.rails if rail.speaks_stripe]
        if len(speaking) > 1:
            raise ConfigError("SETTLE_RAILS", "names both sim and stripe; drive one of them")
        for (tenant, currency), rail in self.tenant_rails.items():
            if rail not in self.rails:
                raise ConfigError(
                    "SETTLE_TENANT_RAILS",
                    f"sends {tenant}'s {currency} to {rail}, which SETTLE_RAILS does not name",
                )
        return self

    @property
    def rails(self) -> tuple[RailKind, ...]:
        """The rails driven here, in order of preference: SETTLE_RAILS, else SETTLE_RAIL."""
        return self.rails_named or (self.rail,)

    @property
    def api_rail(self) -> RailKind | None:
        """The rail that speaks Stripe's API (`sim` or `stripe`), if one is driven here."""
        return next((rail for rail in self.rails if rail.speaks_stripe), None)

    @property
    def moves_real_money(self) -> bool:
        base = self.stripe_api_base
        return self.api_rail is RailKind.STRIPE and (base is None or base.rstrip("/") == STRIPE_API)

    def production_refusals(self) -> Iterator[ConfigError]:
        if RailKind.SIM in self.rails:
            named = "SETTLE_RAILS" if self.rails_named else "SETTLE_RAIL"
            unset = named == "SETTLE_RAIL" and "rail" not in self.model_fields_set
            yield ConfigError(
                named,
                f"names sim{' (the default when unset)' if unset else ''}, the rail "
                "simulator; production mode pays through stripe or sepa",
            )
        if self.stripe_api_base is not None:
            yield from pinned_refusals(
                "STRIPE_API_BASE",
                self.stripe_api_base,
                self.rail_hosts,
                "the secret key goes with every request",
                own=STRIPE_API,
            )
        if RailKind.SEPA in self.rails:
            yield from self.bank_refusals(self.rail_hosts)


class RailKeySection(RailSection):
    """The rail as a caller: the secret API key that every request to the rail carries."""

    SECRETS: ClassVar[dict[str, str]] = {"STRIPE_API_KEY": "stripe_api_key"}

    stripe_api_key: SecretStr = Field(
        SecretStr(LOCAL_SECRETS["STRIPE_API_KEY"]), alias="STRIPE_API_KEY", min_length=1
    )


class TelemetrySection(Section):
    """Log lines as JSON (or text), how many, and where spans go (nowhere by default)."""

    log_format: LogFormat = Field(LogFormat.JSON, alias="SETTLE_LOG_FORMAT")
    log_level: LogLevel = Field(LogLevel.INFO, alias="SETTLE_LOG_LEVEL")
    otel_exporter: TraceExporter = Field(TraceExporter.NONE, alias="SETTLE_OTEL_EXPORTER")
