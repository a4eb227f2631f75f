"""The one retry delay settle uses: exponential, capped, with full jitter.

Full jitter (a uniform draw up to the ceiling) spreads the retries of many callers that failed
together, so they do not come back in lockstep. A caller whose retries must also be spaced,
not only spread, asks for a floor as a share of the ceiling (`least`).
"""

from __future__ import annotations

import random


def backoff(attempt: int, base: float, cap: float, rng: random.Random, least: float = 0.0) -> float:
    """Seconds to wait before retry `attempt` (0 for the first): uniform between `least` and 1
    times min(cap, base * 2**attempt)."""
    if attempt < 0 or base < 0 or cap < 0 or not 0 <= least <= 1:
        raise ValueError(
            "backoff takes attempt >= 0, base >= 0, cap >= 0 and 0 <= least <= 1,"
            f" e.g. backoff(0, 0.5, 60.0, rng); got {attempt}, {base}, {cap}, least={least}"
        )
    # The exponent is bounded first: 2**attempt of a long outage would overflow a float.
    ceiling = min(cap, base * 2.0 ** min(attempt, 64))
    return ceiling * rng.uniform(least, 1.0)
