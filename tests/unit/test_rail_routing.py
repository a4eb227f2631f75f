"""Which rail pays a settlement, and the refusals, each with its code, of one no rail here
can pay."""

from __future__ import annotations

import pytest

from services.domain.rail_routing import (
    CURRENCY_NOT_SUPPORTED,
    DESTINATION_NOT_SUPPORTED,
    PAYEE_NOT_SUPPORTED,
    RAIL_UNAVAILABLE,
    REACHES,
    RailRefused,
    parse_tenant_rails,
    route,
)

STRIPE, SEPA = REACHES["stripe"], REACHES["sepa"]
IBAN, ACCOUNT = "DE89370400440532013000", "acct_1Q2w3E"
BAD_CHECKSUM = "DE89370400440532013001"
NOT_SEPA = "BR1800360305000010009795493C1"  # a valid IBAN, outside the SEPA zone


def routed(
    requested: str | None, currency: str, destination: str, payee: str = "Ada", **defaults: str
) -> str:
    tenant_rails = parse_tenant_rails(",".join(f"acme:{c}={r}" for c, r in defaults.items()))
    return route(requested, "acme", currency, destination, payee, [SEPA, STRIPE], tenant_rails)


def refused(
    requested: str | None, currency: str, destination: str, payee: str = "Ada", **defaults: str
) -> str:
    with pytest.raises(RailRefused) as caught:
        routed(requested, currency, destination, payee, **defaults)
    return caught.value.code


def test_the_named_rail_pays_when_it_can() -> None:
    assert routed("stripe", "EUR", IBAN) == "stripe"
    assert routed("sepa", "EUR", IBAN) == "sepa"


def test_without_a_name_the_tenants_default_then_the_first_rail_that_can_pay() -> None:
    assert routed(None, "EUR", IBAN) == "sepa"  # first configured, pays EUR to an IBAN
    assert routed(None, "EUR", ACCOUNT) == "stripe"  # SEPA cannot pay to an account id
    assert routed(None, "USD", ACCOUNT) == "stripe"  # SEPA pays EUR only
    assert routed(None, "EUR", IBAN, EUR="stripe") == "stripe"
    assert routed("sepa", "EUR", IBAN, EUR="stripe") == "sepa"  # the settlement's name wins


def test_each_refusal_has_its_code() -> None:
    assert refused("swift", "EUR", IBAN) == RAIL_UNAVAILABLE
    assert refused(None, "EUR", IBAN, EUR="swift") == RAIL_UNAVAILABLE
    assert refused("sepa", "USD", IBAN) == CURRENCY_NOT_SUPPORTED
    assert refused(None, "USD", IBAN, USD="sepa") == CURRENCY_NOT_SUPPORTED
    assert refused("sepa", "EUR", ACCOUNT) == DESTINATION_NOT_SUPPORTED
    assert refused("sepa", "EUR", BAD_CHECKSUM) == DESTINATION_NOT_SUPPORTED
    assert refused("sepa", "EUR", NOT_SEPA) == DESTINATION_NOT_SUPPORTED
    assert refused("sepa", "EUR", IBAN, "x" * 71) == PAYEE_NOT_SUPPORTED
    assert refused("sepa", "EUR", IBAN, "Дмитрий") == PAYEE_NOT_SUPPORTED
    assert routed("sepa", "EUR", IBAN, "Zoë Müller") == "sepa"  # written Zoe Muller
    assert routed("sepa", "EUR", IBAN, "x" * 70) == "sepa"
    assert routed(None, "EUR", IBAN, "x" * 71) == "stripe"  # the next rail carries the name
    with pytest.raises(RailRefused) as caught:
        route(None, "acme", "USD", ACCOUNT, "Ada", [SEPA], {})
    assert caught.value.code == CURRENCY_NOT_SUPPORTED and "USD" in caught.value.message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("acme:EUR", "not tenant:CURRENCY=rail"),
        ("acme=sepa", "not tenant:CURRENCY=rail"),
        ("acme:eur=sepa", "not tenant:CURRENCY=rail"),
        (":EUR=sepa", "not tenant:CURRENCY=rail"),
        ("acme:EUR=sepa,acme:EUR=stripe", "given twice"),
    ],
)
def test_tenant_defaults_that_do_not_parse_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_tenant_rails(text)


def test_tenant_defaults_parse_per_tenant_and_currency() -> None:
    assert parse_tenant_rails(" acme:EUR=sepa, acme:USD=stripe,globex:EUR=stripe,") == {
        ("acme", "EUR"): "sepa",
        ("acme", "USD"): "stripe",
        ("globex", "EUR"): "stripe",
    }
