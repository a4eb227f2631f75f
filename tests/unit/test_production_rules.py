"""Production mode takes no opt-outs: unsigned commands, one operator alone, failpoints, the
rail simulator, a rail address the deploy did not name, a tenant without limits; an
operator's `--rail-url` is refused; and a process listening beyond loopback without
SETTLE_ENV refuses the local default secrets (docs/production-safety.md). Each refusal names
its variable."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from services.commands.common import pinned_rail_url
from services.domain.errors import ConfigError
from services.platform.service_settings import SERVICES, LedgerSettings, Settings
from services.platform.settings import load_settings, refusals
from tests.production_env import ACME_TOKEN, OPS_TOKEN, limits_for, production
from tools.cli import cli

IBAN = "DE89370400440532013000"


@pytest.fixture(autouse=True)
def _no_settings_in_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # load_settings reads the process environment too: only what a test gives may count.
    for variable in Settings.model_fields.values():
        if variable.alias:
            monkeypatch.delenv(variable.alias, raising=False)


def refused(environ: dict[str, str], kind: type = Settings) -> list[tuple[str, str]]:
    """Every refusal of `environ`, as (variable, why)."""
    return [(e.variable, e.problem) for e in refusals(environ, kind=kind)]


@pytest.mark.parametrize(
    ("changes", "variable", "why"),
    [
        ({"SETTLE_COMMAND_SIGNING": "optional"}, "SETTLE_COMMAND_SIGNING", "is optional"),
        ({"SETTLE_TWO_PERSON": "false"}, "SETTLE_TWO_PERSON", "is false"),
        ({"SETTLE_FAILPOINTS": "dispatch.after_call=kill@1"}, "SETTLE_FAILPOINTS", "is set"),
        ({"SETTLE_RAIL": None}, "SETTLE_RAIL", "names sim (the default when unset)"),
        ({"SETTLE_RAIL": "sim"}, "SETTLE_RAIL", "the rail simulator"),
        ({"SETTLE_RAILS": "sim"}, "SETTLE_RAILS", "the rail simulator"),
        ({"STRIPE_API_BASE": "https://stripe.example"}, "STRIPE_API_BASE", "'stripe.example'"),
        ({"STRIPE_API_BASE": "https://api.stripe.com/v1"}, "STRIPE_API_BASE", "neither"),
        ({"STRIPE_API_BASE": "https://api.stripe.com@evil.example"}, "STRIPE_API_BASE", "evil"),
        ({"STRIPE_API_BASE": "http://api.stripe.com"}, "STRIPE_API_BASE", "https://"),
        (
            {"SETTLE_RAILS": "stripe,sepa", "SETTLE_SEPA_DEBTOR_IBAN": IBAN},
            "SETTLE_SEPA_BANK_URL",
            "https://",
        ),
        (
            {
                "SETTLE_RAILS": "stripe,sepa",
                "SETTLE_SEPA_BANK_URL": "https://h2h.bank.example",
                "SETTLE_SEPA_DEBTOR_IBAN": IBAN,
                "SETTLE_RAIL_HOSTS": "stripe-proxy.internal",
            },
            "SETTLE_SEPA_BANK_URL",
            "not in SETTLE_RAIL_HOSTS",
        ),
        ({"SETTLE_TENANT_LIMITS": None}, "SETTLE_TENANT_LIMITS", "no amount cap"),
        (
            {"SETTLE_TENANT_LIMITS": json.dumps({"acme": {"max_amount": {"EUR": 100}}})},
            "SETTLE_TENANT_LIMITS",
            "no destination allow-list or deposit",
        ),
        (
            {"SETTLE_TENANT_LIMITS": json.dumps({"acme": {"destinations": ["acct_1"]}})},
            "SETTLE_TENANT_LIMITS",
            "gives tenant 'acme' no amount cap",
        ),
        (
            {"SETTLE_API_TOKENS": f"acme:{ACME_TOKEN},globex:g-8e1f3a5c7b9d0246"},
            "SETTLE_TENANT_LIMITS",
            "gives tenant 'globex'",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_production_refuses_an_opt_out_naming_its_variable(
    changes: dict[str, str | None], variable: str, why: str
) -> None:
    found = refused(production(**changes))
    assert [v for v, _ in found] == [variable]
    assert why in found[0][1]
    with pytest.raises(ConfigError, match=f"^{variable}: "):
        load_settings(production(**changes))


@pytest.mark.parametrize(
    "changes",
    [
        {"SETTLE_COMMAND_SIGNING": "required", "SETTLE_TWO_PERSON": "true"},
        {"SETTLE_FAILPOINTS": ""},
        {"STRIPE_API_BASE": "https://api.stripe.com"},
        {"STRIPE_API_BASE": "https://api.stripe.com/"},
        {
            "STRIPE_API_BASE": "https://proxy.internal:8443/v1",
            "SETTLE_RAIL_HOSTS": "PROXY.internal",
        },
        {
            "SETTLE_RAILS": "stripe,sepa",
            "SETTLE_SEPA_BANK_URL": "https://h2h.bank.example/",
            "SETTLE_SEPA_DEBTOR_IBAN": IBAN,
            "SETTLE_RAIL_HOSTS": "h2h.bank.example, stripe-proxy.internal",
        },
        {"SETTLE_TENANT_LIMITS": json.dumps({"acme": {"max_amount": {"EUR": 1}, "prefunded": {}}})},
        {
            "SETTLE_API_TOKENS": f"acme:{ACME_TOKEN},globex:g-8e1f3a5c7b9d0246",
            "SETTLE_TENANT_LIMITS": limits_for("acme", "globex"),
        },
    ],
    ids=lambda changes: ",".join(changes),
)
def test_production_accepts_what_a_deployment_pins(changes: dict[str, str]) -> None:
    assert refused(production(**changes)) == []


@pytest.mark.parametrize("value", ["https://proxy.internal", "proxy.internal:8443", "a@b", "x/y"])
def test_the_rail_hosts_are_host_names_alone(value: str) -> None:
    with pytest.raises(ConfigError, match=r"^SETTLE_RAIL_HOSTS: "):
        load_settings({"SETTLE_RAIL_HOSTS": value})


def test_a_rule_holds_only_where_its_service_reads_the_variable() -> None:
    environ = production(SETTLE_TWO_PERSON="false", SETTLE_COMMAND_SIGNING="optional")
    # The ledger takes commands and has no operators; the reconciler has operators, no
    # commands; the inbox has neither.
    assert [v for v, _ in refused(environ, SERVICES["ledger"])] == ["SETTLE_COMMAND_SIGNING"]
    assert [v for v, _ in refused(environ, SERVICES["reconciler"])] == ["SETTLE_TWO_PERSON"]
    assert refused(environ, SERVICES["inbox"]) == []
    # Limits are asked where tenants may ask for settlements: not of the reconciler.
    unlimited = production(SETTLE_TENANT_LIMITS=None)
    assert refused(unlimited, SERVICES["reconciler"]) == []
    assert [v for v, _ in refused(unlimited, LedgerSettings)] == ["SETTLE_TENANT_LIMITS"]


def test_every_refusal_is_listed_and_the_start_stops_at_the_first() -> None:
    environ = production(SETTLE_RAIL="sim", SETTLE_FAILPOINTS="a=kill@1", SETTLE_TWO_PERSON="false")
    variables = [v for v, _ in refused(environ)]
    assert sorted(variables) == ["SETTLE_FAILPOINTS", "SETTLE_RAIL", "SETTLE_TWO_PERSON"]
    with pytest.raises(ConfigError) as caught:
        load_settings(environ)
    assert str(caught.value) == str(refusals(environ)[0])


@pytest.mark.parametrize(
    ("service", "environ", "host", "variables"),
    [
        ("ledger", {}, "0.0.0.0", ["SETTLE_API_TOKENS"]),
        ("ledger", {}, "10.1.2.3", ["SETTLE_API_TOKENS"]),
        ("ledger", {}, "ledger.internal", ["SETTLE_API_TOKENS"]),
        ("relay", {}, "::", ["STRIPE_API_KEY"]),
        (
            "console",
            {},
            "0.0.0.0",
            ["STRIPE_API_KEY", "SETTLE_OPERATOR_TOKENS", "SETTLE_API_TOKENS"],
        ),
        ("ledger", {}, "127.0.0.1", []),
        ("ledger", {}, "::1", []),
        ("ledger", {}, "localhost", []),
        ("ledger", {"SETTLE_ENV": "local"}, "0.0.0.0", []),
        ("ledger", {"SETTLE_API_TOKENS": f"acme:{ACME_TOKEN}"}, "0.0.0.0", []),
    ],
)
def test_a_service_listening_beyond_loopback_without_settle_env_refuses_local_secrets(
    service: str, environ: dict[str, str], host: str, variables: list[str]
) -> None:
    found = refusals(environ, kind=SERVICES[service], host=host)
    assert [e.variable for e in found] == variables
    assert all("SETTLE_ENV" in e.problem and host in e.problem for e in found)


def test_the_ledger_command_refuses_to_listen_on_every_address_with_local_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import services.apps.ledger

    def serve(*_: object, **__: object) -> None:
        raise AssertionError("the ledger started")

    monkeypatch.setattr(services.apps.ledger, "serve", serve)
    result = CliRunner().invoke(cli, ["ledger", "--host", "0.0.0.0", "--no-kafka"])
    assert result.exit_code != 0
    assert "SETTLE_API_TOKENS: holds the local default" in result.output


def test_an_operators_rail_url_is_refused_in_production_only() -> None:
    assert pinned_rail_url(load_settings({}), "http://127.0.0.1:9") == "http://127.0.0.1:9"
    settings = load_settings(production())
    assert pinned_rail_url(settings, None) is None
    with pytest.raises(ConfigError, match=r"^--rail-url: is refused in production mode"):
        pinned_rail_url(settings, "https://api.stripe.com")


@pytest.mark.parametrize(
    "args",
    [
        ["review", "resolve", "5f0e2b9c-0000-4000-8000-000000000001", "--as", "paid"],
        ["approvals", "approve", "17"],
    ],
    ids=lambda args: args[0],
)
def test_the_operator_commands_take_no_rail_address(
    monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    # The server asks the rail it is configured with; a command line cannot name another.
    for variable, value in production().items():
        monkeypatch.setenv(variable, value)
    given = [*args, "--operator", "ops", "--rail-url", "http://127.0.0.1:9", "--json"]
    if args[0] == "review":
        given += ["--reason", "checked with the rail"]
    result = CliRunner().invoke(cli, given)
    assert result.exit_code == 2, result.output
    assert "No such option '--rail-url'" in result.output


def test_stripes_own_address_given_is_real_money_in_local_mode_too() -> None:
    with pytest.raises(ConfigError, match=r"^STRIPE_API_KEY: .*real money"):
        load_settings({"SETTLE_RAIL": "stripe", "STRIPE_API_BASE": "https://api.stripe.com/"})
    assert load_settings({"SETTLE_RAIL": "stripe", "STRIPE_API_BASE": "http://127.0.0.1:9"})


def test_reconcile_and_the_statement_refuse_a_rail_address_in_production(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable, value in production(SETTLE_OPERATOR_TOKEN=OPS_TOKEN).items():
        monkeypatch.setenv(variable, value)
    result = CliRunner().invoke(cli, ["reconcile", "--json", "--rail-url", "http://127.0.0.1:9"])
    assert result.exit_code == 2, result.output
    assert json.loads(result.output)["error"]["detail"].startswith("--rail-url: ")
    saved = ["rail", "statement", "--rail", "stripe", "--out", "/nonexistent"]
    for option in ("--rail-url", "--files-url"):
        result = CliRunner().invoke(cli, [*saved, option, "http://127.0.0.1:9"])
        assert result.exit_code != 0 and f"{option}: is refused" in result.output, result.output
