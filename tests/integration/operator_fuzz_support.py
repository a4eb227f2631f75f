"""The operator API as test_api_fuzz serves it: the reconciler's operator routes over a
migrated database of the module's own and a served rail simulator, seeded with what the
operators work on (settlements under review, breaks open and resolved, dead inbox events,
proposals of another operator awaiting a decision), so the fuzzer's requests and the links
it follows reach real items.

Operator actions change what the next request is answered (a break resolved is refused a
second time), and Hypothesis replays the start of earlier scenarios expecting the same
answers: each stateful scenario starts over on a fresh copy of the seeded database
(`POST /_reset`, which only this test server has; `Resettable`)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Any

import asyncpg
import requests
from sqlalchemy.engine import make_url
from starlette.types import Receive, Scope, Send

from railsim.core import RailSim
from railsim.http import create_app as create_rail_app
from services.apps.reconciler import operator_routes
from services.domain.proposal import ProposedAction
from services.operations.approval_policy import DEFAULT_MAX_AGE, ONE_PERSON, Policy
from services.operations.desk import OperationsDesk
from services.operations.rail_lookup import NoRail, StripeLookup
from services.platform.bearer import BearerAuth
from services.platform.clock import utc_now
from tests.conftest import asyncpg_dsn, create_database, drop_database, scratch_database, unique
from tests.integration.check_support import World
from tests.integration.operator_support import (
    made_at_rail,
    operator_app,
    plant_break,
    plant_breaks,
    referred,
)
from tests.integration.railsim_support import serving

OPERATOR = "ops-fuzz"
OPERATOR_TOKEN = f"token-{unique('op')}"
RESET = "/_reset"
PROPOSER = "alice"  # another operator, whose proposals the fuzzer may approve or reject
DEAD_EVENT = """
INSERT INTO inbox_events (rail, rail_event_id, payload, status, reason, received_at,
                          received_month, attempts)
VALUES ('stripe', $1, '\\x7b7d', $2, 'no settlement names tr_x', $3,
        date_trunc('month', $3 AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', 3)
"""


class AsTheOperator(requests.Session):
    """Sends what it is given, except that a `Settle-Operator` header names OPERATOR, the
    token's own (the stateful phase generates the header without the configured value); one
    naming another operator is refused, which test_operator_client holds."""

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        if "Settle-Operator" in request.headers:
            request.headers["Settle-Operator"] = OPERATOR
        return super().send(request, **kwargs)


def operator_document() -> dict[str, Any]:
    """The operator API's document, as the reconciler serves it."""
    routes = operator_routes(None, NoRail(), BearerAuth({}), utc_now, ONE_PERSON)  # type: ignore[arg-type]
    return operator_app(routes).openapi()


async def seed(world: World, lookup: StripeLookup) -> None:
    """What the operators work on: settlements under review (one the rail paid), breaks of
    several kinds and statuses, dead and parked inbox events, and PROPOSER's proposals."""
    pool = world.pool
    under_review = [await referred(world) for _ in range(4)]
    await made_at_rail(world, under_review[0])
    await plant_breaks(pool, 3)
    await plant_breaks(pool, 2, status="resolved")
    await plant_break(pool, "unknown_at_rail", settlement_id=None, currency=None, field="object")
    await plant_break(pool, "status_drift", settlement_id=under_review[3], field="status")
    for n in range(4):
        await pool.execute(DEAD_EVENT, unique("evt_"), "dead" if n % 2 else "parked", _now())
    desk = OperationsDesk(pool, lookup, Policy(True, DEFAULT_MAX_AGE))
    for sid in under_review[1:3]:
        await desk.act(
            ProposedAction.REVIEW_RESOLVE, sid, {"as": "failed"}, reason="seed", operator=PROPOSER
        )
    for break_id in await plant_breaks(pool, 2):
        await desk.act(
            ProposedAction.BREAK_RESOLVE, str(break_id), {}, reason="seed", operator=PROPOSER
        )


def _now() -> datetime:
    return datetime.now(UTC)


class Resettable:
    """The operator API (one-person mode; the database's two-person mode is the fuzzer's to
    turn on) over a copy of the seeded database `template`; `POST /_reset` swaps in a fresh
    copy (the state machine's scenarios do it first)."""

    def __init__(self, server_url: str, template: str, lookup: StripeLookup) -> None:
        self.server_url, self.template, self.lookup = server_url, template, lookup
        self.app: Any = None
        self.pool: asyncpg.Pool | None = None
        self.database: str | None = None

    async def renew(self) -> None:
        """A fresh copy of the seeded database behind a fresh app; the last copy dropped."""
        await self.aclose()
        self.database = unique("settle_fuzz_ops_")
        url = await create_database(self.server_url, self.database, self.template)
        self.pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=6)
        operators = BearerAuth({OPERATOR_TOKEN: OPERATOR})
        routes = operator_routes(self.pool, self.lookup, operators, utc_now, ONE_PERSON)
        self.app = operator_app(routes)

    async def aclose(self) -> None:
        if self.pool is not None:
            await self.pool.close()
        if self.database is not None:
            await drop_database(self.server_url, self.database)
        self.pool = self.database = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == RESET:
            await self.renew()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


def build_operator_api(server_url: str) -> Any:
    """What fuzz_support.served builds: a Resettable operator API over a seeded database."""

    async def build(stack: AsyncExitStack) -> Any:
        sim = RailSim()
        sim_url = await stack.enter_async_context(serving(create_rail_app(sim)))
        lookup = StripeLookup("sk_test_x", api_base=sim_url)
        stack.push_async_callback(lookup.aclose)
        url = await stack.enter_async_context(scratch_database(server_url, "settle_fuzz_tpl_"))
        pool = await asyncpg.create_pool(asyncpg_dsn(url), min_size=1, max_size=4)
        try:
            await seed(World(url, pool, sim, sim_url, "", "", "", "", "", ""), lookup)
        finally:
            await pool.close()  # a database copied from must have no one connected
        template = make_url(url).database
        assert template is not None
        api = Resettable(server_url, template, lookup)
        stack.push_async_callback(api.aclose)
        await api.renew()
        return api

    return build
