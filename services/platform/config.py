"""What every settings section shares: where settle runs, the local defaults, and the rule
production mode applies to each secret.

Settings come in sections (services/platform/sections.py, authority.py, tuning.py), each a
group of environment variables with its own validation and its own production refusals.
A service's settings class (services/platform/service_settings.py) is composed of the
sections it uses and holds no others: a relay has no tenant tokens, an inbox no Stripe key.

`SETTLE_ENV=production` refuses a secret or token left unset or at its local default (or too
short to be a secret), cleartext or anonymous links (the database, Kafka, the rails), the
rail simulator, a rail address the deploy did not name, opt-outs (unsigned commands, one
operator alone, failpoints) and a tenant without limits: each section says its own rules
(`production_refusals`). A service driving Stripe's own API (`SETTLE_RAIL=stripe` with no
`STRIPE_API_BASE`, or with Stripe's own address in it) moves real money in any mode, so the
secrets' refusals hold for it even when `SETTLE_ENV` is local; a local Stripe fake named by
`STRIPE_API_BASE` keeps working with the local defaults. Unset is decided by the
environment, not by the value: an unset variable takes the public local default.
`refusals()` lists every refusal at once; a service starts only with none
(services/platform/settings.py), and `settle config check` prints them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import BeforeValidator, Field, SecretStr
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from services.domain.errors import ConfigError
from services.platform.tokens import parse_signing_secrets, parse_tokens

LOCAL_DATABASE_URL = "postgresql+asyncpg://settle@127.0.0.1:55432/settle"
LOCAL_KAFKA_BOOTSTRAP = "127.0.0.1:59092"
LOCAL_SEPA_BANK_URL = "http://127.0.0.1:12112"  # `settle banksim`'s default address
# The secrets `make run` starts with, printed in the README: production refuses every one.
LOCAL_SECRETS = {
    "STRIPE_API_KEY": "sk_test_settle_local",
    "STRIPE_WEBHOOK_SECRET": "whsec_settle_local",
    "SETTLE_API_TOKENS": "acme-local-token",
    "SETTLE_OPERATOR_TOKENS": "ops-local-token",
}
# Shorter than this a secret or token is guessable, whatever its source; the generated
# values the README asks for (`openssl rand -hex 32`) are 64 characters.
MIN_SECRET_LENGTH = 16


class Deployment(StrEnum):
    """Where settle runs: `production` refuses local defaults and cleartext or anonymous links."""

    LOCAL = "local"
    PRODUCTION = "production"


class RailKind(StrEnum):
    """A payment rail settle drives: Stripe's API (`stripe`, or the local simulator that
    speaks it, `sim`), or SEPA credit transfers through a bank's file interface (`sepa`)."""

    SIM = "sim"
    STRIPE = "stripe"
    SEPA = "sepa"

    @property
    def speaks_stripe(self) -> bool:
        """Whether the Stripe adapter drives this rail."""
        return self is not RailKind.SEPA


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


def _split_secrets(value: object) -> object:
    # Several secrets, comma-separated, are all accepted during a rotation.
    if isinstance(value, str):
        secrets = tuple(s.strip() for s in value.split(",") if s.strip())
        if not secrets:
            raise ValueError("must name at least one signing secret")
        return secrets
    return value


def _named_tokens(value: object) -> object:
    return parse_tokens(value) if isinstance(value, str) else value


# A name's tokens (tenant or operator), several while one is rotated out.
Tokens = Annotated[dict[str, tuple[SecretStr, ...]], NoDecode, BeforeValidator(_named_tokens)]
# A tenant's command-signing secrets, several while one is rotated out.
SigningSecrets = Annotated[
    dict[str, tuple[SecretStr, ...]], NoDecode, BeforeValidator(parse_signing_secrets)
]
# Secrets accepted side by side during a rotation (a webhook endpoint's).
RotatedSecrets = Annotated[tuple[SecretStr, ...], NoDecode, BeforeValidator(_split_secrets)]


def weakness(secrets: list[SecretStr], mode: str) -> str | None:
    """Why `secrets` are no secrets under `mode`: a local default or too short; else None."""
    values = [secret.get_secret_value() for secret in secrets]
    if any(value in LOCAL_SECRETS.values() for value in values):
        return f"holds a local default, printed in the README; {mode} needs a secret of its own"
    if any(len(value) < MIN_SECRET_LENGTH for value in values):
        return f"holds a value under {MIN_SECRET_LENGTH} characters, too short to be a secret"
    return None


def held(value: object) -> list[SecretStr]:
    """Every secret in a setting: one, a tuple of them, or a name's tuple for each name."""
    if isinstance(value, SecretStr):
        return [value]
    if isinstance(value, dict):
        return [secret for secrets in value.values() for secret in secrets]
    assert isinstance(value, tuple)
    return list(value)


class Section(BaseSettings):
    """A group of settings, each under the environment variable of its alias. A section
    names its secrets in SECRETS (variable to field) and its production rules in
    `production_refusals`; the settings a service is given are the sections it is composed
    of. Every section knows where settle runs and whether failpoints are armed."""

    model_config = SettingsConfigDict(frozen=True, extra="ignore", populate_by_name=False)
    # The secret variables this section holds, each with its field.
    SECRETS: ClassVar[dict[str, str]] = {}

    env: Deployment = Field(Deployment.LOCAL, alias="SETTLE_ENV")
    # Read here only to be refused in production; services/platform/failpoints.py arms them.
    failpoints: str = Field("", alias="SETTLE_FAILPOINTS")

    @property
    def production(self) -> bool:
        return self.env is Deployment.PRODUCTION

    @property
    def moves_real_money(self) -> bool:
        """Whether this service drives a rail's real API (the rail section knows)."""
        return False

    def strict_mode(self) -> str | None:
        """The mode that refuses local defaults, named for messages; None when local."""
        if self.production:
            return "production mode"
        return "Stripe's own API (real money)" if self.moves_real_money else None

    def needs(self, variable: str) -> bool:
        """Whether the service needs `variable` set (a section may need it only sometimes)."""
        return True

    def production_refusals(self) -> Iterator[ConfigError]:
        """A section's own production rules beyond its secrets (TLS, an https base), each
        refusal naming its variable; every section's: no failpoints armed."""
        if self.failpoints.strip():
            yield ConfigError(
                "SETTLE_FAILPOINTS",
                "is set; production mode runs no crash or pause points: unset it",
            )

    def secret_refusals(self) -> list[ConfigError]:
        """Every secret of these settings the strict mode refuses: unset where needed, or
        weak; [] when local."""
        mode = self.strict_mode()
        if mode is None:
            return []
        secrets = [s.__dict__.get("SECRETS", {}) for s in _sections(self)]
        return [
            problem
            for held_here in secrets
            for variable, field in held_here.items()
            if (problem := self._secret_refusal(variable, field, mode)) is not None
        ]

    def refusals(self) -> list[ConfigError]:
        """Every refusal of these settings, in the order a reader would look: the secrets,
        then each section's production rules, sections in the order the class lists them."""
        rules = [s for s in _sections(self) if "production_refusals" in s.__dict__]
        found = self.secret_refusals()
        if self.production:
            found += [problem for s in rules for problem in s.production_refusals(self)]
        return found

    def _secret_refusal(self, variable: str, field: str, mode: str) -> ConfigError | None:
        if field not in self.model_fields_set:
            if self.needs(variable):
                return ConfigError(variable, f"is unset, and {mode} needs a secret of its own")
            return None
        problem = weakness(held(getattr(self, field)), mode)
        return None if problem is None else ConfigError(variable, problem)


def _sections(settings: Section) -> list[type[Section]]:
    return [c for c in type(settings).__mro__ if issubclass(c, Section)]


def libpq_dsn(database_url: str) -> str:
    """The asyncpg/libpq DSN of a `postgresql+asyncpg://` URL."""
    return database_url.replace("postgresql+asyncpg://", "postgresql://", 1)
