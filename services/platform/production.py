"""Production mode's refusals: the settings under which real money must not move.

`SETTLE_ENV=production` refuses a secret or token left unset or at its local default (or too
short to be a secret), a Stripe API base that is not https, a database URL that does not
verify the server's certificate, and Kafka without client authentication over TLS. A service
driving Stripe's own API (`SETTLE_RAIL=stripe`, no `STRIPE_API_BASE`) moves real money in any
mode, so the secrets' refusals hold for it even when `SETTLE_ENV` is local; a local Stripe
fake named by `STRIPE_API_BASE` keeps working with the local defaults.

Each service holds only the secrets it uses (`SERVICE_SECRETS`), so a deployment gives each
pod only its own: a secret the service does not use may be left unset, and is then emptied
(`without_unused_secrets`), so that nothing in that process can authenticate with the public
local default. A secret that is given is refused when weak, whoever holds it.
"""

from __future__ import annotations

from collections.abc import Collection
from urllib.parse import parse_qs, urlsplit

from pydantic import SecretStr

from services.domain.errors import ConfigError
from services.platform.config import LOCAL_SECRETS, Deployment, KafkaProtocol, RailKind, Settings

# Shorter than this a secret or token is guessable, whatever its source; the generated
# values the README asks for (`openssl rand -hex 32`) are 64 characters.
MIN_SECRET_LENGTH = 16
VERIFYING_SSLMODES = ("verify-full", "verify-ca")
KAFKA_AUTH = "SASL_SSL with a user and password, or SSL with a client certificate and key"


# The secrets each service uses; commands and tools not named here use them all.
SERVICE_SECRETS: dict[str, frozenset[str]] = {
    "ledger": frozenset({"SETTLE_API_TOKENS", "SETTLE_COMMAND_SIGNING_SECRETS"}),
    "relay": frozenset({"STRIPE_API_KEY"}),
    "inbox": frozenset({"STRIPE_WEBHOOK_SECRET", "SETTLE_OPERATOR_TOKENS"}),
    "reconciler": frozenset({"STRIPE_API_KEY", "SETTLE_API_TOKENS", "SETTLE_OPERATOR_TOKENS"}),
    "console": frozenset({"STRIPE_API_KEY", "SETTLE_OPERATOR_TOKENS"}),
    "migrate": frozenset(),
}
ALL_SECRETS = frozenset().union(*SERVICE_SECRETS.values())
# Services that never dial Kafka: its security is not theirs to prove.
WITHOUT_KAFKA = frozenset({"inbox", "reconciler", "console"})
# Each secret variable and the setting that holds it.
SECRET_FIELDS: dict[str, str] = {
    "STRIPE_API_KEY": "stripe_api_key",
    "STRIPE_WEBHOOK_SECRET": "stripe_webhook_secret",
    "SETTLE_API_TOKENS": "api_tokens",
    "SETTLE_OPERATOR_TOKENS": "operator_tokens",
    "SETTLE_COMMAND_SIGNING_SECRETS": "command_signing_secrets",
}


def uses_kafka(service: str | None) -> bool:
    """Whether `service` reaches Kafka (every command and tool may)."""
    return service not in WITHOUT_KAFKA


def secrets_of(service: str | None) -> frozenset[str]:
    """The secret variables `service` uses (every one for None or a tool)."""
    return SERVICE_SECRETS.get(service or "", ALL_SECRETS)


def without_unused_secrets(
    settings: Settings, given: Collection[str], uses: Collection[str]
) -> Settings:
    """In production, `settings` with each unset secret outside `uses` emptied."""
    if settings.env is not Deployment.PRODUCTION:
        return settings
    unused = [f for v, f in SECRET_FIELDS.items() if v not in uses and v not in given]
    # What an unused, unset secret becomes: nothing that can authenticate.
    empty = {field: _emptied(getattr(settings, field)) for field in unused}
    return settings.model_copy(update=empty) if empty else settings


def _emptied(held: object) -> object:
    return SecretStr("") if isinstance(held, SecretStr) else type(held)()


def _held(held: object) -> list[SecretStr]:
    # One secret, a tuple of them, or a name's tuple of them for each name.
    if isinstance(held, SecretStr):
        return [held]
    if isinstance(held, dict):
        return [secret for secrets in held.values() for secret in secrets]
    assert isinstance(held, tuple)
    return list(held)


def refusal(
    settings: Settings,
    given: Collection[str],
    uses: Collection[str] = ALL_SECRETS,
    kafka: bool = True,
) -> ConfigError | None:
    """The first setting `settings` may not run with, as the ConfigError naming its variable
    (`given`: the variables the environment set; `uses`: the secrets the service uses;
    `kafka`: whether it reaches Kafka); None when nothing is refused."""
    production = settings.env is Deployment.PRODUCTION
    real_money = settings.rail is RailKind.STRIPE and settings.stripe_api_base is None
    if not (production or real_money):
        return None
    mode = "production mode" if production else "Stripe's own API (real money)"
    found = [_secrets(settings, given, uses, mode)]
    if production:
        found += [_stripe_base(settings), _database_tls(settings)]
        found += [_kafka_auth(settings)] if kafka else []
    return next((problem for problem in found if problem is not None), None)


def _secrets(
    settings: Settings, given: Collection[str], uses: Collection[str], mode: str
) -> ConfigError | None:
    for variable, field in SECRET_FIELDS.items():
        # Decided by presence, not value: an unset variable takes the public local default.
        if variable not in given:
            if variable in uses and _needed(settings, variable):
                return ConfigError(variable, f"is unset, and {mode} needs a secret of its own")
            continue
        problem = _weak(_held(getattr(settings, field)), mode)
        if problem is not None:
            return ConfigError(variable, problem)
    return None


def _needed(settings: Settings, variable: str) -> bool:
    # Command signing secrets are needed where commands must be signed; then every tenant
    # that may send commands needs one (checked by the ledger when it starts).
    if variable == "SETTLE_COMMAND_SIGNING_SECRETS":
        return settings.command_signing_required
    return True


def _weak(secrets: list[SecretStr], mode: str) -> str | None:
    values = [secret.get_secret_value() for secret in secrets]
    if any(value in LOCAL_SECRETS.values() for value in values):
        return f"holds a local default, printed in the README; {mode} needs a secret of its own"
    if any(len(value) < MIN_SECRET_LENGTH for value in values):
        return f"holds a value under {MIN_SECRET_LENGTH} characters, too short to be a secret"
    return None


def _stripe_base(settings: Settings) -> ConfigError | None:
    base = settings.stripe_api_base
    if base is not None and not base.startswith("https://"):
        return ConfigError(
            "STRIPE_API_BASE",
            "must be https:// in production mode: the secret key goes with every request",
        )
    return None


def _database_tls(settings: Settings) -> ConfigError | None:
    modes = parse_qs(urlsplit(settings.database_url).query).get("sslmode", [])
    # libpq and asyncpg read the last sslmode given; only the verify modes check who answers.
    if not modes or modes[-1] not in VERIFYING_SSLMODES:
        return ConfigError(
            "SETTLE_DATABASE_URL",
            "must verify the server's TLS certificate in production mode: add "
            "sslmode=verify-full (or verify-ca) to its query, and sslrootcert=<CA file>",
        )
    return None


def _kafka_auth(settings: Settings) -> ConfigError | None:
    protocol = settings.kafka_security_protocol
    if protocol is KafkaProtocol.SASL_SSL:
        if not settings.kafka_sasl_username:
            return ConfigError("SETTLE_KAFKA_SASL_USERNAME", "is unset; SASL_SSL needs a user")
        if settings.kafka_sasl_password is None:
            return ConfigError("SETTLE_KAFKA_SASL_PASSWORD", "is unset; SASL_SSL needs one")
        problem = _weak([settings.kafka_sasl_password], "production mode")
        return None if problem is None else ConfigError("SETTLE_KAFKA_SASL_PASSWORD", problem)
    if protocol is KafkaProtocol.SSL:
        if not settings.kafka_ssl_certfile:
            return ConfigError("SETTLE_KAFKA_SSL_CERTFILE", f"is unset; Kafka needs {KAFKA_AUTH}")
        if not settings.kafka_ssl_keyfile:
            return ConfigError("SETTLE_KAFKA_SSL_KEYFILE", f"is unset; Kafka needs {KAFKA_AUTH}")
        return None
    cleartext = protocol is KafkaProtocol.SASL_PLAINTEXT
    clear = " (SASL_PLAINTEXT sends the password in clear)" if cleartext else ""
    return ConfigError(
        "SETTLE_KAFKA_SECURITY_PROTOCOL",
        f"is {protocol.value}{clear}; production mode needs {KAFKA_AUTH}",
    )
