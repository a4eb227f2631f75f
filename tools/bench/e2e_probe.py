"""What the `e2e` scenario reads around each rate: CPU seconds of every process of the stack
and the settlements' own transition times (PostgreSQL's counters: tools/bench/e2e_pgstats.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import asyncpg
import psutil

from services.domain.settlement import TERMINAL
from tools.bench.e2e_figures import ProcessGroup, ProcessSample
from tools.bench.e2e_pgstats import PROBE
from tools.bench.runner import BenchError

_GONE = (psutil.NoSuchProcess, psutil.AccessDenied)
DONE_STATUSES = sorted(str(s.value) for s in TERMINAL)


def process_samples(pids: Iterable[int]) -> dict[int, ProcessSample]:
    """CPU so far of each of `pids` and of every live process below them; a process that
    ends while it is read is left out (its parent's reaped time takes it over)."""
    samples: dict[int, ProcessSample] = {}
    for pid in pids:
        try:
            tree = [psutil.Process(pid)]
            tree += tree[0].children(recursive=True)
        except _GONE:
            continue
        for proc in tree:
            try:
                times, parent = proc.cpu_times(), proc.ppid()
            except _GONE:
                continue
            own, reaped = times.user + times.system, times.children_user + times.children_system
            samples[proc.pid] = ProcessSample(proc.pid, parent, own, reaped)
    return samples


def sample_groups(groups: Mapping[str, ProcessGroup]) -> dict[int, ProcessSample]:
    """CPU so far of every process of `groups` and every live process below them."""
    return process_samples(pid for group in groups.values() for pid in group.pids)


async def wait_final(
    conn: asyncpg.Connection, tenant: str, run: str, expected: int, timeout_s: float
) -> None:
    """Wait until `expected` settlements of `run` exist and every one is final."""
    query = PROBE + (
        "SELECT count(*) AS n, count(*) FILTER (WHERE status = ANY($3::text[])) AS done"
        " FROM settlements WHERE tenant = $1 AND reference LIKE $2"
    )
    deadline = time.monotonic() + timeout_s
    while True:
        row = await conn.fetchrow(query, tenant, f"{run}-%", DONE_STATUSES)
        assert row is not None
        if row["n"] >= expected and row["done"] == row["n"]:
            return
        if time.monotonic() > deadline:
            raise BenchError(
                f"{run}: {row['done']} of {row['n']} settlements final ({expected} accepted)"
                f" after {timeout_s:.0f} s"
            )
        await asyncio.sleep(0.25)


_LATENCIES = (
    PROBE
    + """
WITH s AS (
    SELECT min(t.occurred_at) FILTER (WHERE t.to_status = 'accepted') AS accepted,
           min(t.occurred_at) FILTER (WHERE t.to_status = 'submitted') AS submitted,
           min(t.occurred_at) FILTER (WHERE t.to_status = 'paid') AS paid
    FROM settlements x JOIN settlement_transitions t ON t.settlement_id = x.id
    WHERE x.tenant = $1 AND x.reference LIKE $2
    GROUP BY x.id
)
SELECT count(accepted) AS accepted, count(submitted) AS submitted, count(paid) AS paid,
       extract(epoch FROM max(accepted) - min(accepted))::float8 AS accepted_span,
       extract(epoch FROM max(submitted) - min(accepted))::float8 AS submitted_span,
       extract(epoch FROM max(paid) - min(accepted))::float8 AS paid_span,
       percentile_cont(ARRAY[0.5, 0.99, 0.999]) WITHIN GROUP
           (ORDER BY extract(epoch FROM submitted - accepted)) AS to_submitted,
       percentile_cont(ARRAY[0.5, 0.99, 0.999]) WITHIN GROUP
           (ORDER BY extract(epoch FROM paid - accepted)) AS to_paid
FROM s
"""
)


@dataclass(frozen=True)
class Transitions:
    """How many settlements reached each status, over how long from the first acceptance
    (seconds), and the p50/p99/p999 seconds from accepted to submitted and to paid."""

    counts: dict[str, int]  # accepted, submitted, paid
    spans: dict[str, float]
    to_submitted: tuple[float, float, float] | None
    to_paid: tuple[float, float, float] | None


def _cuts(value: list[float] | None) -> tuple[float, float, float] | None:
    return (float(value[0]), float(value[1]), float(value[2])) if value else None


async def transition_figures(conn: asyncpg.Connection, tenant: str, run: str) -> Transitions:
    """The run's transitions, read from settlement_transitions."""
    row = await conn.fetchrow(_LATENCIES, tenant, f"{run}-%")
    assert row is not None  # an aggregate always answers one row
    statuses = ("accepted", "submitted", "paid")
    return Transitions(
        counts={s: int(row[s]) for s in statuses},
        spans={s: float(row[f"{s}_span"] or 0.0) for s in statuses},
        to_submitted=_cuts(row["to_submitted"]),
        to_paid=_cuts(row["to_paid"]),
    )
