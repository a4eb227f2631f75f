"""The `inbox` scenario: signed webhooks posted by concurrent clients to `settle inbox`.

N settlements are booked on the bench database (half submitted with the rail reference, half
left to be matched by metadata, as when the webhook beats the relay). Then one
`transfer.created` per settlement is posted, plus a share of redeliveries (same event id)
and twins (new event id, same change), signed at send time, over keep-alive connections.
Figures: webhooks answered per second at the client with latency percentiles, and changes
deduped and applied per second, from the first post until the last settlement is `paid`.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from datetime import UTC, datetime

import asyncpg
import uvloop

from railsim.objects import event, json_bytes
from railsim.webhooks import signature_header
from services.domain.settlement import SettlementStatus
from services.platform.config import libpq_dsn
from services.platform.service_settings import Settings
from services.settlement.transitions import Move, apply_transitions
from tools.bench.database import bench_database, book_settlements
from tools.bench.http_load import post_load
from tools.bench.report import BenchResult, Figure
from tools.bench.runner import BenchError, BenchOptions
from tools.bench.services import running
from tools.infra.paths import run_paths

SECRET = "whsec_bench_inbox"
DUPLICATES = 0.2  # share of extra posts that redeliver an event already sent
TWINS = 0.05  # share of extra posts that announce a change again under a new event id


async def _settlements(
    pool: asyncpg.Pool, settings: Settings, tenant: str, count: int
) -> list[str]:
    ids = await book_settlements(pool, settings, tenant, tenant, count)
    # Half as the relay leaves them once it recorded the rail's answer: submitted with the
    # rail's reference, so their webhooks are matched by it.
    for start in range(0, len(ids), 2_000):
        moves = [
            move
            for sid in ids[start : start + 2_000 : 2]
            for move in (
                Move(uuid.UUID(sid), SettlementStatus.DISPATCHING),
                Move(uuid.UUID(sid), SettlementStatus.SUBMITTED, rail_reference=f"tr_{sid}"),
            )
        ]
        async with pool.acquire() as conn, conn.transaction():
            await apply_transitions(conn, moves, actor="bench", now=datetime.now(UTC))
    return ids


def _bodies(ids: list[str]) -> list[bytes]:
    def body(sid: str) -> bytes:
        obj = {
            "id": f"tr_{sid}",
            "object": "transfer",
            "amount": 100,
            "currency": "usd",
            "metadata": {"settlement_id": sid},
        }
        return json_bytes(event("transfer.created", obj, int(time.time())))

    firsts = [body(sid) for sid in ids]
    extra = [firsts[n] for n in range(0, len(ids), round(1 / DUPLICATES))]
    extra += [body(ids[n]) for n in range(0, len(ids), round(1 / TWINS))]
    # Each redelivery comes after its first delivery, spread through the run.
    posts: list[bytes] = []
    step = max(len(firsts) // max(len(extra), 1), 1)
    for n, first in enumerate(firsts):
        posts.append(first)
        if n % step == step - 1 and extra:
            posts.append(extra.pop(0))
    return posts + extra


async def _load(dsn: str, url: str, tenant: str, ids: list[str], clients: int) -> dict[str, float]:
    posts = _bodies(ids)

    def request_for(n: int) -> tuple[str, dict[str, str], bytes]:
        body = posts[n]
        signed = signature_header(body, SECRET, int(time.time()))
        return (
            "/v1/webhooks/stripe",
            {"Stripe-Signature": signed, "Content-Type": "application/json"},
            body,
        )

    conn = await asyncpg.connect(dsn)
    try:
        started = time.monotonic()
        result = await post_load(url, len(posts), clients, request_for)
        if result.statuses.get(200, 0) != len(posts):
            raise BenchError(f"expected {len(posts)} x 200, got {result.statuses}")
        query = "SELECT count(*) FROM settlements WHERE tenant = $1 AND status = 'paid'"
        deadline = time.monotonic() + max(120, len(ids) / 100)
        while (paid := await conn.fetchval(query, tenant)) < len(ids):
            if time.monotonic() > deadline:
                raise BenchError(f"only {paid} of {len(ids)} settlements paid")
            await asyncio.sleep(0.02)
        applied = time.monotonic() - started
    finally:
        await conn.close()
    cuts = statistics.quantiles(result.latencies, n=100)
    return {
        "posts": len(posts),
        "answered": len(posts) / result.elapsed,
        "applied": len(ids) / applied,
        "p50_ms": cuts[49] * 1000,
        "p99_ms": cuts[98] * 1000,
    }


def run_inbox(settings: Settings, options: BenchOptions) -> BenchResult:
    """Webhooks answered per second and changes deduped and applied per second."""
    url = bench_database(settings.database_url)
    dsn, tenant = libpq_dsn(url), f"inbox{uuid.uuid4().hex[:8]}"

    async def book() -> list[str]:
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
        try:
            return await _settlements(pool, settings, tenant, options.count)
        finally:
            await pool.close()

    ids = asyncio.run(book())
    env = {"SETTLE_DATABASE_URL": url, "STRIPE_WEBHOOK_SECRET": SECRET}
    log = run_paths().run / "bench" / "inbox.log"
    with running(["inbox"], env, log) as inbox:
        # uvloop: the client's loop costs less CPU, on the cores the inbox runs on.
        figures = uvloop.run(_load(dsn, inbox.url, tenant, ids, options.clients))
    return BenchResult(
        scenario="inbox",
        parameters={
            "settlements": options.count,
            "posts": int(figures["posts"]),
            "duplicates": DUPLICATES,
            "twins": TWINS,
            "clients": options.clients,
            "inbox_processes": 1,
            "apply_workers": settings.inbox_workers,
        },
        figures=[
            Figure("changes deduped and applied", figures["applied"], "changes/s"),
            Figure("webhooks answered", figures["answered"], "webhooks/s"),
            Figure("webhook latency p50", figures["p50_ms"], "ms"),
            Figure("webhook latency p99", figures["p99_ms"], "ms"),
        ],
    )
