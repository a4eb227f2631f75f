"""The e2e scenario over databases pre-filled with history (`--prefill 0,10000000`): each
fill's figures under its own name, the fill's cost, and how the accept rate and the p99
accepted -> paid at each larger fill compare with the first (issue 12 wants them within 10%
of an empty database's at ten million settlements)."""

from __future__ import annotations

import sys
import uuid
from dataclasses import replace

import asyncpg

from services.shared.config import libpq_dsn
from tools.bench.prefill import Filled, prefill
from tools.bench.report import Figure

# The figures compared between fills, per rate: what a user gets, throughput and latency.
COMPARED = ("accepted rate", "accepted->paid p99")
MIB = 1024 * 1024


def _progress(done: int, total: int, seconds: float) -> None:
    rate = done / seconds if seconds > 0 else 0.0
    print(f"prefill: {done:,} of {total:,} settlements, {seconds:,.0f} s ({rate:,.0f}/s)",
          file=sys.stderr, flush=True)  # fmt: skip


async def fill_database(url: str, count: int) -> Filled:
    """Pre-fill the bench database at `url` with `count` settlements of history, of a tenant
    no measured run uses."""
    conn = await asyncpg.connect(libpq_dsn(url))
    try:
        return await prefill(conn, f"history{uuid.uuid4().hex[:8]}", count, progress=_progress)
    finally:
        await conn.close()


def label(fill: int) -> str:
    """The prefix of a fill's figures, e.g. `prefill 10000000: `."""
    return f"prefill {fill}: "


def fill_figures(filled: Filled) -> list[Figure]:
    """What pre-filling cost: its time and the database's size after it."""
    at = label(filled.settlements)
    return [
        Figure(f"{at}fill time", filled.seconds, "s"),
        Figure(f"{at}database size", filled.database_bytes / MIB, "MiB"),
    ]


def named(fill: int, figures: list[Figure]) -> list[Figure]:
    """`figures` renamed under `fill`'s label."""
    return [replace(f, name=label(fill) + f.name) for f in figures]


def ratios(per_fill: dict[int, list[Figure]], rates: tuple[int, ...]) -> list[Figure]:
    """For each fill after the first and each rate, each `COMPARED` figure over the first
    fill's (1.0 means unchanged); none where the first fill's figure is zero."""
    fills = list(per_fill)
    if len(fills) < 2:
        return []
    base = {f.name: f.value for f in per_fill[fills[0]]}
    out = []
    for fill in fills[1:]:
        values = {f.name: f.value for f in per_fill[fill]}
        for rate in rates:
            for what in COMPARED:
                name = f"{rate}/s {what}"
                if base.get(name) and name in values:
                    ratio = values[name] / base[name]
                    out.append(Figure(f"{name}, prefill {fill} / prefill {fills[0]}", ratio, "x"))
    return out
