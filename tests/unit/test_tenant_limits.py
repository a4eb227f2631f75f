"""SETTLE_TENANT_LIMITS: what a readable document gives, and a bad one refused at start-up
naming the variable and the place that is wrong."""

from __future__ import annotations

import json

import pytest

from services.domain.errors import ConfigError
from services.domain.tenant_limits import (
    DEFAULT_READ_RATE,
    NO_LIMITS,
    Rate,
    TenantPolicy,
    parse_tenant_limits,
)
from services.platform.settings import load_settings

DOCUMENT = {
    "acme": {
        "max_amount": {"EUR": 1_000_000, "USD": 5},
        "destinations": ["acct_1", "acct_2"],
        "prefunded": {"EUR": 0, "USD": 700},
        "rate": {"per_second": 0.5, "burst": 3},
        "read_rate": {"per_second": 20, "burst": 40},
    },
    "globex": {"max_amount": {"JPY": 10}},
}


def test_a_document_gives_each_tenant_its_policy_and_others_none() -> None:
    settings = load_settings({"SETTLE_TENANT_LIMITS": json.dumps(DOCUMENT)})
    limits = settings.tenant_limits
    assert limits.of("acme") == TenantPolicy(
        max_amount={"EUR": 1_000_000, "USD": 5},
        destinations=frozenset({"acct_1", "acct_2"}),
        prefunded={"EUR": 0, "USD": 700},
        rate=Rate(0.5, 3),
        read_rate=Rate(20, 40),
    )
    # A tenant with an entry but no read rate reads at the default one; one without an
    # entry has no limits, reads included.
    assert limits.of("globex") == TenantPolicy(max_amount={"JPY": 10}, read_rate=DEFAULT_READ_RATE)
    assert limits.of("initech") == TenantPolicy()
    assert limits.of("initech").read_rate is None
    assert limits.any_prefunded


def test_unset_or_empty_means_no_limits_so_local_runs_are_unchanged() -> None:
    assert load_settings({}).tenant_limits == NO_LIMITS
    assert load_settings({"SETTLE_TENANT_LIMITS": " "}).tenant_limits == NO_LIMITS
    assert load_settings({"SETTLE_TENANT_LIMITS": "{}"}).tenant_limits == NO_LIMITS
    assert not NO_LIMITS.any_prefunded
    assert load_settings({}).accept_backlog == 10_000


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ("{not json", "is not JSON"),
        ("[]", "must be a JSON object"),
        ('{"acme": 5}', "acme: must be an object"),
        ('{"acme": {"max_amuont": {}}}', "unknown key 'max_amuont'"),
        ('{"acme": {"max_amount": {"EUR": 1.5}}}', "acme.max_amount.EUR: must be a whole"),
        ('{"acme": {"max_amount": {"EUR": 1e6}}}', "acme.max_amount.EUR: must be a whole"),
        ('{"acme": {"max_amount": {"EUR": 0}}}', "acme.max_amount.EUR: must be a whole"),
        ('{"acme": {"max_amount": {"eur": 10}}}', "'eur' is not an ISO 4217 code"),
        ('{"acme": {"max_amount": [10]}}', "acme.max_amount: must be an object"),
        ('{"acme": {"destinations": "acct_1"}}', "acme.destinations: must be a list"),
        ('{"acme": {"prefunded": {"EUR": -1}}}', "acme.prefunded.EUR: must be a whole"),
        ('{"acme": {"rate": {"per_second": 0, "burst": 1}}}', "acme.rate.per_second"),
        ('{"acme": {"rate": {"per_second": 1, "burst": 0.5}}}', "acme.rate.burst"),
        ('{"acme": {"rate": {"per_second": NaN, "burst": 1}}}', "is not JSON"),
        ('{"acme": {"rate": 10}}', "acme.rate: must be"),
        ('{"acme": {"read_rate": {"per_second": -1, "burst": 1}}}', "acme.read_rate.per_second"),
        ('{"acme": {"read_rate": {"per_second": 1}}}', "acme.read_rate: must be"),
        ('{"acme": {"read_rate": null}}', "acme.read_rate: must be"),
    ],
)
def test_a_bad_document_is_refused_naming_the_variable_and_the_place(
    document: str, said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"SETTLE_TENANT_LIMITS": document})
    assert caught.value.variable == "SETTLE_TENANT_LIMITS"
    assert said in caught.value.problem


def test_the_backlog_bound_is_at_least_one() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings({"SETTLE_ACCEPT_BACKLOG": "0"})
    assert caught.value.variable == "SETTLE_ACCEPT_BACKLOG"


def test_parsing_reads_amounts_as_ints_never_floats() -> None:
    policy = parse_tenant_limits('{"a": {"max_amount": {"EUR": 9007199254740993}}}').of("a")
    assert policy.max_amount == {"EUR": 9_007_199_254_740_993}
