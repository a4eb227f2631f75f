"""The console's queries as PostgreSQL runs them on the bench database: every page requested
once more through the console's own app, in this process, over connections that load
`auto_explain` and hand each statement's plan, with its actual rows and time, back to this
process as a notice (never to the server's log). The pages must not grow with the table, so
two things are counted: a sequential scan of a table of more than `LARGE_ROWS` rows, and a
statement that read more than `LARGE_ROWS` rows only to throw them away (an index walked end
to end under a filter costs what a sequential scan does).

LOAD needs a superuser, or auto_explain under `$libdir/plugins`; without either the pass
raises BenchError.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import NamedTuple

import asyncpg
import httpx

from services.apps.console import compose, create_app
from services.platform.config import libpq_dsn
from services.platform.service_settings import ConsoleSettings
from services.platform.settings import load_settings
from tools.bench.runner import BenchError

LARGE_ROWS = 10_000
EXPLAIN_SETTINGS = (
    "LOAD 'auto_explain'",
    "SET auto_explain.log_min_duration = 0",
    "SET auto_explain.log_analyze = on",
    "SET auto_explain.log_level = 'notice'",
    "SET client_min_messages = 'notice'",
)
PLAN = re.compile(r"duration: ([0-9.]+) ms\s+plan:\n(.*)", re.DOTALL)
SEQ_SCAN = re.compile(r"Seq Scan on (\w+)")
DISCARDED = re.compile(r"Rows Removed by (?:Join )?Filter: (\d+)")
TABLE_ROWS = "SELECT relname, reltuples::bigint AS n FROM pg_class WHERE relname = ANY($1)"


class Plan(NamedTuple):
    """One statement a page ran, as auto_explain reported it."""

    page: str
    milliseconds: float  # its execution time, as measured under EXPLAIN ANALYZE
    text: str  # the query text and its plan
    large_seq_scans: tuple[str, ...]  # tables over LARGE_ROWS rows it read sequentially
    discarded: int  # rows its nodes read and filtered out (per loop, as EXPLAIN shows them)

    @property
    def reads_in_vain(self) -> bool:
        """Whether it read more than LARGE_ROWS rows only to throw them away."""
        return self.discarded > LARGE_ROWS


async def explain_pages(
    env: dict[str, str], token: str, pages: list[tuple[str, str]]
) -> list[Plan]:
    """Request each (page, path) once through the console's app, configured by `env` as the
    console process is; every statement's plan."""
    settings = load_settings(env, kind=ConsoleSettings)
    notices: list[str] = []

    def listen(_: object, message: asyncpg.PostgresLogMessage) -> None:
        notices.append(str(message.message))

    async def loading(conn: asyncpg.Connection) -> None:
        try:
            for statement in EXPLAIN_SETTINGS:
                await conn.execute(statement)
        except asyncpg.PostgresError as e:
            raise BenchError(f"auto_explain cannot be loaded for the EXPLAIN pass: {e}") from e

    async def listening(conn: asyncpg.Connection) -> None:
        conn.add_log_listener(listen)

    async def keeping(conn: asyncpg.Connection) -> None:
        # Instead of the pool's reset, which would undo the settings: the console's pages
        # leave no session state behind (services.adapters.postgres.database, keep_sessions).
        conn.remove_log_listener(listen)

    pool = await asyncpg.create_pool(
        libpq_dsn(settings.database_url),
        min_size=1,
        max_size=1,
        init=loading,
        setup=listening,
        reset=keeping,
    )
    console, owned = await compose(settings)
    explained = replace(console, pool=pool)
    transport = httpx.ASGITransport(app=create_app(explained))
    plans: list[tuple[str, str]] = []
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://console") as client:
            # The first pass also plans the driver's own look-ups of the types it meets, once
            # per connection: only the second pass's statements are the pages'.
            for kept in (False, True):
                for page, path in pages:
                    notices.clear()
                    answer = await client.get(path, headers={"Authorization": f"Bearer {token}"})
                    if answer.status_code != 200:
                        raise BenchError(f"{page} ({path}) answered {answer.status_code}")
                    plans += [(page, n) for n in notices] if kept else []
        if not plans:
            raise BenchError("auto_explain reported no statement of the pages")
        return await _judged(pool, plans)
    finally:
        await pool.close()
        await console.pool.close()
        if owned is not None:
            await owned.aclose()


async def _judged(pool: asyncpg.Pool, notices: list[tuple[str, str]]) -> list[Plan]:
    """Each notice that is a plan, judged by the sizes of the tables it scans sequentially."""
    tables = sorted({t for _, n in notices for t in SEQ_SCAN.findall(n)})
    rows = {r["relname"]: r["n"] for r in await pool.fetch(TABLE_ROWS, tables)}
    return [p for page, n in notices if (p := judge(page, n, rows)) is not None]


def judge(page: str, notice: str, table_rows: dict[str, int]) -> Plan | None:
    """The plan an auto_explain `notice` reports, with the tables over LARGE_ROWS rows (by
    `table_rows`) it scans sequentially and the rows it filters out; None if no plan."""
    found = PLAN.search(notice)
    if found is None:
        return None
    plan = found.group(2)
    scans = tuple(t for t in SEQ_SCAN.findall(plan) if table_rows.get(t, 0) > LARGE_ROWS)
    discarded = sum(int(n) for n in DISCARDED.findall(plan))
    return Plan(page, float(found.group(1)), plan.strip(), scans, discarded)


def slowest(plans: list[Plan]) -> list[Plan]:
    """Each page's slowest statement, the slowest first."""
    by_page: dict[str, Plan] = {}
    for plan in plans:
        if plan.page not in by_page or plan.milliseconds > by_page[plan.page].milliseconds:
            by_page[plan.page] = plan
    return sorted(by_page.values(), key=lambda p: p.milliseconds, reverse=True)


def plans_text(plans: list[Plan]) -> str:
    """The plans as a plain text report, one section per statement."""
    return "\n\n".join(f"## {title(p)}\n{p.text}" for p in plans)


def title(plan: Plan) -> str:
    """The page, the statement's time and what it read in vain, on a line."""
    notes = [f"sequential scan of {t}" for t in plan.large_seq_scans]
    notes += [f"{plan.discarded:,} rows read and filtered out"] if plan.reads_in_vain else []
    return f"{plan.page}: {plan.milliseconds:.2f} ms" + (f" ({'; '.join(notes)})" if notes else "")
