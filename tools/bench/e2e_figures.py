"""Pure arithmetic of the `e2e` scenario: client-side percentiles, CPU deltas, per-settlement
ratios and the highest rate that kept its promise. No I/O, so it is tested on its own."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

PAID_P99_LIMIT_S = 1.0  # the promise the e2e scenario reports against: p99 accepted -> paid


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


def highest_rate_within(
    p99_paid_s: Mapping[int, float | None], limit_s: float = PAID_P99_LIMIT_S
) -> int | None:
    """The highest offered rate whose p99 accepted -> paid stayed under `limit_s`, or None
    when no rate did (a rate with no paid settlement never qualifies)."""
    kept = [rate for rate, p99 in p99_paid_s.items() if p99 is not None and p99 < limit_s]
    return max(kept) if kept else None
