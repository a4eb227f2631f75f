"""The rails a deployment drives: `SETTLE_RAILS` (or the one `SETTLE_RAIL` names), each
tenant's default per currency, and the bank of the SEPA rail, every bad value named."""

from __future__ import annotations

from datetime import time

import pytest

from services.domain.errors import ConfigError
from services.platform.config import RailKind
from services.platform.service_settings import LedgerSettings, RelaySettings
from services.platform.settings import load_settings

IBAN = "DE89370400440532013000"
PRODUCTION = {
    "SETTLE_ENV": "production",
    "SETTLE_DATABASE_URL": "postgresql://db/settle?sslmode=verify-full",
    "SETTLE_KAFKA_SECURITY_PROTOCOL": "SSL",
    "SETTLE_KAFKA_SSL_CERTFILE": "/etc/settle/kafka.crt",
    "SETTLE_KAFKA_SSL_KEYFILE": "/etc/settle/kafka.key",
    "STRIPE_API_KEY": "sk_live_" + "k" * 32,
    "SETTLE_RAIL_HOSTS": "bank",
}


def test_settle_rails_wins_over_settle_rail_and_keeps_its_order() -> None:
    settings = load_settings({"SETTLE_RAIL": "stripe", "SETTLE_RAILS": "sepa, sim"})
    assert settings.rails == (RailKind.SEPA, RailKind.SIM)
    assert settings.api_rail is RailKind.SIM
    fake = {"STRIPE_API_BASE": "http://127.0.0.1:9"}
    assert load_settings({"SETTLE_RAIL": "stripe", **fake}).rails == (RailKind.STRIPE,)
    assert load_settings({"SETTLE_RAILS": "sepa"}).api_rail is None


def test_tenant_defaults_and_the_bank_are_read() -> None:
    settings = load_settings(
        {
            "SETTLE_RAILS": "stripe,sepa",
            "STRIPE_API_BASE": "http://127.0.0.1:12111",
            "SETTLE_TENANT_RAILS": "acme:EUR=sepa, acme:USD=stripe",
            "SETTLE_SEPA_BANK_URL": "https://h2h.bank.example/",
            "SETTLE_SEPA_DEBTOR_IBAN": "de89 3704 0044 0532 0130 00",
            "SETTLE_SEPA_BATCH_BOOKING": "false",
            "SETTLE_SEPA_CUTOFF": "14:30",
        },
        kind=LedgerSettings,
    )
    assert settings.tenant_rails == {("acme", "EUR"): "sepa", ("acme", "USD"): "stripe"}
    assert settings.sepa_bank_url == "https://h2h.bank.example"
    assert settings.sepa_debtor_iban == IBAN
    assert settings.sepa_batch_booking is False
    assert settings.sepa_cutoff == time(14, 30)


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"SETTLE_RAILS": "sim,swift"}, "SETTLE_RAILS"),
        ({"SETTLE_RAILS": "sim,sim"}, "SETTLE_RAILS"),
        ({"SETTLE_RAILS": "sim,stripe"}, "SETTLE_RAILS"),
        ({"SETTLE_TENANT_RAILS": "acme:EUR=sepa"}, "SETTLE_TENANT_RAILS"),
        ({"SETTLE_TENANT_RAILS": "acme:euro=sim"}, "SETTLE_TENANT_RAILS"),
        ({"SETTLE_SEPA_DEBTOR_IBAN": "DE89370400440532013001"}, "SETTLE_SEPA_DEBTOR_IBAN"),
        ({"SETTLE_SEPA_CUTOFF": "25:00"}, "SETTLE_SEPA_CUTOFF"),
        ({"SETTLE_SEPA_CUTOFF": "3pm"}, "SETTLE_SEPA_CUTOFF"),
        ({"SETTLE_SEPA_BANK_URL": "bank:443"}, "SETTLE_SEPA_BANK_URL"),
        ({"SETTLE_SEPA_DEBTOR_NAME": "x" * 71}, "SETTLE_SEPA_DEBTOR_NAME"),
    ],
)
def test_a_bad_rail_setting_names_its_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ)
    assert caught.value.variable == variable


@pytest.mark.parametrize(
    ("bank", "variable"),
    [
        ({"SETTLE_SEPA_BANK_URL": "http://bank:8080"}, "SETTLE_SEPA_BANK_URL"),
        ({"SETTLE_SEPA_BANK_URL": "https://other-bank"}, "SETTLE_SEPA_BANK_URL"),
        ({"SETTLE_SEPA_BANK_URL": "https://bank"}, "SETTLE_SEPA_DEBTOR_IBAN"),
    ],
)
def test_production_pays_by_sepa_over_tls_to_its_bank_from_an_account_of_its_own(
    bank: dict[str, str], variable: str
) -> None:
    environ = {**PRODUCTION, "SETTLE_RAILS": "stripe,sepa", **bank}
    with pytest.raises(ConfigError) as caught:
        load_settings(environ, kind=RelaySettings)
    assert caught.value.variable == variable
    given = {**environ, "SETTLE_SEPA_BANK_URL": "https://bank", "SETTLE_SEPA_DEBTOR_IBAN": IBAN}
    assert load_settings(given, kind=RelaySettings).rails == (RailKind.STRIPE, RailKind.SEPA)
    # A deployment without the SEPA rail is not asked for its bank.
    assert load_settings({**PRODUCTION, "SETTLE_RAIL": "stripe"}, kind=RelaySettings)
