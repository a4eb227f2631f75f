"""A world for operator actions: its own database (copied from a migrated template), a served
rail simulator, settlements sent to review the way the relay refers them, and breaks planted
as reconciliation stores them."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from fastapi import FastAPI
from starlette.routing import BaseRoute

from railsim.core import RailSim
from railsim.http import create_app
from services.apps.reconciler import operator_routes
from services.apps.reconciler_admin import build_app
from services.domain.settlement import SettlementStatus as S
from services.operations.approval_policy import DEFAULT_MAX_AGE, Policy
from services.operations.rail_lookup import StripeLookup
from services.platform.bearer import BearerAuth
from services.platform.clock import utc_now
from services.reconcile.metrics import create_metrics
from tests.conftest import asyncpg_dsn, create_database, drop_database, unique
from tests.harness import Servers
from tests.integration.check_support import SETTLE, World
from tests.integration.railsim_support import serving, stripe_client, transfer_params

DESTINATION = "acct_1Q2w3E"  # World.accept's, for 700 EUR
# Operators of the served operator API, each with their token.
OPERATORS = {
    name: f"{name}-operator-token-{n}"
    for n, name in enumerate(("alice", "bob", "carol", "dave", "ops"))
}


@pytest.fixture
async def world(infra: Servers, template: str) -> AsyncIterator[World]:
    name = unique("settle_ops_")
    url = await create_database(infra.database_url, name, template)
    pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
    try:
        sim = RailSim()
        async with serving(create_app(sim)) as sim_url:
            yield World(url, pool, sim, sim_url, infra.kafka_bootstrap, "", "", "", "", "")
    finally:
        await pool.close()
        await drop_database(infra.database_url, name)


@pytest.fixture
async def rail(world: World) -> AsyncIterator[StripeLookup]:
    lookup = StripeLookup("sk_test_x", api_base=world.sim_url)
    yield lookup
    await lookup.aclose()


def operator_app(routes: Sequence[BaseRoute]) -> FastAPI:
    """`routes` (the operator API's, or some of them) in the app the reconciler serves them
    from, which answers their errors in the edge's shape and documents them."""
    return build_app(create_metrics(), lambda: True, routes)


@asynccontextmanager
async def operator_api(
    world: World, *, two_person: bool = False, tls: tuple[Path, Path] | None = None
) -> AsyncIterator[str]:
    """The operator API served as the reconciler serves it, over the world's database and
    rail simulator, for the OPERATORS (over TLS with `tls`, a certificate and its key); its
    base URL."""
    lookup = StripeLookup("sk_test_x", api_base=world.sim_url)
    operators = BearerAuth({token: name for name, token in OPERATORS.items()})
    policy = Policy(two_person, DEFAULT_MAX_AGE)
    served = operator_routes(world.pool, lookup, operators, utc_now, policy)
    try:
        async with serving(operator_app(served), tls) as url:
            yield url
    finally:
        await lookup.aclose()


def operator_env(api_url: str, operator: str = "ops") -> dict[str, str]:
    """An operator's shell for the `settle` operator commands: the process's environment
    without settle's settings, plus the operator API's address and `operator`'s token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SETTLE_", "STRIPE_"))}
    return env | {"SETTLE_OPERATOR_API": api_url, "SETTLE_OPERATOR_TOKEN": OPERATORS[operator]}


async def settle_command(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    """`settle *args` run in `env`; its exit status, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        SETTLE,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return await process.wait(), out.decode(), err.decode()


async def settle_as_operator(
    world: World, *args: str, two_person: bool = False, token: str | None = None
) -> tuple[int, str]:
    """`settle *args` against the world's operator API, holding the token of the operator the
    arguments name (`--operator`/`--actor`; else ops), or `token`; exit status and stdout."""
    named = "ops"
    for flag in ("--operator", "--actor"):
        if flag in args:
            named = args[args.index(flag) + 1]
    async with operator_api(world, two_person=two_person) as api:
        env = operator_env(api, named)
        if token is not None:
            env["SETTLE_OPERATOR_TOKEN"] = token
        status, out, _ = await settle_command(env, *args)
    return status, out


async def referred(world: World) -> str:
    """A settlement accepted, whose instruction the relay referred: both under review."""
    sid = await world.accept()
    await world.pool.execute(
        "UPDATE rail_instructions SET status = 'needs_review', error_class = 'ambiguous', "
        "attempts = 8, first_sent_at = now() - interval '10 minutes' "
        "WHERE settlement_id = $1::uuid",
        sid,
    )
    await world.move(sid, S.NEEDS_REVIEW, reason="rail answer unclear after 8 attempts")
    return sid


async def made_at_rail(world: World, sid: str, amount: int = 700) -> str:
    """A transfer naming the settlement, made at the rail directly; its id."""
    async with stripe_client(world.sim_url) as client:
        made = await client.v1.transfers.create_async(transfer_params(sid, DESTINATION, amount))
    return str(made.id)


async def objects_at_rail(world: World, sid: str) -> list[str]:
    """The ids of the transfers the rail holds for the settlement."""
    async with stripe_client(world.sim_url) as client:
        page = await client.v1.transfers.list_async({"transfer_group": sid, "limit": 10})
    return [t.id for t in page.data]


async def snapshot(world: World, sid: str) -> dict[str, Any]:
    """Everything a resolution may change about a settlement."""
    pool = world.pool
    row = await pool.fetchrow(
        "SELECT s.status, s.version, s.rail_reference, r.status AS instruction, r.attempts "
        "FROM settlements s JOIN rail_instructions r ON r.settlement_id = s.id "
        "WHERE s.id = $1::uuid",
        sid,
    )
    net = await pool.fetch(
        "SELECT p.account_id, sum(p.amount) AS net FROM postings p JOIN journal_entries e "
        "ON e.id = p.entry_id WHERE e.settlement_id = $1::uuid GROUP BY p.account_id "
        "HAVING sum(p.amount) <> 0",
        sid,
    )
    actions = await pool.fetch(
        "SELECT actor, action, detail, before, after FROM operator_actions WHERE target = $1 "
        "ORDER BY id",
        f"settlement:{sid}",
    )
    return {
        **dict(row),
        "net": {r["account_id"].split(":")[1]: r["net"] for r in net},
        "actions": [
            {k: json.loads(v) if k in ("detail", "before", "after") else v for k, v in a.items()}
            for a in actions
        ],
    }


async def plant_run(pool: asyncpg.Pool) -> int:
    run_id: int = await pool.fetchval(
        "INSERT INTO reconciliation_runs (kind, window_start, window_end, started_at, status) "
        "VALUES ('intraday', now() - interval '1 hour', now(), now(), 'running') RETURNING id"
    )
    return run_id


async def plant_breaks(
    pool: asyncpg.Pool, count: int, break_type: str = "amount_mismatch", status: str = "open"
) -> list[int]:
    """`count` breaks of `break_type` in `status`, each of 700 expected and 200 less actual."""
    run_id = await plant_run(pool)
    closed = status != "open"
    rows = await pool.fetch(
        """
        INSERT INTO reconciliation_breaks
               (break_key, break_type, settlement_id, rail_object_id, field, currency, expected,
                actual, reason, status, first_seen, last_seen, first_run_id, last_run_id,
                resolved_at, resolved_by, resolution_reason)
        SELECT $1::text || n, $2, gen_random_uuid(), 'tr_' || $1::text || n, 'amount', 'EUR',
               '700', '500', 'amount:-200', $3, $4::timestamptz, $4::timestamptz, $5, $5,
               CASE WHEN $6 THEN $4::timestamptz END, CASE WHEN $6 THEN 'reconciler' END,
               CASE WHEN $6 THEN 'planted' END
          FROM generate_series(1, $7::int) AS n
        RETURNING id
        """,
        unique("k"),
        break_type,
        status,
        datetime.now(UTC),
        run_id,
        closed,
        count,
    )
    return [r["id"] for r in rows]


def new_id() -> str:
    return str(uuid.uuid4())


async def plant_break(
    pool: asyncpg.Pool,
    break_type: str = "amount_mismatch",
    *,
    settlement_id: str | None = None,
    rail_object_id: str | None = None,
    field: str = "amount",
    currency: str | None = "EUR",
    expected: int | str | None = 700,
    actual: int | str | None = 500,
    reason: str | None = None,
    status: str = "open",
    first_seen: datetime | None = None,
    key: str | None = None,
) -> int:
    """One break as reconciliation stores it; its reason code says by how much, for amounts
    (as the report writes it), unless given."""
    if reason is None:
        reason = field
        if isinstance(expected, int) and isinstance(actual, int) and field != "count":
            reason = f"{field}:{actual - expected:+d}"
    seen = first_seen or datetime.now(UTC)
    closed = status != "open"
    break_id: int = await pool.fetchval(
        """
        INSERT INTO reconciliation_breaks
               (break_key, break_type, settlement_id, rail_object_id, field, currency, expected,
                actual, reason, status, first_seen, last_seen, first_run_id, last_run_id,
                resolved_at, resolved_by, resolution_reason)
        VALUES ($1, $2, $3::uuid, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10, $11::timestamptz,
                $11::timestamptz, $12, $12, CASE WHEN $13 THEN $11::timestamptz END,
                CASE WHEN $13 THEN 'reconciler' END,
                CASE WHEN $13 THEN 'planted' END)
        RETURNING id
        """,
        key or unique("k"),
        break_type,
        settlement_id,
        rail_object_id,
        field,
        currency,
        json.dumps(expected),
        json.dumps(actual),
        reason,
        status,
        seen,
        await plant_run(pool),
        closed,
    )
    return break_id
