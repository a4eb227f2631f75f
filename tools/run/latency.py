"""Acceptance-to-`paid` latency of a batch: over all of it, over the settlements that met no
fault at the rail, and per fault, so a reader sees what the faults cost apart from the rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Latency:
    """Seconds from acceptance to `paid`, over the settlements that got there."""

    count: int
    p50: float
    p90: float
    p99: float
    worst: float


@dataclass(frozen=True)
class LatencySplit:
    """The batch's latency whole, without the settlements that met a fault, and per fault."""

    whole: Latency | None
    no_fault: Latency | None  # settlements the simulator sent no fault at all
    by_fault: dict[str, Latency] = field(default_factory=dict)  # a settlement counts under each
    met_fault: int = 0  # settlements of the batch that met at least one fault (paid or not)


def percentile(ordered: Sequence[float], share: float) -> float:
    """The `share` percentile of ascending `ordered`, interpolated linearly between the two
    nearest values (PostgreSQL's percentile_cont)."""
    if not ordered:
        raise ValueError("percentile of no values; pass at least one")
    position = share * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency(seconds: Sequence[float]) -> Latency | None:
    """p50, p90, p99 and the worst of `seconds`; None when there are none."""
    if not seconds:
        return None
    ordered = sorted(seconds)
    p50, p90, p99 = (percentile(ordered, share) for share in (0.5, 0.9, 0.99))
    return Latency(len(ordered), p50, p90, p99, ordered[-1])


def split(paid: Mapping[str, float], met: Mapping[str, Sequence[str]]) -> LatencySplit:
    """The split of `paid` (settlement id to seconds until `paid`) by `met` (settlement id to
    the faults it met; the batch's settlements that met none are absent)."""
    by_fault: dict[str, list[float]] = {}
    for settlement_id, names in met.items():
        if settlement_id in paid:
            for name in names:
                by_fault.setdefault(name, []).append(paid[settlement_id])
    clean = [seconds for settlement_id, seconds in paid.items() if not met.get(settlement_id)]
    faults = {name: latency(values) for name, values in sorted(by_fault.items())}
    return LatencySplit(
        whole=latency(list(paid.values())),
        no_fault=latency(clean),
        by_fault={name: figures for name, figures in faults.items() if figures is not None},
        met_fault=sum(1 for names in met.values() if names),
    )
