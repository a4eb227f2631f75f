"""One settings object, read from the environment; a bad value names its variable."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import (
    BeforeValidator,
    Field,
    InstanceOf,
    SecretStr,
    ValidationInfo,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from services.contracts.command_signature import CommandSigning
from services.domain.breaks import (
    DEFAULT_GRACE_SECONDS,
    DEFAULT_OVERLAP_SECONDS,
    DEFAULT_RECHECK_AGES,
    parse_ages,
)
from services.domain.payout import PayoutMethod
from services.domain.proposal import DEFAULT_MAX_AGE_SECONDS
from services.domain.tenant_limits import NO_LIMITS, TenantLimits, parse_tenant_limits
from services.platform.logs import LogFormat, LogLevel
from services.platform.tokens import by_token, parse_signing_secrets, parse_tokens
from services.platform.tracing import TraceExporter

LOCAL_DATABASE_URL = "postgresql+asyncpg://settle@127.0.0.1:55432/settle"
LOCAL_KAFKA_BOOTSTRAP = "127.0.0.1:59092"
# The secrets `make run` starts with, printed in the README: production refuses every one.
LOCAL_SECRETS = {
    "STRIPE_API_KEY": "sk_test_settle_local",
    "STRIPE_WEBHOOK_SECRET": "whsec_settle_local",
    "SETTLE_API_TOKENS": "acme-local-token",
    "SETTLE_OPERATOR_TOKENS": "ops-local-token",
}


class RailKind(StrEnum):
    """Which payment rail the relay drives."""

    SIM = "sim"
    STRIPE = "stripe"


class Deployment(StrEnum):
    """Where settle runs: `production` refuses local defaults and cleartext or anonymous links."""

    LOCAL = "local"
    PRODUCTION = "production"


class KafkaProtocol(StrEnum):
    """How clients reach the brokers (Kafka's `security.protocol`)."""

    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    """How a client proves its Kafka principal under SASL."""

    SCRAM_SHA_512 = "SCRAM-SHA-512"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    PLAIN = "PLAIN"


class Settings(BaseSettings):
    """Every knob settle reads, each under the environment variable of the same name."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore", populate_by_name=False)

    env: Deployment = Field(Deployment.LOCAL, alias="SETTLE_ENV")
    database_url: str = Field(LOCAL_DATABASE_URL, alias="SETTLE_DATABASE_URL")
    kafka_bootstrap: str = Field(LOCAL_KAFKA_BOOTSTRAP, alias="SETTLE_KAFKA_BOOTSTRAP")
    # Kafka client security: TLS (a CA file to verify the brokers; a client certificate and
    # key for mutual TLS) and SASL (a SCRAM user, the password held as a secret).
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
    rail: RailKind = Field(RailKind.SIM, alias="SETTLE_RAIL")
    stripe_api_key: SecretStr = Field(
        SecretStr(LOCAL_SECRETS["STRIPE_API_KEY"]), alias="STRIPE_API_KEY", min_length=1
    )
    stripe_api_base: str | None = Field(None, alias="STRIPE_API_BASE")
    stripe_webhook_secret: Annotated[tuple[SecretStr, ...], NoDecode] = Field(
        (SecretStr(LOCAL_SECRETS["STRIPE_WEBHOOK_SECRET"]),), alias="STRIPE_WEBHOOK_SECRET"
    )
    stripe_method: PayoutMethod = Field(PayoutMethod.TRANSFER, alias="SETTLE_STRIPE_METHOD")
    rail_idempotent: bool = Field(True, alias="SETTLE_RAIL_IDEMPOTENT")
    # Tenant (or operator) to its tokens: several at once while one is rotated out.
    api_tokens: Annotated[dict[str, tuple[SecretStr, ...]], NoDecode] = Field(
        {"acme": (SecretStr(LOCAL_SECRETS["SETTLE_API_TOKENS"]),)}, alias="SETTLE_API_TOKENS"
    )
    # Kafka commands: signed by their tenant (SETTLE_COMMAND_SIGNING; unset: required in
    # production, optional locally) under its secrets (tenant:secret pairs, several per tenant).
    command_signing: CommandSigning | None = Field(None, alias="SETTLE_COMMAND_SIGNING")
    command_signing_secrets: Annotated[
        dict[str, tuple[SecretStr, ...]], NoDecode, BeforeValidator(parse_signing_secrets)
    ] = Field({}, alias="SETTLE_COMMAND_SIGNING_SECRETS")
    relay_lease_seconds: float = Field(30.0, alias="SETTLE_RELAY_LEASE_SECONDS", ge=1.0)
    idempotency_replay_seconds: int = Field(86400, alias="SETTLE_IDEMPOTENCY_REPLAY_SECONDS", gt=0)
    idempotency_tombstone_seconds: int = Field(
        86400, alias="SETTLE_IDEMPOTENCY_TOMBSTONE_SECONDS", ge=0
    )
    # Idempotency records are deleted this long after first use (at least replay + tombstone),
    # by the ledger every cleanup interval, at most a batch per statement.
    idempotency_retention_hours: float = Field(
        48.0, alias="SETTLE_IDEMPOTENCY_RETENTION_HOURS", gt=0
    )
    idempotency_cleanup_seconds: float = Field(
        60.0, alias="SETTLE_IDEMPOTENCY_CLEANUP_SECONDS", gt=0
    )
    idempotency_cleanup_batch: int = Field(
        1000, alias="SETTLE_IDEMPOTENCY_CLEANUP_BATCH", ge=1, le=50_000
    )
    # The inbox: webhook body cap, parked-event retry budget and backoff, apply workers, and
    # the operator tokens (name:token pairs) of GET /v1/inbox and replay.
    inbox_max_body_bytes: int = Field(65536, alias="SETTLE_INBOX_MAX_BODY_BYTES", ge=1024)
    inbox_park_attempts: int = Field(10, alias="SETTLE_INBOX_PARK_ATTEMPTS", ge=1)
    inbox_retry_seconds: float = Field(1.0, alias="SETTLE_INBOX_RETRY_SECONDS", gt=0)
    inbox_retry_max_seconds: float = Field(300.0, alias="SETTLE_INBOX_RETRY_MAX_SECONDS", gt=0)
    inbox_workers: int = Field(4, alias="SETTLE_INBOX_WORKERS", ge=1, le=64)
    operator_tokens: Annotated[dict[str, tuple[SecretStr, ...]], NoDecode] = Field(
        {"ops": (SecretStr(LOCAL_SECRETS["SETTLE_OPERATOR_TOKENS"]),)},
        alias="SETTLE_OPERATOR_TOKENS",
    )
    # The reconciler: seconds between intraday runs, the ages at which open breaks and
    # submitted settlements are compared again ("1h,1d,7d,30d"; a bare number is seconds),
    # and how long an item handed to the rail may lag before the lag is a break.
    reconcile_interval_seconds: float = Field(300.0, alias="SETTLE_RECONCILE_INTERVAL", gt=0)
    reconcile_recheck_ages: Annotated[tuple[int, ...], NoDecode] = Field(
        DEFAULT_RECHECK_AGES, alias="SETTLE_RECONCILE_RECHECK_AGES"
    )
    reconcile_grace_seconds: int = Field(
        DEFAULT_GRACE_SECONDS, alias="SETTLE_RECONCILE_GRACE_SECONDS", ge=0
    )
    # How far back before the last run's end an intraday run reads again, for objects the
    # rail listed late. Items still pending are judged by the re-checks, not by this.
    reconcile_overlap_seconds: float = Field(
        DEFAULT_OVERLAP_SECONDS, alias="SETTLE_RECONCILE_OVERLAP_SECONDS", ge=0
    )

    # Limits and back-pressure: per-tenant caps, allow-lists, deposits and rates (JSON, read
    # by domain/tenant_limits.py), and how many settlement requests a ledger process holds
    # at once (HTTP in flight and Kafka commands being booked) before answering 503.
    tenant_limits: Annotated[InstanceOf[TenantLimits], NoDecode] = Field(
        NO_LIMITS, alias="SETTLE_TENANT_LIMITS"
    )
    accept_backlog: int = Field(10_000, alias="SETTLE_ACCEPT_BACKLOG", ge=1)
    # Maker-checker (services/operations/approvals.py): whether resolutions and replays wait
    # for a second operator (unset: in production mode only), and how long a proposal waits.
    two_person: bool | None = Field(None, alias="SETTLE_TWO_PERSON")
    proposal_max_age_seconds: int = Field(
        DEFAULT_MAX_AGE_SECONDS, alias="SETTLE_PROPOSAL_MAX_AGE_SECONDS", gt=0
    )
    # Observability: log lines as JSON (or text), how many, and where spans go (nowhere).
    log_format: LogFormat = Field(LogFormat.JSON, alias="SETTLE_LOG_FORMAT")
    log_level: LogLevel = Field(LogLevel.INFO, alias="SETTLE_LOG_LEVEL")
    otel_exporter: TraceExporter = Field(TraceExporter.NONE, alias="SETTLE_OTEL_EXPORTER")

    @field_validator("tenant_limits", mode="before")
    @classmethod
    def _limits(cls, value: object) -> object:
        return parse_tenant_limits(value) if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: str) -> str:
        if not value.startswith(("postgresql://", "postgresql+asyncpg://")):
            raise ValueError("must be a postgresql:// or postgresql+asyncpg:// URL")
        return value.replace("postgresql://", "postgresql+asyncpg://", 1)

    @field_validator("idempotency_retention_hours")
    @classmethod
    def _retention_covers_windows(cls, value: float, info: ValidationInfo) -> float:
        windows = info.data.get("idempotency_replay_seconds", 0) + info.data.get(
            "idempotency_tombstone_seconds", 0
        )
        if value * 3600 < windows:
            raise ValueError(
                f"must be at least replay + tombstone ({windows / 3600:g} hours), "
                "or a retried request could run twice"
            )
        return value

    @field_validator("kafka_bootstrap")
    @classmethod
    def _host_ports(cls, value: str) -> str:
        for server in value.split(","):
            host, _, port = server.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ValueError("must be host:port[,host:port...]")
        return value

    @field_validator("stripe_api_base")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    @field_validator("stripe_webhook_secret", mode="before")
    @classmethod
    def _secrets(cls, value: object) -> object:
        # Several secrets, comma-separated, are all accepted during a rotation.
        if isinstance(value, str):
            secrets = tuple(s.strip() for s in value.split(",") if s.strip())
            if not secrets:
                raise ValueError("must name at least one signing secret")
            return secrets
        return value

    @field_validator("reconcile_recheck_ages", mode="before")
    @classmethod
    def _ages(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        parts = [p.strip() for p in value.split(",")]
        return parse_ages(",".join(f"{p}s" if p.isdigit() else p for p in parts))

    @field_validator("api_tokens", "operator_tokens", mode="before")
    @classmethod
    def _tokens(cls, value: object) -> object:
        return parse_tokens(value) if isinstance(value, str) else value

    @property
    def tenant_by_token(self) -> dict[str, str]:
        """Bearer token to tenant, the lookup the HTTP layer does on every request."""
        return by_token(self.api_tokens)

    @property
    def operator_by_token(self) -> dict[str, str]:
        """Bearer token to operator name, for the operator endpoints."""
        return by_token(self.operator_tokens)

    @property
    def command_signing_required(self) -> bool:
        """Whether every Kafka command must carry its tenant's signature."""
        if self.command_signing is None:
            return self.env is Deployment.PRODUCTION
        return self.command_signing is CommandSigning.REQUIRED

    @property
    def two_person_required(self) -> bool:
        """Whether an operator's resolution or replay needs a second operator's approval."""
        return self.env is Deployment.PRODUCTION if self.two_person is None else self.two_person

    def topic(self, name: str) -> str:
        """The Kafka topic `name` under this deployment's prefix."""
        return f"{self.topic_prefix}{name}"


def libpq_dsn(database_url: str) -> str:
    """The asyncpg/libpq DSN of a `postgresql+asyncpg://` URL."""
    return database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
