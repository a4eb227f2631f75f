"""`settle config check`: every refusal a service would start with in production, one a line
(or a JSON list), exit 1 if any; from this process's environment or an env file alone; and
the very refusals the service itself stops at."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from services.platform.service_settings import SERVICES, OperatorCommandSettings
from services.platform.settings import load_settings, refusals
from tests.production_env import ACME_TOKEN, API_KEY, OPS_TOKEN, production
from tools.cli import cli

SERVICE_NAMES = [*SERVICES, "operator"]


@pytest.fixture(autouse=True)
def _no_settings_in_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith(("SETTLE_", "STRIPE_")):
            monkeypatch.delenv(name)


def check(*args: str) -> Result:
    return CliRunner().invoke(cli, ["config", "check", *args])


def env_file(tmp_path: Path, environ: dict[str, str]) -> str:
    path = tmp_path / "settle.env"
    path.write_text("".join(f"{k}={v}\n" for k, v in environ.items()))
    return str(path)


@pytest.mark.parametrize("service", SERVICE_NAMES)
def test_a_production_environment_passes_for_every_service(tmp_path: Path, service: str) -> None:
    done = check("--service", service, "--env-file", env_file(tmp_path, production()))
    assert done.exit_code == 0, done.output
    assert done.stdout == ""
    assert f"{service} would start in production" in done.stderr


# Each opt-out and unsafe address production refuses, with a service that holds it.
REFUSED = [
    ("ledger", "SETTLE_RAIL", {"SETTLE_RAIL": "sim"}),
    ("ledger", "SETTLE_RAILS", {"SETTLE_RAILS": "stripe,sim"}),
    ("relay", "STRIPE_API_BASE", {"STRIPE_API_BASE": "https://evil.example"}),
    ("reconciler", "STRIPE_API_BASE", {"STRIPE_API_BASE": "https://evil.example"}),
    ("console", "SETTLE_TWO_PERSON", {"SETTLE_TWO_PERSON": "false"}),
    ("reconciler", "SETTLE_TWO_PERSON", {"SETTLE_TWO_PERSON": "false"}),
    ("ledger", "SETTLE_COMMAND_SIGNING", {"SETTLE_COMMAND_SIGNING": "optional"}),
    ("ledger", "SETTLE_TENANT_LIMITS", {"SETTLE_TENANT_LIMITS": None}),
    ("relay", "SETTLE_FAILPOINTS", {"SETTLE_FAILPOINTS": "dispatch.after_call=kill@1"}),
    ("operator", "SETTLE_OPERATOR_API", {"SETTLE_OPERATOR_API": "http://10.0.0.7:8084"}),
    ("operator", "SETTLE_OPERATOR_TOKEN", {"SETTLE_OPERATOR_TOKEN": "ops-local-token"}),
]


@pytest.mark.parametrize(("service", "variable", "changes"), REFUSED)
def test_each_opt_out_is_refused_naming_its_variable(
    tmp_path: Path, service: str, variable: str, changes: dict[str, str | None]
) -> None:
    done = check("--service", service, "--env-file", env_file(tmp_path, production(**changes)))
    assert done.exit_code == 1, done.output
    assert [line.partition(":")[0] for line in done.stdout.splitlines()] == [variable]


def test_every_refusal_is_printed_each_with_its_variable(tmp_path: Path) -> None:
    environ = production(
        SETTLE_RAIL="sim",
        STRIPE_API_BASE="https://stripe.example",
        SETTLE_FAILPOINTS="dispatch.after_call=kill@1",
        SETTLE_COMMAND_SIGNING="optional",
        SETTLE_TENANT_LIMITS=None,
        SETTLE_API_TOKENS="acme:acme-local-token",
    )
    done = check("--service", "ledger", "--env-file", env_file(tmp_path, environ))
    assert done.exit_code == 1
    lines = done.stdout.splitlines()
    assert [line.partition(":")[0] for line in lines] == [
        "SETTLE_API_TOKENS",
        "SETTLE_COMMAND_SIGNING",
        "SETTLE_RAIL",
        "STRIPE_API_BASE",
        "SETTLE_TENANT_LIMITS",
        "SETTLE_FAILPOINTS",
    ]
    assert "6 refused" in done.stderr
    assert not [s for s in (API_KEY, ACME_TOKEN, OPS_TOKEN) if s in done.output]


def test_the_operator_commands_need_only_the_api_and_their_own_token(tmp_path: Path) -> None:
    alone = {
        "SETTLE_ENV": "production",
        "SETTLE_OPERATOR_API": "https://operators.settle.internal",
        "SETTLE_OPERATOR_TOKEN": OPS_TOKEN,
    }
    done = check("--service", "operator", "--env-file", env_file(tmp_path, alone))
    assert done.exit_code == 0, done.output


def test_json_is_a_list_of_variables_and_reasons(tmp_path: Path) -> None:
    environ = production(SETTLE_DATABASE_URL=None, SETTLE_TWO_PERSON="false")
    done = check("--service", "reconciler", "--json", "--env-file", env_file(tmp_path, environ))
    assert done.exit_code == 1
    found = json.loads(done.stdout)
    assert [item["variable"] for item in found] == ["SETTLE_TWO_PERSON", "SETTLE_DATABASE_URL"]
    assert all(set(item) == {"variable", "reason"} and item["reason"] for item in found)
    passed = check(
        "--service", "reconciler", "--json", "--env-file", env_file(tmp_path, production())
    )
    assert (passed.exit_code, json.loads(passed.stdout)) == (0, [])


@pytest.mark.parametrize("service", SERVICE_NAMES)
def test_the_check_says_what_the_start_stops_at(service: str) -> None:
    kind = OperatorCommandSettings if service == "operator" else SERVICES[service]
    environ = production(
        SETTLE_RAIL=None, SETTLE_FAILPOINTS="a=kill@1", STRIPE_API_BASE="http://rail"
    )
    found = refusals(environ, kind=kind)
    assert found
    with pytest.raises(type(found[0])) as caught:
        load_settings(environ, kind=kind)
    assert str(caught.value) == str(found[0])


def test_the_process_environment_is_checked_as_production(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable, value in production(SETTLE_ENV="local").items():
        monkeypatch.setenv(variable, value)
    assert check("--service", "ledger").exit_code == 0
    monkeypatch.setenv("SETTLE_RAIL", "sim")
    done = check("--service", "ledger")
    assert done.exit_code == 1
    assert done.stdout.startswith("SETTLE_RAIL: names sim")


def test_an_env_file_is_the_whole_environment_and_the_process_keeps_its_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A variable of this process, not of the file, is neither read nor lost.
    monkeypatch.setenv("SETTLE_FAILPOINTS", "a=kill@1")
    monkeypatch.setenv("PATH", os.environ["PATH"])
    done = check("--service", "relay", "--env-file", env_file(tmp_path, production()))
    assert done.exit_code == 0, done.output
    assert os.environ["SETTLE_FAILPOINTS"] == "a=kill@1"
    assert "STRIPE_API_KEY" not in os.environ


def test_an_env_file_takes_comments_exports_and_quotes(tmp_path: Path) -> None:
    lines = [
        "# the ledger's production settings",
        "",
        *(f"export {k}='{v}'" if "LIMITS" in k else f'{k}="{v}"' for k, v in production().items()),
    ]
    path = tmp_path / "ledger.env"
    path.write_text("\n".join(lines) + "\n")
    assert check("--service", "ledger", "--env-file", str(path)).exit_code == 0
    path.write_text("SETTLE_ENV=production\nnot a setting\n")
    done = check("--service", "ledger", "--env-file", str(path))
    assert done.exit_code == 2
    assert "ledger.env:2: not a KEY=VALUE line" in done.output


def test_a_bad_value_is_a_refusal_too(tmp_path: Path) -> None:
    environ = production(SETTLE_RAIL="paypal", SETTLE_RAIL_HOSTS="https://x")
    done = check("--service", "relay", "--env-file", env_file(tmp_path, environ))
    assert done.exit_code == 1
    assert {line.partition(":")[0] for line in done.stdout.splitlines()} == {
        "SETTLE_RAIL",
        "SETTLE_RAIL_HOSTS",
    }


def test_an_unknown_service_is_a_usage_error() -> None:
    done = check("--service", "archive")
    assert done.exit_code == 2
    assert "operator" in done.output
