"""A scenario over databases pre-filled with history (`--prefill 0,10000000`): one run per
size, each fill's figures under its own name, the fill's cost, and how the figures a user
gets (throughput, tail latency) at each later size compare with the first (issue 12 wants
them within 10% of an empty database's at ten million settlements)."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace

import asyncpg

from services.platform.config import libpq_dsn
from tools.bench.prefill import Filled, prefill
from tools.bench.report import Figure

MIB = 1024 * 1024
# Batches booked at once: PostgreSQL spends a core on each, and FK checks and index upkeep,
# not locks, are what a batch waits for, so two connections fill a two-core server twice
# as fast as one.
FILL_CONNECTIONS = 2
# One run on a database pre-filled with that many settlements: its figures, its breakdown and
# what the fill took (None for an empty database).
Once = Callable[[int], tuple[list[Figure], list[Figure], Filled | None]]


def _progress(done: int, total: int, seconds: float) -> None:
    rate = done / seconds if seconds > 0 else 0.0
    print(
        f"prefill: {done:,} of {total:,} settlements, {seconds:,.0f} s ({rate:,.0f}/s)",
        file=sys.stderr,
        flush=True,
    )


async def fill_database(url: str, count: int) -> Filled:
    """Pre-fill the bench database at `url` with `count` settlements of history, of a tenant
    no measured run uses, over `FILL_CONNECTIONS` connections."""
    conns = [await asyncpg.connect(libpq_dsn(url)) for _ in range(FILL_CONNECTIONS)]
    try:
        tenant = f"history{uuid.uuid4().hex[:8]}"
        return await prefill(conns, tenant, count, progress=_progress)
    finally:
        for conn in conns:
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


def ratios(per_fill: dict[int, list[Figure]], compared: Sequence[str]) -> list[Figure]:
    """For each fill after the first, each figure named in `compared` as a percentage of the
    first fill's (100 means unchanged; shown to a tenth, where a ratio would show 0.9 for
    anything from 0.85 to 0.95); none where the first fill's figure is zero."""
    fills = list(per_fill)
    if len(fills) < 2:
        return []
    base = {f.name: f.value for f in per_fill[fills[0]]}
    out = []
    for fill in fills[1:]:
        values = {f.name: f.value for f in per_fill[fill]}
        for name in compared:
            if base.get(name) and name in values:
                percent = 100 * values[name] / base[name]
                out.append(Figure(f"{name}, prefill {fill} vs {fills[0]}", percent, "%"))
    return out


def over_fills(
    fills: Sequence[int], once: Once, compared: Sequence[str]
) -> tuple[list[Figure], list[Figure]]:
    """`once` for each of `fills` in order: every figure and breakdown named by its fill,
    each fill's cost, then the ratios of the `compared` figures."""
    figures: list[Figure] = []
    breakdown: list[Figure] = []
    per_fill: dict[int, list[Figure]] = {}
    for fill in fills:
        per_fill[fill], parts, filled = once(fill)
        figures += fill_figures(filled) if filled else []
        figures += named(fill, per_fill[fill])
        breakdown += named(fill, parts)
    return figures + ratios(per_fill, compared), breakdown
