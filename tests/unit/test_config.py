"""Configuration: defaults that run locally, and every bad value named by its variable."""

from __future__ import annotations

import pytest

from services.domain.errors import ConfigError
from services.domain.payout import PayoutMethod
from services.platform.config import LOCAL_DATABASE_URL, RailKind
from services.platform.service_settings import SERVICES
from services.platform.settings import load_settings


def test_defaults_point_at_the_local_stack() -> None:
    settings = load_settings({})
    assert settings.database_url == LOCAL_DATABASE_URL
    assert settings.kafka_bootstrap == "127.0.0.1:59092"
    assert settings.rail is RailKind.SIM
    assert settings.stripe_method is PayoutMethod.TRANSFER
    assert settings.rail_idempotent is True
    assert settings.idempotency_replay_seconds == 86400
    assert settings.idempotency_tombstone_seconds == 86400


def test_values_are_read_from_their_variables() -> None:
    settings = load_settings(
        {
            "SETTLE_DATABASE_URL": "postgresql://u:p@db:5432/x",
            "SETTLE_KAFKA_BOOTSTRAP": "k1:9092,k2:9092",
            "SETTLE_RAIL": "stripe",
            "STRIPE_API_BASE": "http://127.0.0.1:12111",
            "SETTLE_STRIPE_METHOD": "payout",
            "SETTLE_RAIL_IDEMPOTENT": "false",
            "SETTLE_API_TOKENS": "acme:tok-a, globex:tok-g",
            "STRIPE_WEBHOOK_SECRET": "whsec_new,whsec_old",
            "SETTLE_IDEMPOTENCY_REPLAY_SECONDS": "5",
            "SETTLE_IDEMPOTENCY_TOMBSTONE_SECONDS": "0",
            "SETTLE_TOPIC_PREFIX": "t1.",
        }
    )
    assert settings.database_url == "postgresql+asyncpg://u:p@db:5432/x"
    assert settings.rail is RailKind.STRIPE and settings.stripe_method is PayoutMethod.PAYOUT
    assert settings.rail_idempotent is False
    assert settings.tenant_by_token == {"tok-a": "acme", "tok-g": "globex"}
    assert [s.get_secret_value() for s in settings.stripe_webhook_secret] == [
        "whsec_new",
        "whsec_old",
    ]
    assert settings.idempotency_replay_seconds == 5
    assert settings.topic("settlement.events") == "t1.settlement.events"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SETTLE_DATABASE_URL", "mysql://db/x"),
        ("SETTLE_KAFKA_BOOTSTRAP", "no-port"),
        ("SETTLE_RAIL", "paypal"),
        ("SETTLE_STRIPE_METHOD", "cheque"),
        ("SETTLE_RAIL_IDEMPOTENT", "perhaps"),
        ("SETTLE_API_TOKENS", "acme-without-token"),
        ("SETTLE_API_TOKENS", "acme:same,globex:same"),
        ("SETTLE_API_TOKENS", "acme:same,acme:same"),
        ("SETTLE_API_TOKENS", "acme:tok-a,platform:tok-p"),  # settle's own accounts
        ("SETTLE_OPERATOR_TOKENS", "ops:same,audit:same"),
        ("SETTLE_IDEMPOTENCY_REPLAY_SECONDS", "0"),
        ("SETTLE_IDEMPOTENCY_REPLAY_SECONDS", "a day"),
        ("SETTLE_IDEMPOTENCY_TOMBSTONE_SECONDS", "-1"),
        ("STRIPE_API_BASE", "localhost:12111"),
        ("STRIPE_WEBHOOK_SECRET", " , "),
        ("SETTLE_TOPIC_PREFIX", "has space"),
    ],
)
def test_a_bad_value_names_its_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({variable: value})
    assert caught.value.variable == variable
    assert str(caught.value).startswith(f"{variable}: ")


def test_process_environment_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETTLE_RAIL", "stripe")
    monkeypatch.setenv("STRIPE_API_BASE", "http://127.0.0.1:12111")
    assert load_settings().rail is RailKind.STRIPE
    monkeypatch.setenv("SETTLE_RAIL", "wire")
    with pytest.raises(ConfigError, match=r"^SETTLE_RAIL: "):
        load_settings()


def test_start_up_fails_with_the_variable_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from tools.cli import cli

    monkeypatch.setenv("SETTLE_DATABASE_URL", "mysql://db/settle")
    result = CliRunner().invoke(cli, ["migrate", "--skip-topics"])
    assert result.exit_code != 0
    assert "SETTLE_DATABASE_URL" in result.output


@pytest.mark.parametrize(
    ("service", "variable"),
    [
        ("migrate", "SETTLE_IDEMPOTENCY_REPLAY_SECONDS"),
        ("relay", "SETTLE_INBOX_WORKERS"),
        ("inbox", "SETTLE_RECONCILE_INTERVAL"),
        ("reconciler", "SETTLE_RELAY_LEASE_SECONDS"),
        ("console", "SETTLE_KAFKA_BOOTSTRAP"),
    ],
)
def test_a_service_reads_only_its_own_settings(service: str, variable: str) -> None:
    # A variable of another service's sections is not read, so not refused either.
    settings = load_settings({variable: "not a value"}, kind=SERVICES[service])
    assert variable not in {field.alias for field in type(settings).model_fields.values()}
    with pytest.raises(ConfigError, match=variable):
        load_settings({variable: "not a value"})


def test_a_tenant_and_an_operator_may_hold_several_tokens_during_a_rotation() -> None:
    settings = load_settings(
        {
            "SETTLE_API_TOKENS": "acme:tok-old,globex:tok-g,acme:tok-new",
            "SETTLE_OPERATOR_TOKENS": "ops:ops-old,ops:ops-new",
        }
    )
    assert settings.tenant_by_token == {"tok-old": "acme", "tok-new": "acme", "tok-g": "globex"}
    assert settings.operator_by_token == {"ops-old": "ops", "ops-new": "ops"}
    tokens = settings.api_tokens["acme"]
    assert [t.get_secret_value() for t in tokens] == ["tok-old", "tok-new"]


def test_a_token_given_to_two_tenants_names_neither_token() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"SETTLE_API_TOKENS": "acme:s3cret-shared,globex:s3cret-shared"})
    assert caught.value.variable == "SETTLE_API_TOKENS"
    assert "s3cret-shared" not in str(caught.value)
