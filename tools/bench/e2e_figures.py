"""Pure arithmetic of the `e2e` scenario: client-side percentiles, CPU deltas, per-settlement
ratios, which process's CPU counts where, rows written per table and statement costs per
settlement, and the highest rate that kept its promise. No I/O, so it is tested on its own."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from tools.bench.report import Figure

PAID_P99_LIMIT_S = 1.0  # the promise the e2e scenario reports against: p99 accepted -> paid
TOP_STATEMENTS = 5  # statements reported by calls and by time, each
STATEMENT_TEXT = 72  # characters of a statement's text its figure's name keeps


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The `fraction` (0..1) percentile of `samples` by linear interpolation, as PostgreSQL's
    percentile_cont computes it, so client and server figures are read the same way."""
    if not samples:
        raise ValueError("no samples")
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction {fraction} is outside 0..1")
    ordered = sorted(samples)
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def per_settlement(total: float, settlements: int) -> float:
    """`total` spread over `settlements`; 0 when nothing settled (no division by zero)."""
    return total / settlements if settlements > 0 else 0.0


def per_second(count: int, span_s: float, floor_s: float) -> float:
    """`count` over `span_s` seconds, the span taken as at least `floor_s` (one arrival gap):
    a burst that all lands in the same millisecond must not read as an infinite rate."""
    return count / max(span_s, floor_s)


def cpu_deltas(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """CPU seconds each process group spent between two readings; a group absent before (it
    started in between) counts from zero, one absent after (it ended) is left out."""
    return {name: after[name] - before.get(name, 0.0) for name in after}


class ProcessSample(NamedTuple):
    """One process's CPU seconds so far, read at one moment."""

    pid: int
    parent: int  # its parent's pid, which places it in the process tree
    own_s: float  # user + system of the process itself, every thread of it
    reaped_s: float  # user + system of its children that ended and that it waited for


class ProcessGroup(NamedTuple):
    """Processes whose CPU is reported as one figure, e.g. both relays."""

    pids: tuple[int, ...]
    # True: with every process below them (PostgreSQL's backends, live or reaped); False: the
    # processes' own CPU only, for a parent whose children are reported as groups of their own.
    descendants: bool = True


def group_cpu(
    samples: Mapping[int, ProcessSample], groups: Mapping[str, ProcessGroup]
) -> dict[str, float]:
    """CPU seconds of each group, every process counted once: a descendant that is itself
    a group's process is counted in that group only, never in its ancestor's. A group's
    process absent from `samples` (it ended) counts nothing."""
    roots = {pid for group in groups.values() for pid in group.pids}
    below: dict[int, list[int]] = {}
    for sample in samples.values():
        below.setdefault(sample.parent, []).append(sample.pid)
    totals: dict[str, float] = {}
    for name, group in groups.items():
        total = 0.0
        for pid in group.pids:
            if pid not in samples:
                continue
            if not group.descendants:
                total += samples[pid].own_s
                continue
            tree = [pid]
            while tree:
                sample = samples[tree.pop()]
                total += sample.own_s + sample.reaped_s
                tree += [child for child in below.get(sample.pid, []) if child not in roots]
        totals[name] = total
    return totals


def sessions_cpu(
    before: Mapping[int, ProcessSample], after: Mapping[int, ProcessSample], pids: Iterable[int]
) -> float:
    """CPU seconds `pids` spent between two samplings, each on its own (not its children):
    one started in between counts from zero, one that ended in between is lost (its time
    went to its parent's reaped time, which no single process owns)."""
    total = 0.0
    for pid in set(pids):
        if pid in after:
            total += after[pid].own_s - (before[pid].own_s if pid in before else 0.0)
    return total


def highest_rate_within(
    p99_paid_s: Mapping[int, float | None], limit_s: float = PAID_P99_LIMIT_S
) -> int | None:
    """The highest offered rate whose p99 accepted -> paid stayed under `limit_s`, or None
    when no rate did (a rate with no paid settlement never qualifies)."""
    kept = [rate for rate, p99 in p99_paid_s.items() if p99 is not None and p99 < limit_s]
    return max(kept) if kept else None


class TableWrites(NamedTuple):
    """Rows a table (or a database) has had written so far, by kind."""

    inserted: int
    updated: int  # HOT updates included
    hot_updated: int  # updates that touched no index (heap-only tuples)
    deleted: int


def writes_figures(
    at: str, before: Mapping[str, TableWrites], after: Mapping[str, TableWrites], paid: int
) -> list[Figure]:
    """Rows written per paid settlement between two readings, for each table of `after` in its
    order (a table created in between counts from zero)."""
    figures = []
    for table in after:
        was = before.get(table, TableWrites(0, 0, 0, 0))
        for kind, count in zip(TableWrites._fields, after[table], strict=True):
            delta = count - getattr(was, kind)
            what = kind.replace("_", " ")
            figures.append(
                Figure(f"{at} {table} {what}", per_settlement(delta, paid), "rows/settlement")
            )
    return figures


class StatementCost(NamedTuple):
    """One normalised statement's cost since the statistics were reset."""

    query: str
    calls: int
    total_ms: float  # execution time, all calls


def statement_name(query: str) -> str:
    """A statement's text cut to STATEMENT_TEXT characters; a cut one ends in a short digest
    of the whole, so two statements that begin alike stay two figures (across runs too)."""
    if len(query) <= STATEMENT_TEXT:
        return query
    return f"{query[:STATEMENT_TEXT]}... #{zlib.crc32(query.encode()) & 0xFFFF:04x}"


def statement_figures(at: str, costs: Sequence[StatementCost], paid: int) -> list[Figure]:
    """The statements called most and those that took the most time, per paid settlement."""
    by_calls = sorted(costs, key=lambda c: c.calls, reverse=True)[:TOP_STATEMENTS]
    by_time = sorted(costs, key=lambda c: c.total_ms, reverse=True)[:TOP_STATEMENTS]
    return [
        Figure(
            f"{at} sql calls: {statement_name(c.query)}",
            per_settlement(c.calls, paid),
            "calls/settlement",
        )
        for c in by_calls
    ] + [
        Figure(
            f"{at} sql time: {statement_name(c.query)}",
            per_settlement(c.total_ms, paid),
            "ms/settlement",
        )
        for c in by_time
    ]
