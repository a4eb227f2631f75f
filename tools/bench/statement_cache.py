"""What asyncpg's statement cache is worth to the ledger, and what PgBouncer adds: one client
accepts settlements one at a time through the ledger's own acceptor, then reads each back
through SettlementReads, on three pools of the same database (a fresh bench database):

  direct, cache on      the default: each statement prepared once per connection
  direct, cache off     SETTLE_DATABASE_POOLED=true without a pooler: the cache's own worth
  pgbouncer, cache off  the pooled deployment: PgBouncer in transaction mode in between

    .venv/bin/python -m tools.bench.statement_cache [--count 1000]

One client at a time, so each figure is a latency (mean per operation), not a throughput.
Prints a table; docs/pooling.md records a run with its machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import dataclass

from services.adapters.postgres.database import create_pool
from services.apps.ledger import windows
from services.ledger.acceptor import Ledger
from services.ledger.booking import Books
from services.ledger.intake import parse_settlement_body
from services.ledger.reads import SettlementReads
from services.platform.service_settings import Settings
from services.platform.settings import load_settings
from tools.bench.database import bench_database
from tools.infra.pgbouncer import pgbouncer

TENANT = "bench"


@dataclass(frozen=True)
class Timing:
    """Mean milliseconds per accept and per read of one setup."""

    setup: str
    accept_ms: float
    read_ms: float


def _body(reference: str, n: int) -> bytes:
    return json.dumps(
        {"reference": reference, "payee": "p", "destination": "acct_1", "amount": 100 + n}
        | {"currency": "EUR"}
    ).encode()


async def measure(settings: Settings, setup: str, count: int) -> Timing:
    """`count` accepts one after another, then `count` reads of them, on the settings' pool."""
    pool = await create_pool(settings, keep_sessions=True)
    ledger = Ledger(pool, Books(windows(settings)))
    reads = SettlementReads(pool)
    try:
        ids = []
        started = time.perf_counter()
        for n in range(count):
            reference = f"{setup.replace(' ', '-')}-{time.time_ns()}-{n}"
            request = parse_settlement_body(TENANT, reference, _body(reference, n))
            result = await ledger.accept(request)
            ids.append(str(result.settlement_id))
        accepted = time.perf_counter() - started
        started = time.perf_counter()
        for settlement_id in ids:
            assert await reads.settlement(TENANT, settlement_id) is not None
        read = time.perf_counter() - started
    finally:
        await ledger.stop()
        await pool.close()
    return Timing(setup, 1000 * accepted / count, 1000 * read / count)


async def _all(settings: Settings, pooled_url: str, count: int) -> list[Timing]:
    cache_off = {"database_pooled": True}
    through = {"database_pooled": True, "database_url": pooled_url}
    setups = [
        ("direct, cache on", settings),
        ("direct, cache off", settings.model_copy(update=cache_off)),
        ("pgbouncer, cache off", settings.model_copy(update=through)),
    ]
    await measure(settings, "warm-up", min(count, 100))
    return [await measure(s, name, count) for name, s in setups]


def main() -> None:
    """Run the three setups on a fresh bench database and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--count", type=int, default=1000, help="accepts (and reads) per setup")
    count = parser.parse_args().count
    settings = load_settings()
    url = bench_database(settings.database_url)
    settings = settings.model_copy(update={"database_url": url})
    with pgbouncer(url, pool_size=2) as bouncer:
        pooled_url = bouncer.url(url.rsplit("/", 1)[1].split("?")[0])
        timings = asyncio.run(_all(settings, pooled_url, count))
    print(f"{'setup':<22} {'accept ms':>10} {'read ms':>10}   ({count} each, one client)")
    for t in timings:
        print(f"{t.setup:<22} {t.accept_ms:>10.3f} {t.read_ms:>10.3f}")


if __name__ == "__main__":
    main()
