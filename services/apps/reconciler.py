"""Composition root of the reconciler: pool, rail reader, lock, metrics, rounds and HTTP app,
which is also the operator API the `settle` operator commands talk to (review, breaks,
approvals, policy: services/operations/http.py; inbox events: inbox_http.py).

Nothing connects at import time; the server starts (and answers /healthz) while PostgreSQL
is away or another replica holds the lock. On SIGTERM the HTTP server stops first, then the
run under way finishes and is recorded (not left `running`), and the lock is given up.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg
import stripe
import uvicorn
from fastapi import FastAPI
from starlette.routing import BaseRoute

from services.adapters.postgres.database import create_pool
from services.adapters.postgres.schema_version import require_schema
from services.adapters.stripe.address import rail_api_base
from services.adapters.stripe.source import RailSource
from services.apps.reconciler_admin import build_app
from services.operations.approval_policy import Policy, policy_of
from services.operations.http import routes
from services.operations.inbox_http import inbox_routes
from services.operations.rail_lookup import RailLookup, StripeLookup, stripe_lookup
from services.platform.bearer import BearerAuth
from services.platform.clock import Clock, utc_now
from services.platform.config import libpq_dsn
from services.platform.running import run_until_first_exits
from services.platform.service_settings import ReconcilerSettings
from services.platform.tuning import ReconcileSection
from services.reconcile.lock import ReconcilerLock
from services.reconcile.metrics import ReconcileMetrics, create_metrics
from services.reconcile.reconciler import Reconciler
from services.reconcile.schedule import Schedule

POOL_SIZE = 4


def schedule_of(settings: ReconcileSection) -> Schedule:
    """The interval, re-check ages, grace and overlap the settings ask for."""
    return Schedule(
        settings.reconcile_interval_seconds,
        settings.reconcile_recheck_ages,
        settings.reconcile_grace_seconds,
        settings.reconcile_overlap_seconds,
    )


@dataclass
class Service:
    """The reconciler's parts, wired: run `reconciler.run()` and serve `app`; then `aclose`."""

    reconciler: Reconciler
    app: FastAPI
    metrics: ReconcileMetrics
    lock: ReconcilerLock
    pool: asyncpg.Pool
    rail: RailSource
    lookup: StripeLookup  # the rail as operators' resolutions ask it

    async def aclose(self) -> None:
        """Give the lock up and close the rail's sessions and the pool."""
        await self.lock.release()
        await self.rail.aclose()
        await self.lookup.aclose()
        await self.pool.close()


async def compose(
    settings: ReconcilerSettings,
    extra_routes: Sequence[BaseRoute] = (),
    *,
    clock: Clock = utc_now,
) -> Service:
    """The reconciler's parts built from `settings`, telling time by `clock`; nothing
    connects yet."""
    stripe.enable_telemetry = False  # nothing about our calls leaves but the calls
    metrics = create_metrics()
    pool = await create_pool(settings, max_size=POOL_SIZE)
    await require_schema(pool)  # a schema older than this code ends the start
    api_base = rail_api_base(settings)
    rail = RailSource(
        settings.stripe_api_key.get_secret_value(),
        api_base=api_base,
        read_rate=settings.reconcile_read_rate,
    )
    lookup = stripe_lookup(settings)
    operators = BearerAuth(settings.operator_by_token)
    served = operator_routes(pool, lookup, operators, clock, policy_of(settings))
    lock = ReconcilerLock(libpq_dsn(settings.database_url))
    plan = schedule_of(settings)
    reconciler = Reconciler(pool, rail, lock, metrics, plan, rng=random.Random(), clock=clock)
    app = build_app(metrics, lambda: lock.held, [*served, *extra_routes])
    return Service(reconciler, app, metrics, lock, pool, rail, lookup)


def operator_routes(
    pool: asyncpg.Pool, lookup: RailLookup, operators: BearerAuth, clock: Clock, policy: Policy
) -> list[BaseRoute]:
    """The operator API: the operators' actions and reads (review, breaks, approvals, policy)
    and the inbox's events, each behind an operator's token."""
    inbox = inbox_routes(pool, operators, clock, policy)
    return [*routes(pool, lookup, operators, clock=clock, policy=policy), *inbox.routes]


async def serve(
    settings: ReconcilerSettings, host: str, port: int, extra_routes: Sequence[BaseRoute] = ()
) -> None:
    """Run the reconciler and its HTTP app (with `extra_routes`) until cancelled."""
    service = await compose(settings, extra_routes)
    server = uvicorn.Server(
        uvicorn.Config(
            service.app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            log_config=None,
            proxy_headers=False,
        )
    )

    async def http() -> None:
        await server.serve()  # returns on SIGTERM or SIGINT
        # The run under way is finished and recorded, not left `running`; then `run` returns.
        service.reconciler.stop()
        await asyncio.Event().wait()

    try:
        await run_until_first_exits(http(), service.reconciler.run())
    finally:
        server.should_exit = True
        await service.aclose()
