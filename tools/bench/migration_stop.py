"""How long an upgrade stops the ledger's writes: a database at an older revision, pre-filled
with a history of settlements (`prefill`, as `settle bench --prefill` fills one), the ledger
accepting at a steady rate while the schema is upgraded to head one migration at a time.

    .venv/bin/python -m tools.bench.migration_stop --from 0019 --settlements 1000000

Writes are sent open-loop (one every 1/rate s, whatever the ones before are doing), each
through the ledger's own acceptor, so a write held behind a migration's lock shows as that
write's latency. A sampler reads pg_stat_activity every few milliseconds for sessions waiting
on a lock. The figures: each migration's duration, the slowest write during it, the longest
gap between two commits, and the longest lock wait seen; the same for a quiet baseline.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import timedelta

import asyncpg
import click
from sqlalchemy.engine import make_url

from services.adapters.postgres.migrate import known_revisions, upgrade
from services.adapters.postgres.migration_run import LOCK_TIMEOUT_MS
from services.domain.errors import SettleError
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books, Windows
from services.ledger.intake import parse_settlement_body
from services.ledger.model import Outcome
from services.platform.config import libpq_dsn
from services.platform.settings import load_settings
from tools.bench.prefill import prefill

TENANT = "migstop"
WAITING = """
SELECT coalesce(max(extract(epoch FROM clock_timestamp() - query_start)), 0)
  FROM pg_stat_activity
 WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
"""


@dataclass
class Window:
    """What the writes saw while one migration (or the baseline) ran."""

    name: str
    seconds: float = 0.0
    writes: int = 0
    slowest_write_ms: float = 0.0
    longest_gap_ms: float = 0.0
    longest_lock_wait_ms: float = 0.0


@dataclass
class Load:
    """The writes' and the sampler's records: (sent, committed) of each write, lock waits."""

    rate: float
    writes: list[tuple[float, float]] = field(default_factory=list)
    waits: list[tuple[float, float]] = field(default_factory=list)  # (at, seconds waiting)
    failed: Counter[str] = field(default_factory=Counter)  # why a write booked nothing
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def _write(ledger: Ledger, load: Load, n: int) -> None:
    sent = time.monotonic()
    body = {"reference": f"w-{n}", "payee": "p", "destination": f"acct_{n % 50}"}
    raw = json.dumps({**body, "amount": 100 + n, "currency": "USD"}).encode()
    try:
        result = await ledger.accept(parse_settlement_body(TENANT, f"w-{n}", raw))
    except (SettleError, asyncpg.PostgresError, OSError) as e:
        load.failed[type(e).__name__] += 1
        return
    if result.outcome is not Outcome.CREATED:  # answered, but nothing booked
        load.failed[result.outcome.value] += 1
        return
    load.writes.append((sent, time.monotonic()))


async def writes(ledger: Ledger, load: Load) -> None:
    """Send a write every 1/rate s until told to stop; wait for those sent."""
    tasks: set[asyncio.Task[None]] = set()
    start, n = time.monotonic(), 0
    while not load.stop.is_set():
        task = asyncio.create_task(_write(ledger, load, n))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
        await asyncio.sleep(max(0.0, start + n / load.rate - time.monotonic()))
    await asyncio.gather(*tasks)


async def sample(conn: asyncpg.Connection, load: Load) -> None:
    """Record the longest lock wait of any session every 5 ms until told to stop."""
    while not load.stop.is_set():
        waited = float(await conn.fetchval(WAITING))
        if waited > 0:
            load.waits.append((time.monotonic(), waited))
        await asyncio.sleep(0.005)


def window(name: str, load: Load, since: float, until: float, seconds: float) -> Window:
    """The figures of the writes sent, and the waits seen, between `since` and `until`, of
    a step that took `seconds`."""
    mine = sorted((s, c) for s, c in load.writes if since <= s < until)
    # Every gap between two commits that overlaps the window, the one it began in included.
    commits = sorted(c for _, c in load.writes)
    gaps = [b - a for a, b in itertools.pairwise(commits) if b >= since and a < until]
    waits = [w for at, w in load.waits if since <= at < until]
    return Window(
        name,
        round(seconds, 3),
        len(mine),
        round(max((c - s for s, c in mine), default=0) * 1000, 1),
        round(max(gaps, default=0) * 1000, 1),
        round(max(waits, default=0) * 1000, 1),
    )


@dataclass(frozen=True)
class Plan:
    """What to measure: from which revision, at what rate, how the upgrade runs."""

    start: str = "0019"
    rate: float = 100.0
    at_once: bool = False  # one upgrade to head, as `settle migrate` runs; else one per step
    blocker_s: float = 0.0  # a reader holding journal_entries that long as the upgrade starts
    lock_timeout_ms: int = LOCK_TIMEOUT_MS


async def _migrate_each(url: str, plan: Plan) -> list[tuple[str, float, float]]:
    """Upgrade to head, one step at a time or at once; when each step began and ended."""
    known = list(known_revisions())
    steps = known[known.index(plan.start) + 1 :]
    spans = []
    for revision in steps[-1:] if plan.at_once else steps:
        began = time.monotonic()
        await asyncio.to_thread(upgrade, url, revision, lock_timeout_ms=plan.lock_timeout_ms)
        spans.append((revision, began, time.monotonic()))
        await asyncio.sleep(0.5)  # the writes sent during it land before the next
    return spans


async def block(url: str, seconds: float, held: asyncio.Event) -> None:
    """A long report: a transaction reading journal_entries, open for `seconds`."""
    conn = await asyncpg.connect(libpq_dsn(url))
    try:
        async with conn.transaction():
            await conn.fetchval("SELECT count(*) FROM (SELECT 1 FROM journal_entries LIMIT 1) e")
            held.set()
            await asyncio.sleep(seconds)
    finally:
        await conn.close()


async def run_load(url: str, plan: Plan, baseline_s: float) -> list[Window]:
    """Write at the plan's rate for `baseline_s`, then upgrade to head; the windows."""
    pool = await asyncpg.create_pool(libpq_dsn(url), min_size=4, max_size=8)
    sampler = await asyncpg.connect(libpq_dsn(url))
    ledger = Ledger(pool, Books(Windows(timedelta(hours=48), timedelta(days=7))))
    load = Load(plan.rate)
    background = asyncio.gather(writes(ledger, load), sample(sampler, load))
    try:
        await asyncio.sleep(1.0)  # the first writes open the tenant's accounts: not counted
        began = time.monotonic()
        await asyncio.sleep(baseline_s)
        figures = [window("baseline", load, began, time.monotonic(), baseline_s)]
        held, blocker = asyncio.Event(), None
        if plan.blocker_s:
            blocker = asyncio.create_task(block(url, plan.blocker_s, held))
            await held.wait()
        spans = await _migrate_each(url, plan)
        if blocker is not None:
            await blocker
    finally:
        load.stop.set()
        await background
        await ledger.stop()
        await sampler.close()
        await pool.close()
    # A write sent just before a migration ended may commit a moment after it.
    figures += [window(rev, load, a, b + 0.25, b - a) for rev, a, b in spans]
    whole = window("upgrade", load, spans[0][1], spans[-1][2] + 0.25, spans[-1][2] - spans[0][1])
    failed = ", ".join(f"{why}: {n}" for why, n in sorted(load.failed.items()))
    return [*figures, whole, Window(f"writes that booked nothing ({failed or 'none'})")]


async def _database(server_url: str, name: str, create: bool) -> str:
    conn = await asyncpg.connect(libpq_dsn(server_url))
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if create:
            await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


async def fill(url: str, settlements: int) -> float:
    """Pre-fill `settlements` of history over four connections; seconds it took."""
    conns = [await asyncpg.connect(libpq_dsn(url)) for _ in range(4)]
    try:
        return (await prefill(conns, TENANT, settlements)).seconds
    finally:
        for conn in conns:
            await conn.close()


async def measure(server_url: str, settlements: int, plan: Plan) -> list[Window]:
    """The whole measurement on a database of its own, dropped at the end."""
    name = f"{make_url(server_url).database}_migstop_{os.getpid()}"
    url = await _database(server_url, name, create=True)
    try:
        await asyncio.to_thread(upgrade, url, plan.start)
        seconds = await fill(url, settlements)
        click.echo(f"{settlements} settlements at {plan.start}, filled in {seconds:.0f}s", err=True)
        return await run_load(url, plan, 5.0)
    finally:
        await _database(server_url, name, create=False)


@click.command()
@click.option("--from", "start", default="0019", show_default=True, help="Revision to start at.")
@click.option("--settlements", default=1_000_000, show_default=True, type=click.IntRange(0))
@click.option("--rate", default=100.0, show_default=True, help="Writes a second.")
@click.option("--at-once", is_flag=True, help="One upgrade to head, not one per migration.")
@click.option("--blocker", default=0.0, help="Seconds a reader holds journal_entries.")
@click.option("--lock-timeout-ms", default=LOCK_TIMEOUT_MS, show_default=True)
def main(
    start: str, settlements: int, rate: float, at_once: bool, blocker: float, lock_timeout_ms: int
) -> None:
    """Measure how long an upgrade from --from to head stops the ledger's writes."""
    plan = Plan(start, rate, at_once, blocker, lock_timeout_ms)
    figures = asyncio.run(measure(load_settings().database_url, settlements, plan))
    click.echo(json.dumps([asdict(f) for f in figures], indent=1))


if __name__ == "__main__":
    main()
