"""The last check before an instruction reaches the rail, made at the moment of writing.

A caller whose right to send runs out (the relay's dispatcher, holding a lease on the
instruction) opens a gate around its rail call:

    with guarded(lease.time_for_a_call) as gate:
        result = await rail.send(instruction)
    if gate.refused: ...  # nothing was written; the lease ran out first

Every transport that writes to a rail calls `may_write()` right before its first byte leaves
(settle's HTTP client for Stripe-shaped APIs, a file writer for a bank), with no await
between that call and the write, and `written()` right after. A closed gate means the
transport raises its own "nothing sent" error and writes nothing. Outside a gate (listings,
lookups, tools) both calls do nothing.

The gate is a context variable, so it follows the call through libraries that know nothing
of it (stripe's client) and never leaks into another task. The two failpoints here,
`rail.before_write` and `rail.after_write`, fire only inside a gate: at the last moment a
pause can still be caught, and at the first moment it cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from services.platform.failpoints import failpoint


class Gate:
    """One guarded call: `check` says whether a write may still start now."""

    __slots__ = ("check", "refused")

    def __init__(self, check: Callable[[], bool]) -> None:
        self.check = check
        self.refused = False  # a write was about to start and the check said no


_gate: ContextVar[Gate | None] = ContextVar("settle_send_gate", default=None)


@contextmanager
def guarded(check: Callable[[], bool]) -> Iterator[Gate]:
    """Every rail write made inside this block first asks `check`; see the module docstring."""
    gate = Gate(check)
    token = _gate.set(gate)
    try:
        yield gate
    finally:
        _gate.reset(token)


def may_write() -> bool:
    """Whether the write about to start may go out; call it with no await before the write."""
    gate = _gate.get()
    if gate is None:
        return True
    failpoint("rail.before_write")
    if gate.check():
        return True
    gate.refused = True
    return False


def written() -> None:
    """Mark that the guarded request left (for the `rail.after_write` failpoint)."""
    if _gate.get() is not None:
        failpoint("rail.after_write")
