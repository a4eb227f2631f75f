"""The operator commands are clients of the operator API: in production they start with the
API's https address and the operator's own token alone; the server, not the command line,
decides who acts and under which policy; the database holds two-person mode itself, refuses an
action row without its approver while it is on, and lets it be turned off only by an action a
second operator approved."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import asyncpg
import pytest

from services.adapters.postgres.migrate import upgrade
from tests.conftest import asyncpg_dsn, create_database, drop_database, unique
from tests.harness import Servers
from tests.integration.check_support import World, template
from tests.integration.operator_support import (
    OPERATORS,
    operator_api,
    plant_breaks,
    referred,
    settle_as_operator,
    settle_command,
    world,
)
from tests.tls_support import self_signed

pytestmark = pytest.mark.integration
__all__ = ["template", "world"]
GUARD = "two-person mode is on"


def bare_env(**settings: str) -> dict[str, str]:
    """A shell holding nothing of settle's but `settings`."""
    kept = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    return kept | settings


async def test_in_production_the_commands_need_only_the_api_and_the_operators_token(
    world: World, tmp_path: Path
) -> None:
    sid = await referred(world)
    cert, key = self_signed(tmp_path)
    async with operator_api(world, tls=(cert, key)) as api:
        assert api.startswith("https://")
        env = bare_env(
            SETTLE_ENV="production",
            SETTLE_OPERATOR_API=api,
            SETTLE_OPERATOR_TOKEN=OPERATORS["alice"],
            SETTLE_OPERATOR_CA=str(cert),
        )
        status, out, err = await settle_command(env, "review", "list", "--json")
        assert status == 0, err
        assert [item["id"] for item in json.loads(out)["data"]] == [sid]
        # The certificate is checked: without its CA the API is not trusted.
        untrusted = {k: v for k, v in env.items() if k != "SETTLE_OPERATOR_CA"}
        status, out, _ = await settle_command(untrusted, "review", "list", "--json")
        assert (status, json.loads(out)["error"]["code"]) == (2, "operator_api_unreachable")
        plain = env | {"SETTLE_OPERATOR_API": api.replace("https://", "http://")}
        status, out, _ = await settle_command(plain, "review", "list", "--json")
        error = json.loads(out)["error"]
        assert (status, error["code"]) == (2, "config")
        assert error["message"].startswith("SETTLE_OPERATOR_API: must be https://")


async def test_a_token_never_goes_in_clear_to_another_machine() -> None:
    env = bare_env(SETTLE_OPERATOR_API="http://192.0.2.10:8084", SETTLE_OPERATOR_TOKEN="x" * 20)
    status, out, _ = await settle_command(env, "approvals", "list", "--json")
    error = json.loads(out)["error"]
    assert (status, error["code"]) == (2, "config")
    assert "in clear" in error["message"]


async def test_the_database_holds_two_person_mode_and_the_server_follows_it(
    world: World,
) -> None:
    breaks = await plant_breaks(world.pool, 2)
    on = ("approvals", "two-person", "on", "--reason", "launch", "--operator", "alice", "--json")
    status, out = await settle_as_operator(world, *on)
    assert status == 0 and json.loads(out)["two_person"] is True
    # The server was started without two-person mode; the database's setting holds anyway.
    resolve = ("breaks", "resolve", str(breaks[0]), "--reason", "fee", "--operator", "alice")
    status, out = await settle_as_operator(world, *resolve, "--json")
    assert (status, json.loads(out)["status"]) == (0, "pending")
    off = ("approvals", "two-person", "off", "--reason", "test day", "--operator", "alice")
    status, out = await settle_as_operator(world, *off, "--json")
    proposal = json.loads(out)
    assert (status, proposal["action"], proposal["status"]) == (0, "policy.two_person", "pending")
    assert await world.pool.fetchval("SELECT two_person FROM operator_policy") is True
    status, out = await settle_as_operator(
        world, "approvals", "approve", str(proposal["id"]), "--operator", "bob", "--json"
    )
    assert (status, json.loads(out)["status"]) == (0, "approved")
    status, out = await settle_as_operator(world, "approvals", "policy", "--json")
    assert json.loads(out)["two_person"] is False
    audited = await world.pool.fetch(
        "SELECT actor, approved_by, after FROM operator_actions "
        "WHERE action = 'policy.two_person' ORDER BY id"
    )
    assert [(r["actor"], r["approved_by"]) for r in audited] == [("alice", None), ("alice", "bob")]


async def test_while_on_no_guarded_action_row_is_written_without_an_approver(
    world: World,
) -> None:
    await world.pool.execute(
        "UPDATE operator_policy SET two_person = true, changed_at = now(), changed_by_action = NULL"
    )
    insert = (
        "INSERT INTO operator_actions (actor, action, target, detail, occurred_at, approved_by) "
        "VALUES ('mallory', $1, 'break:1', '{}', now(), $2)"
    )
    for action in ("review.resolve", "break.resolve", "inbox.replay", "break.write_off"):
        with pytest.raises(asyncpg.CheckViolationError, match=GUARD):
            await world.pool.execute(insert, action, None)
    with pytest.raises(asyncpg.CheckViolationError, match="approved"):
        await world.pool.execute(
            "UPDATE operator_policy SET two_person = false, changed_at = now()"
        )
    # Self-approval stays refused; a second operator's approval and unguarded work pass.
    with pytest.raises(asyncpg.CheckViolationError):
        await world.pool.execute(insert, "break.resolve", "mallory")
    await world.pool.execute(insert, "break.resolve", "trent")
    await world.pool.execute(insert, "break.comment", None)


async def test_a_database_first_migrated_in_production_starts_in_two_person_mode(
    infra: Servers,
) -> None:
    name = unique("settle_prod_")
    url = await create_database(infra.database_url, name)
    try:
        await asyncio.to_thread(upgrade, url, production=True)
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            assert await conn.fetchval("SELECT two_person FROM operator_policy") is True
        finally:
            await conn.close()
    finally:
        await drop_database(infra.database_url, name)
