"""The dispatcher's leases, retries and windows: how long a claim is held, how a call is
bounded inside it, how retries back off, and how long the rail is given to finish a call whose
end we did not see."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DispatchPolicy:
    """Leases, retries and windows of the dispatcher."""

    lease_seconds: float = 30.0  # longer than the rail call timeout, with room to record
    call_seconds: float = 10.0  # the rail call's own timeout; checked against the lease
    max_attempts: int = 8  # the retry budget
    backoff_base: float = 0.5  # seconds; full jitter over base * 2**attempt
    backoff_cap: float = 60.0
    stale_pending_seconds: float = 10.0  # pending this long without a claim: pass 2 takes it
    rail_key_window_seconds: float = 86_400.0  # how long the rail honours a key
    sweep_batch: int = 200
    concurrent_calls: int = 64  # rail calls in flight at once from this dispatcher
    # Before a lookup that precedes a re-issue (a rail that ignores keys, or a key past its
    # window), after a call whose end we did not see, the rail is given this long to finish
    # with it: from an ambiguous answer, from the end of a lease that ran out mid-call, or from
    # an operator's re-arming of an instruction sent before. A request may still be running at
    # the rail, and a lookup before it ends would miss it.
    ambiguous_pause_seconds: float = 20.0
