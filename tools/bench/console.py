"""`settle bench --scenario console --prefill 1000000`: how fast the operator console's pages
answer on a database of that many settlements.

Per fill (`--prefill`, default one of `--count` settlements): a fresh bench database is
pre-filled with history (`prefill.py`), the queues and the audit trail are seeded
(`console_seed.py`), then `settle console` runs as its own process on it and each page is
requested `REQUESTS` times in turn over one keep-alive connection with an operator's bearer
token, after `WARM_UP` requests not counted: the overview, a search by each field the search
matches (id, reference, payee, destination, rail reference; a different sampled settlement
each request), a settlement's story, the review, breaks and dead-webhook queues, and the
audit trail's first page and a page 90,000 actions down. Every answer must be the page asked
for (and a search by a unique field must find its settlement), or the run fails. The figures
are each page's p50 and p99 in milliseconds. Then every page is requested once more through
the console's app in this process with `auto_explain` on (`console_explain.py`): the count of
sequential scans of tables over 10,000 rows and of statements that read over 10,000 rows only
to filter them out are figures (both should be 0), and each page's
slowest statement is printed and its plan written to `docs/bench/console-plans.txt`. The
reconciler's oldest-submitted read (one pass over `settlements`) is timed on the same
database. The machine's one-minute load average before and after is reported: it is shared.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from collections.abc import Callable
from urllib.parse import quote

import asyncpg
import httpx

from services.adapters.postgres.database import create_pool
from services.platform.config import libpq_dsn
from services.platform.service_settings import Settings
from services.reconcile.standing import OLDEST_SUBMITTED
from tools.bench.console_explain import explain_pages, plans_text, slowest, title
from tools.bench.console_seed import Sample, Seeded, seed
from tools.bench.database import bench_database
from tools.bench.e2e_figures import percentile
from tools.bench.fills import fill_database, over_fills
from tools.bench.prefill import Filled
from tools.bench.report import RESULTS_DIR, BenchResult, Figure
from tools.bench.runner import BenchError, BenchOptions
from tools.bench.services import running
from tools.infra.paths import run_paths

REQUESTS = 50
WARM_UP = 3
PLANS = RESULTS_DIR / "console-plans.txt"
# (page, path of request n, what the answer must hold: the page's name and, for a search by
# a unique field, the settlement's id).
Page = tuple[str, Callable[[int], str], Callable[[int], tuple[str, ...]]]


def pages(seeded: Seeded) -> list[Page]:
    """Every page timed, with the path of its n-th request and what that answer must hold."""
    s = seeded.samples

    def one(n: int) -> Sample:
        return s[n % len(s)]

    def search(field: str, unique: bool) -> Page:
        def path(n: int) -> str:
            return f"/settlements?q={quote(getattr(one(n), field))}"

        def holds(n: int) -> tuple[str, ...]:
            found = (f'data-id="{one(n).id}"',) if unique else ()
            return ('data-page="settlements"', *found)

        return (f"search by {field.replace('_', ' ')}", path, holds)

    return [
        ("overview", lambda n: "/", lambda n: ('data-page="overview"',)),
        search("id", True),
        search("reference", True),
        search("payee", False),
        search("destination", False),
        search("rail_reference", True),
        ("story", lambda n: f"/settlements/{one(n).id}", lambda n: (one(n).id,)),
        ("review", lambda n: "/review", lambda n: ('data-page="review"', "review-item")),
        ("breaks", lambda n: "/breaks", lambda n: ('data-page="breaks"',)),
        ("dead webhooks", lambda n: "/webhooks?status=dead", lambda n: ('data-page="webhooks"',)),
        ("audit", lambda n: "/audit", lambda n: ('data-page="audit"',)),
        (
            "audit deep page",
            lambda n: f"/audit?after={seeded.deep_audit_id}",
            lambda n: ('data-page="audit"',),
        ),
    ]


def time_pages(base_url: str, token: str, timed: list[Page]) -> list[Figure]:
    """Each page's p50 and p99 over `REQUESTS` requests, after `WARM_UP` uncounted ones."""
    figures = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30.0) as client:
        for name, path, holds in timed:
            took = []
            for n in range(-WARM_UP, REQUESTS):
                started = time.perf_counter()
                answer = client.get(path(n))
                elapsed = time.perf_counter() - started
                _check(name, path(n), answer, holds(n))
                if n >= 0:
                    took.append(elapsed * 1000)
            figures += [
                Figure(f"{name} p50", percentile(took, 0.5), "ms"),
                Figure(f"{name} p99", percentile(took, 0.99), "ms"),
            ]
    return figures


def _check(name: str, path: str, answer: httpx.Response, holds: tuple[str, ...]) -> None:
    if answer.status_code != 200:
        raise BenchError(f"{name}: GET {path} answered {answer.status_code}: {answer.text[:300]}")
    missing = [h for h in holds if h not in answer.text]
    if missing:
        raise BenchError(f"{name}: GET {path} does not hold {missing}")


async def _gauge_read(url: str) -> float:
    """Milliseconds the reconciler's oldest-submitted read takes on the filled database."""
    conn = await asyncpg.connect(libpq_dsn(url))
    try:
        plan = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {OLDEST_SUBMITTED}")
    finally:
        await conn.close()
    return float(json.loads(plan)[0]["Execution Time"])


async def _seeded(url: str, settings: Settings) -> Seeded:
    pool = await create_pool(settings.model_copy(update={"database_url": url}), max_size=2)
    try:
        found = await seed(pool, settings)
    finally:
        await pool.close()
    if not found.samples:
        raise BenchError("no settlement of the history to search for: pre-fill some")
    return found


def _once(settings: Settings, fill: int) -> tuple[list[Figure], list[Figure], Filled | None]:
    url = bench_database(settings.database_url)
    filled = asyncio.run(fill_database(url, fill)) if fill else None
    seeded = asyncio.run(_seeded(url, settings))
    token = secrets.token_hex(16)
    env = {"SETTLE_DATABASE_URL": url, "SETTLE_OPERATOR_TOKENS": f"bench:{token}"}
    timed = pages(seeded)
    log = run_paths().run / "bench" / "console.log"
    with running(["console"], env, log, ready_path="/healthz") as console:
        figures = time_pages(console.url, token, timed)
    plans = asyncio.run(
        explain_pages({**os.environ, **env}, token, [(name, path(0)) for name, path, _ in timed])
    )
    scans = sum(len(p.large_seq_scans) for p in plans)
    worst = slowest(plans)
    PLANS.write_text(
        f"# The slowest statement of each console page, prefill {fill}\n\n{plans_text(worst)}\n"
    )
    for plan in worst:
        print(f"console: prefill {fill}: slowest statement of {title(plan)}", flush=True)
    figures.append(Figure("statements explained", len(plans), "statements"))
    figures.append(Figure("sequential scans of tables over 10,000 rows", scans, "scans"))
    in_vain = sum(1 for p in plans if p.reads_in_vain)
    figures.append(Figure("statements filtering out over 10,000 rows", in_vain, "statements"))
    figures.append(Figure("oldest-submitted gauge read", asyncio.run(_gauge_read(url)), "ms"))
    return figures, [], filled


def run_console(settings: Settings, options: BenchOptions) -> BenchResult:
    """Time every console page on databases pre-filled with each of `options.prefill`."""
    libpq_dsn(settings.database_url)  # a bad URL fails now, not after the fill
    fills = options.prefill or (options.count,)
    load_before = os.getloadavg()[0]
    figures, breakdown = over_fills(fills, lambda fill: _once(settings, fill), ())
    figures += [
        Figure("load average (1 min) before", load_before, ""),
        Figure("load average (1 min) after", os.getloadavg()[0], ""),
    ]
    parameters = {"prefill": "/".join(map(str, fills)), "requests": REQUESTS, "warm_up": WARM_UP}
    return BenchResult("console", parameters, figures, breakdown=breakdown)
