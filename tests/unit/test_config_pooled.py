"""`SETTLE_DATABASE_POOLED`: a URL through a transaction pooler turns the statement cache off
for the services that can use one (ledger, inbox, console), and is refused, in every mode and
by `settle config check`, by those that need sessions (relay, reconciler, migrate)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from click.testing import CliRunner

from services.adapters.postgres import database
from services.domain.errors import ConfigError
from services.platform.service_settings import (
    ConsoleSettings,
    InboxSettings,
    LedgerSettings,
    MigrateSettings,
    ReconcilerSettings,
    RelaySettings,
)
from services.platform.settings import load_settings
from services.reconcile.lock import (
    LOCK_FREED_WITHIN_S,
    SESSION_SETTINGS,
    TCP_USER_TIMEOUT_MS,
)
from tests.production_env import production
from tools.cli import cli

POOLED = {"SETTLE_DATABASE_POOLED": "true"}


@pytest.fixture(autouse=True)
def _no_settings_in_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith(("SETTLE_", "STRIPE_")):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("kind", [LedgerSettings, InboxSettings, ConsoleSettings])
def test_the_services_without_sessions_take_a_pooled_url(kind: type[Any]) -> None:
    assert load_settings({}, kind=kind).database_pooled is False
    assert load_settings(POOLED, kind=kind).database_pooled is True


@pytest.mark.parametrize("kind", [RelaySettings, ReconcilerSettings, MigrateSettings])
@pytest.mark.parametrize("env", [{}, production()])
def test_the_services_that_need_sessions_refuse_a_pooled_url_in_every_mode(
    kind: type[Any], env: dict[str, str]
) -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings({**env, **POOLED}, kind=kind)
    assert refused.value.variable == "SETTLE_DATABASE_POOLED"
    assert "direct SETTLE_DATABASE_URL" in str(refused.value)


@pytest.mark.parametrize("service", ["relay", "reconciler", "migrate"])
def test_config_check_names_the_variable(tmp_path: Path, service: str) -> None:
    env_file = tmp_path / "settle.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in production(**POOLED).items()))
    done = CliRunner().invoke(
        cli, ["config", "check", "--service", service, "--env-file", str(env_file)]
    )
    assert done.exit_code == 1, done.output
    assert [line.partition(":")[0] for line in done.stdout.splitlines()] == [
        "SETTLE_DATABASE_POOLED"
    ]


@pytest.mark.parametrize(("env", "options"), [({}, {}), (POOLED, {"statement_cache_size": 0})])
async def test_a_pooled_url_gets_a_pool_without_statement_cache(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], options: dict[str, int]
) -> None:
    seen: dict[str, Any] = {}

    async def create_pool(dsn: str, **kwargs: Any) -> object:
        seen.update(kwargs)
        return object()

    monkeypatch.setattr(asyncpg, "create_pool", create_pool)
    await database.create_pool(load_settings(env, kind=LedgerSettings))
    assert {k: seen[k] for k in options} == options
    assert ("statement_cache_size" in seen) == bool(options)


def test_the_lock_session_asks_the_server_to_drop_a_silent_client_within_the_bound() -> None:
    assert SESSION_SETTINGS["tcp_user_timeout"] == str(TCP_USER_TIMEOUT_MS)
    idle = int(SESSION_SETTINGS["tcp_keepalives_idle"])
    assert 0 < idle < LOCK_FREED_WITHIN_S
    assert TCP_USER_TIMEOUT_MS / 1000 < LOCK_FREED_WITHIN_S <= 30
