"""PostgreSQL's own counters around each e2e rate: commits, WAL, rows written per table and
in the whole bench database, and, when the server loads pg_stat_statements, what each
statement cost. Cumulative statistics are read fresh (`pg_stat_clear_snapshot()`), not from
the snapshot a transaction caches."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import asyncpg

from tools.bench.e2e_figures import StatementCost, TableWrites

# Leads every statement the bench itself runs, so its own probes are left out of the costs.
PROBE = "/* settle bench */ "

# A backend publishes its table and database counters at most once a second; what it wrote
# within a second of its last publication waits until it has been idle 10 s
# (PGSTAT_IDLE_INTERVAL). Read at once, a rate's last second of rows and commits would be
# missing (a third of the settlements at 10/s for 4 s); the reading waits those 10 s instead,
# and so also counts the stack's idle polling commits over that time.
STATS_FLUSH_S = 11.0

# A partitioned table's months counted as the table (its partitions carry the counters).
_TABLES = (
    PROBE
    + """
SELECT CASE WHEN n.nspname = 'public' THEN c.relname ELSE n.nspname || '.' || c.relname END AS name,
       sum(s.n_tup_ins)::bigint AS n_tup_ins, sum(s.n_tup_upd)::bigint AS n_tup_upd,
       sum(s.n_tup_hot_upd)::bigint AS n_tup_hot_upd, sum(s.n_tup_del)::bigint AS n_tup_del
  FROM pg_stat_user_tables AS s
  JOIN pg_class AS c ON c.oid = coalesce(pg_partition_root(s.relid), s.relid)
  JOIN pg_namespace AS n ON n.oid = c.relnamespace
 GROUP BY 1 ORDER BY 1
"""
)
_DATABASE = (
    PROBE
    + """
SELECT xact_commit, tup_inserted, tup_updated, tup_deleted, pg_current_wal_lsn()::text AS lsn
FROM pg_stat_database WHERE datname = current_database()
"""
)
_STATEMENTS = (
    PROBE
    + """
SELECT query, calls, total_exec_time FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND NOT starts_with(query, $1)
"""
)


@dataclass(frozen=True)
class DatabaseCounters:
    """PostgreSQL's cumulative counters at one moment."""

    commits: int  # committed transactions in the bench database
    wal_lsn: str  # the server's WAL insert position
    rows: TableWrites  # rows written in the bench database, catalogs included (HOT: its tables')
    tables: dict[str, TableWrites]  # rows written per table of the bench database


async def database_counters(conn: asyncpg.Connection, *, settle: bool = False) -> DatabaseCounters:
    """Read the commit and row counters and the WAL position; with `settle`, first give the
    backends time to publish what they last wrote."""
    if settle:
        await asyncio.sleep(STATS_FLUSH_S)
    await conn.execute(PROBE + "SELECT pg_stat_clear_snapshot()")
    row = await conn.fetchrow(_DATABASE)
    assert row is not None  # the database we are connected to is always listed
    tables = {
        str(t["name"]): TableWrites(
            int(t["n_tup_ins"]), int(t["n_tup_upd"]), int(t["n_tup_hot_upd"]), int(t["n_tup_del"])
        )
        for t in await conn.fetch(_TABLES)
    }
    hot = sum(t.hot_updated for t in tables.values())  # the database counts none of its own
    rows = TableWrites(
        int(row["tup_inserted"]), int(row["tup_updated"]), hot, int(row["tup_deleted"])
    )
    return DatabaseCounters(int(row["xact_commit"]), str(row["lsn"]), rows, tables)


async def wal_bytes(conn: asyncpg.Connection, since: str, until: str) -> int:
    """WAL bytes written between two positions."""
    return int(
        await conn.fetchval(
            PROBE + "SELECT pg_wal_lsn_diff($2::text::pg_lsn, $1::text::pg_lsn)", since, until
        )
    )


async def session_pids(conn: asyncpg.Connection) -> set[int]:
    """The backends serving the bench database now, the bench's own connection aside."""
    rows = await conn.fetch(
        PROBE + "SELECT pid FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    return {int(r["pid"]) for r in rows}


async def statements_loaded(conn: asyncpg.Connection) -> bool:
    """Whether the server loads pg_stat_statements; if so, its view is made available in the
    bench database. Never required: without it, no statement figures."""
    preload = str(await conn.fetchval("SELECT current_setting('shared_preload_libraries')"))
    if "pg_stat_statements" not in (name.strip() for name in preload.split(",")):
        return False
    await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    return True


async def reset_statements(conn: asyncpg.Connection) -> None:
    """Forget the bench database's statement costs so far (other databases' are kept: the
    server is shared)."""
    await conn.execute(
        PROBE + "SELECT pg_stat_statements_reset(0, (SELECT oid FROM pg_database"
        " WHERE datname = current_database()), 0)"
    )


async def statement_costs(conn: asyncpg.Connection) -> list[StatementCost]:
    """Every statement run in the bench database since the last reset, with what it cost."""
    return [
        StatementCost(
            " ".join(str(r["query"]).split()), int(r["calls"]), float(r["total_exec_time"])
        )
        for r in await conn.fetch(_STATEMENTS, PROBE.strip())
    ]
