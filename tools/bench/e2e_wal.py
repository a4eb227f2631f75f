"""Where a rate's WAL goes: the server's own records between two positions, read back with
`pg_waldump` and summed per relation of the bench database (a table, its indexes and its TOAST
counted as the table; a month of a partitioned table as the table), with the full-page images
among them.

Only when the bench can read the server's WAL: `pg_waldump` beside the server's binaries and
the data directory readable (the local cluster of `settle infra up`, the bench run as root or
the server's user). Elsewhere the breakdown is left out, as statement costs are without
pg_stat_statements. Records that name no relation (commits, checkpoints) are counted once,
under "no relation", whichever database wrote them; records of other databases are left out.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import NamedTuple

import asyncpg

from tools.bench.report import Figure
from tools.infra.postgres import find_bindir

# One record as pg_waldump prints it: its total length, then the first block it touches.
_RECORD = re.compile(r"^rmgr: +(?P<rmgr>\S+) +len \(rec/tot\): +\d+/ *(?P<total>\d+),")
_KIND = re.compile(r"desc: (?P<kind>[A-Z_+]+)")
_BLOCK = re.compile(
    r"blkref #0: rel \d+/(?P<db>\d+)/(?P<node>\d+)(?: fork \w+)? blk \d+(?P<fpw> FPW)?"
)
NO_RELATION = "no relation"
SHOWN = 12  # relations named in the breakdown; the rest are summed as "other"
KINDS_SHOWN = 8  # kinds of record named in the breakdown

# Each relation of the bench database by file node, named by the table it belongs to: an index
# by its table, a TOAST table and its index by the table they hold values of, a month by its
# partitioned table.
_RELATIONS = """
SELECT pg_relation_filenode(c.oid) AS node, r.relname AS name
  FROM pg_class c
  LEFT JOIN pg_index i ON i.indexrelid = c.oid
  CROSS JOIN LATERAL (SELECT coalesce(i.indrelid, c.oid) AS oid) AS indexed
  LEFT JOIN pg_class toasted ON toasted.reltoastrelid = indexed.oid
  CROSS JOIN LATERAL (SELECT coalesce(toasted.oid, indexed.oid) AS oid) AS t
  JOIN pg_class r ON r.oid = coalesce(pg_partition_root(t.oid), t.oid)
 WHERE pg_relation_filenode(c.oid) IS NOT NULL
"""


class WalShare(NamedTuple):
    """The WAL one table (or "no relation") took over a window."""

    name: str
    total: int  # bytes of its records
    images: int  # bytes of those records that carry a full-page image
    records: int


def waldump() -> Path | None:
    """The server's pg_waldump, if it is installed beside the server."""
    found = find_bindir()
    tool = found / "pg_waldump" if found else None
    if tool is not None and tool.is_file():
        return tool
    located = shutil.which("pg_waldump")
    return Path(located) if located else None


async def wal_directory(conn: asyncpg.Connection) -> Path | None:
    """The server's pg_wal directory, when this process can read it."""
    try:
        data = Path(await conn.fetchval("SHOW data_directory"))
    except asyncpg.PostgresError:  # only superusers may read it
        return None
    wal = data / "pg_wal"
    try:
        next(wal.iterdir(), None)
    except OSError:
        return None
    return wal


class WalBreakdown(NamedTuple):
    """A window's WAL of the bench database by table, and by kind of record ("Heap INSERT",
    "Btree INSERT_LEAF", "Heap LOCK" for a row locked by a foreign key's check), largest
    first."""

    tables: list[WalShare]
    kinds: list[WalShare]


async def wal_breakdown(conn: asyncpg.Connection, since: str, until: str) -> WalBreakdown | None:
    """The bench database's WAL between two positions, per table and per kind of record; None
    when the server's WAL cannot be read from here."""
    tool, wal = waldump(), await wal_directory(conn)
    if tool is None or wal is None or since == until:
        return None
    database = str(
        await conn.fetchval("SELECT oid FROM pg_database WHERE datname = current_database()")
    )
    names = {str(r["node"]): r["name"] for r in await conn.fetch(_RELATIONS)}
    process = await asyncio.create_subprocess_exec(
        str(tool),
        "-p",
        str(wal),
        "-s",
        since,
        "-e",
        until,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    tally = Tally(database, names)
    async for line in process.stdout:
        tally.add(line.decode(errors="replace"))
    await process.wait()
    return tally.breakdown()


class Tally:
    """pg_waldump's records summed per table of one database and per kind of record."""

    def __init__(self, database: str, names: dict[str, str]) -> None:
        self.database = database  # its oid, as the records name it
        self.names = names  # file node -> table
        self.totals: Counter[str] = Counter()
        self.images: Counter[str] = Counter()
        self.records: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()

    def add(self, text: str) -> None:
        """Count one line of pg_waldump's output (lines that are no record are passed over)."""
        record = _RECORD.match(text)
        if record is None:
            return
        block = _BLOCK.search(text, record.end())
        if block is not None and block["db"] != self.database:
            return
        node = None if block is None else block["node"]
        name = NO_RELATION if node is None else self.names.get(node, f"relation {node}")
        size = int(record["total"])
        self.totals[name] += size
        self.records[name] += 1
        if block is not None and block["fpw"]:
            self.images[name] += size
        kind = _KIND.search(text, record.end())
        self.kinds[f"{record['rmgr']} {kind['kind'] if kind else '?'}"] += size

    def breakdown(self) -> WalBreakdown:
        """What was counted, largest first."""
        return WalBreakdown(
            [WalShare(n, t, self.images[n], self.records[n]) for n, t in self.totals.most_common()],
            [WalShare(k, t, 0, 0) for k, t in self.kinds.most_common()],
        )


def wal_figures(at: str, breakdown: WalBreakdown | None, paid: int) -> list[Figure]:
    """Bytes of WAL per paid settlement for the largest tables, the rest summed, how much of
    it was full-page images, and the largest kinds of record."""
    if not breakdown or not breakdown.tables or not paid:
        return []
    shares = breakdown.tables
    shown, rest = shares[:SHOWN], shares[SHOWN:]
    figures = [
        Figure(f"{at} wal {s.name}", round(s.total / paid, 1), "bytes/settlement") for s in shown
    ]
    if rest:
        figures.append(
            Figure(
                f"{at} wal other tables",
                round(sum(s.total for s in rest) / paid, 1),
                "bytes/settlement",
            )
        )
    figures.append(
        Figure(
            f"{at} wal full-page images",
            round(sum(s.images for s in shares) / paid, 1),
            "bytes/settlement",
        )
    )
    figures.append(
        Figure(
            f"{at} wal records",
            round(sum(s.records for s in shares) / paid, 1),
            "records/settlement",
        )
    )
    figures += [
        Figure(f"{at} wal kind {k.name}", round(k.total / paid, 1), "bytes/settlement")
        for k in breakdown.kinds[:KINDS_SHOWN]
    ]
    return figures
