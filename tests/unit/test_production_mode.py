"""Production mode: every unsafe setting refused at start with its variable named, and the
configurations a real deployment uses accepted; Stripe's own API refuses local secrets in
any mode."""

from __future__ import annotations

import pytest

from services.domain.errors import ConfigError
from services.platform.config import LOCAL_SECRETS, MIN_SECRET_LENGTH
from services.platform.service_settings import SERVICES, Settings
from services.platform.settings import load_settings
from tests.production_env import (
    ACME_TOKEN,
    API_KEY,
    DATABASE_URL,
    KAFKA_PASSWORD,
    OPS_TOKEN,
    PRODUCTION,
    WEBHOOK_SECRET,
    limits_for,
    production,
)

SECRETS = (API_KEY, WEBHOOK_SECRET, ACME_TOKEN, OPS_TOKEN, KAFKA_PASSWORD)


@pytest.fixture(autouse=True)
def _no_settings_in_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # load_settings reads the process environment too: only what a test gives may count.
    for variable in Settings.model_fields.values():
        if variable.alias:
            monkeypatch.delenv(variable.alias, raising=False)


def refused(environ: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ)
    return caught.value


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"SETTLE_DATABASE_URL": DATABASE_URL.replace("verify-full", "verify-ca")},
        {"SETTLE_DATABASE_URL": "postgresql://u:p@db:5432/settle?sslmode=verify-full"},
        {"SETTLE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256"},
        {
            "SETTLE_KAFKA_SECURITY_PROTOCOL": "SSL",
            "SETTLE_KAFKA_SASL_USERNAME": None,
            "SETTLE_KAFKA_SASL_PASSWORD": None,
            "SETTLE_KAFKA_SSL_CAFILE": "/etc/settle/kafka-ca.pem",
            "SETTLE_KAFKA_SSL_CERTFILE": "/etc/settle/client.pem",
            "SETTLE_KAFKA_SSL_KEYFILE": "/etc/settle/client.key",
        },
        {
            "STRIPE_API_BASE": "https://stripe-proxy.internal",
            "SETTLE_RAIL_HOSTS": "stripe-proxy.internal",
        },
        {"STRIPE_WEBHOOK_SECRET": f"{WEBHOOK_SECRET},whsec_0d9c8b7a6f5e4d3c2b1a"},
        {
            "SETTLE_API_TOKENS": f"acme:{ACME_TOKEN},acme:{ACME_TOKEN}-2,globex:g-8e1f3a5c7b9d0246",
            "SETTLE_TENANT_LIMITS": limits_for("acme", "globex"),
        },
    ],
    ids=lambda changes: ",".join(changes) or "as-is",
)
def test_a_production_configuration_is_accepted(changes: dict[str, str | None]) -> None:
    settings = load_settings(production(**changes))
    assert settings.env == "production"


@pytest.mark.parametrize(
    ("changes", "variable", "why"),
    [
        ({"STRIPE_API_KEY": None}, "STRIPE_API_KEY", "is unset"),
        ({"STRIPE_API_KEY": LOCAL_SECRETS["STRIPE_API_KEY"]}, "STRIPE_API_KEY", "local default"),
        ({"STRIPE_API_KEY": "sk_live_1234"}, "STRIPE_API_KEY", "too short"),
        ({"STRIPE_WEBHOOK_SECRET": None}, "STRIPE_WEBHOOK_SECRET", "is unset"),
        (
            {"STRIPE_WEBHOOK_SECRET": f"{WEBHOOK_SECRET},{LOCAL_SECRETS['STRIPE_WEBHOOK_SECRET']}"},
            "STRIPE_WEBHOOK_SECRET",
            "local default",
        ),
        ({"STRIPE_WEBHOOK_SECRET": "whsec_x"}, "STRIPE_WEBHOOK_SECRET", "too short"),
        ({"SETTLE_API_TOKENS": None}, "SETTLE_API_TOKENS", "is unset"),
        ({"SETTLE_API_TOKENS": "acme:acme-local-token"}, "SETTLE_API_TOKENS", "local default"),
        # A tenant's public local token is refused even beside a good one (a rotation).
        (
            {"SETTLE_API_TOKENS": f"acme:{ACME_TOKEN},globex:acme-local-token"},
            "SETTLE_API_TOKENS",
            "local default",
        ),
        ({"SETTLE_API_TOKENS": f"acme:{ACME_TOKEN},b:tok-b"}, "SETTLE_API_TOKENS", "too short"),
        ({"SETTLE_OPERATOR_TOKENS": None}, "SETTLE_OPERATOR_TOKENS", "is unset"),
        ({"SETTLE_OPERATOR_TOKENS": "ops:ops-local-token"}, "SETTLE_OPERATOR_TOKENS", "default"),
        ({"SETTLE_OPERATOR_TOKENS": "ops:letmein"}, "SETTLE_OPERATOR_TOKENS", "too short"),
        ({"STRIPE_API_BASE": "http://stripe-proxy.internal"}, "STRIPE_API_BASE", "https://"),
        (
            {"SETTLE_DATABASE_URL": "postgresql://u:p@db:5432/settle"},
            "SETTLE_DATABASE_URL",
            "sslmode=verify-full",
        ),
        (
            {"SETTLE_DATABASE_URL": "postgresql://u:p@db:5432/settle?sslmode=require"},
            "SETTLE_DATABASE_URL",
            "verify the server's TLS certificate",
        ),
        (
            {"SETTLE_DATABASE_URL": f"{DATABASE_URL}&sslmode=prefer"},
            "SETTLE_DATABASE_URL",
            "verify the server's TLS certificate",
        ),
        (
            {"SETTLE_KAFKA_SECURITY_PROTOCOL": None},
            "SETTLE_KAFKA_SECURITY_PROTOCOL",
            "is PLAINTEXT",
        ),
        (
            {"SETTLE_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"},
            "SETTLE_KAFKA_SECURITY_PROTOCOL",
            "password in clear",
        ),
        (
            {"SETTLE_KAFKA_SECURITY_PROTOCOL": "SSL"},
            "SETTLE_KAFKA_SSL_CERTFILE",
            "client certificate",
        ),
        (
            {"SETTLE_KAFKA_SECURITY_PROTOCOL": "SSL", "SETTLE_KAFKA_SSL_CERTFILE": "/c.pem"},
            "SETTLE_KAFKA_SSL_KEYFILE",
            "client certificate",
        ),
        ({"SETTLE_KAFKA_SASL_USERNAME": None}, "SETTLE_KAFKA_SASL_USERNAME", "needs a user"),
        ({"SETTLE_KAFKA_SASL_PASSWORD": None}, "SETTLE_KAFKA_SASL_PASSWORD", "is unset"),
        ({"SETTLE_KAFKA_SASL_PASSWORD": "hunter2"}, "SETTLE_KAFKA_SASL_PASSWORD", "too short"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_production_refuses_an_unsafe_setting_naming_its_variable(
    changes: dict[str, str | None], variable: str, why: str
) -> None:
    error = refused(production(**changes))
    assert error.variable == variable
    assert str(error).startswith(f"{variable}: ")
    assert why in error.problem
    assert not any(secret in str(error) for secret in SECRETS)


def test_unset_is_decided_by_the_environment_not_by_the_value(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every secret from the process environment: nothing is unset.
    for variable, value in production().items():
        monkeypatch.setenv(variable, value)
    assert load_settings().stripe_api_key.get_secret_value() == API_KEY
    monkeypatch.delenv("STRIPE_WEBHOOK_SECRET")
    assert refused({}).variable == "STRIPE_WEBHOOK_SECRET"


def test_the_minimum_secret_length_is_inclusive() -> None:
    exactly = "k" * MIN_SECRET_LENGTH
    assert load_settings(production(SETTLE_OPERATOR_TOKENS=f"ops:{exactly}"))
    assert refused(production(SETTLE_OPERATOR_TOKENS=f"ops:{exactly[1:]}")).variable == (
        "SETTLE_OPERATOR_TOKENS"
    )


def test_local_mode_keeps_its_defaults() -> None:
    settings = load_settings({})
    assert settings.stripe_api_key.get_secret_value() == LOCAL_SECRETS["STRIPE_API_KEY"]
    assert settings.tenant_by_token == {LOCAL_SECRETS["SETTLE_API_TOKENS"]: "acme"}
    assert settings.operator_by_token == {LOCAL_SECRETS["SETTLE_OPERATOR_TOKENS"]: "ops"}


def test_stripes_own_api_refuses_local_secrets_in_local_mode() -> None:
    error = refused({"SETTLE_RAIL": "stripe"})
    assert error.variable == "STRIPE_API_KEY" and "real money" in error.problem
    real = {k: PRODUCTION[k] for k in ("SETTLE_RAIL", "STRIPE_API_KEY", "STRIPE_WEBHOOK_SECRET")}
    assert refused(real).variable == "SETTLE_API_TOKENS"
    given = production(SETTLE_OPERATOR_TOKENS="ops:ops-local-token", SETTLE_ENV="local")
    assert refused(given).variable == "SETTLE_OPERATOR_TOKENS"
    # Only production asks for TLS: a local run against Stripe's API needs its secrets alone.
    local = production(SETTLE_ENV="local", SETTLE_DATABASE_URL=None)
    local.pop("SETTLE_KAFKA_SECURITY_PROTOCOL")
    assert load_settings(local).rail == "stripe"


def test_a_local_stripe_fake_over_http_keeps_the_local_defaults() -> None:
    settings = load_settings({"SETTLE_RAIL": "stripe", "STRIPE_API_BASE": "http://127.0.0.1:12111"})
    assert settings.stripe_api_key.get_secret_value() == LOCAL_SECRETS["STRIPE_API_KEY"]


def test_settings_never_show_a_secret() -> None:
    settings = load_settings(production())
    shown = [repr(settings), str(settings), settings.model_dump_json()]
    assert not [secret for secret in SECRETS for text in shown if secret in text]


@pytest.mark.parametrize(
    ("command", "missing"),
    [
        ("ledger", "SETTLE_API_TOKENS"),
        ("ledger", "SETTLE_COMMAND_SIGNING_SECRETS"),
        ("relay", "STRIPE_API_KEY"),
        ("inbox", "STRIPE_WEBHOOK_SECRET"),
        ("reconciler", "SETTLE_OPERATOR_TOKENS"),
        ("reconciler", "STRIPE_API_KEY"),
        ("console", "SETTLE_OPERATOR_TOKENS"),
        ("console", "STRIPE_API_KEY"),
    ],
)
def test_every_service_refuses_to_start_without_a_secret_it_uses(
    monkeypatch: pytest.MonkeyPatch, command: str, missing: str
) -> None:
    from click.testing import CliRunner

    from tools.cli import cli

    for variable, value in production(**{missing: None}).items():
        monkeypatch.setenv(variable, value)
    result = CliRunner().invoke(cli, [command])
    assert result.exit_code != 0
    assert f"{missing}: is unset" in result.output


def test_migrate_refuses_a_local_default_it_is_given_though_it_uses_no_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from click.testing import CliRunner

    from tools.cli import cli

    environ = production(STRIPE_API_KEY=LOCAL_SECRETS["STRIPE_API_KEY"], SETTLE_API_TOKENS=None)
    for variable, value in environ.items():
        monkeypatch.setenv(variable, value)
    result = CliRunner().invoke(cli, ["migrate"])
    assert result.exit_code != 0
    assert "STRIPE_API_KEY: holds a local default" in result.output


@pytest.mark.parametrize(
    ("service", "unset", "field"),
    [
        ("relay", "STRIPE_WEBHOOK_SECRET", "stripe_webhook_secret"),
        ("relay", "SETTLE_API_TOKENS", "api_tokens"),
        ("inbox", "STRIPE_API_KEY", "stripe_api_key"),
        ("ledger", "SETTLE_OPERATOR_TOKENS", "operator_tokens"),
        ("ledger", "STRIPE_API_KEY", "stripe_api_key"),
        ("reconciler", "STRIPE_WEBHOOK_SECRET", "stripe_webhook_secret"),
        ("console", "STRIPE_WEBHOOK_SECRET", "stripe_webhook_secret"),
        ("migrate", "STRIPE_API_KEY", "stripe_api_key"),
    ],
)
def test_a_pod_is_given_only_its_own_secrets(service: str, unset: str, field: str) -> None:
    # Not held at all, in production or locally: nothing in the process can use it.
    for environ in (production(**{unset: None}), {}):
        settings = load_settings(environ, kind=SERVICES[service])
        assert not hasattr(settings, field)


def test_the_console_holds_tenant_tokens_it_is_given_and_nothing_usable_when_not() -> None:
    # Tenants sign in to their own view where tokens are given; unset, the public local
    # default is not kept in production, so nothing can sign in with it.
    console = SERVICES["console"]
    assert not load_settings(production(SETTLE_API_TOKENS=None), kind=console).api_tokens
    given = load_settings(production(), kind=console)
    assert given.tenant_by_token == {ACME_TOKEN: "acme"}
    # Locally the defaults stay, so `make run` needs no secrets at all.
    assert load_settings({}, kind=console).tenant_by_token == {
        LOCAL_SECRETS["SETTLE_API_TOKENS"]: "acme"
    }


@pytest.mark.parametrize(
    ("service", "refused_too"),
    [
        ("inbox", False),
        ("reconciler", False),
        ("console", False),
        ("relay", True),
        ("ledger", True),
    ],
)
def test_kafka_security_is_required_only_of_services_that_reach_kafka(
    service: str, refused_too: bool
) -> None:
    plaintext = production(
        SETTLE_KAFKA_SECURITY_PROTOCOL=None,
        SETTLE_KAFKA_SASL_USERNAME=None,
        SETTLE_KAFKA_SASL_PASSWORD=None,
    )
    if refused_too:
        with pytest.raises(ConfigError, match="SETTLE_KAFKA_SECURITY_PROTOCOL"):
            load_settings(plaintext, kind=SERVICES[service])
    else:
        assert load_settings(plaintext, kind=SERVICES[service]).env == "production"
