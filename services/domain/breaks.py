"""Reconciliation breaks: their closed set of types, their state machine, and when to look again.

A break is a disagreement between the ledger and the rail that reconciliation found. Its type
is one of a closed set whose names are stable (they are stored, counted and exported):

    missing_at_rail       the ledger says the money was sent; the rail has no object for it
    unknown_at_rail       a rail object no settlement explains, or naming one that never sent
    duplicate_at_rail     more than one rail object for one settlement
    amount_mismatch       amount, or amount reversed, differs
    currency_mismatch     currency differs
    destination_mismatch  destination differs
    status_drift          the rail says paid, failed or (partly) reversed; the ledger disagrees
    balance_mismatch      the rail's balance moved by another sum than the ledger's accounts
    statement_gap         a bank statement does not follow the one before it: a sequence
                          number skipped, or an opening balance other than the last closing

    from      may go to   by
    open      healed      the rail's proof, applied through the inbox (status_drift), or
                          the missing statement, once it arrives (statement_gap)
    open      resolved    an operator, with a reason (and how: `ResolutionKind`)
    healed    (terminal)
    resolved  (terminal for reconciliation; an operator may reopen it, with a reason)

Reopening is the one step back (`reopening`): an operator's, never reconciliation's, and not
part of `TRANSITIONS`, which say where a break may go once it is found.

Pending is not broken: an item still inside its expected settlement time (the grace period)
is reported `pending` with its age bucket, never as a break. Open items and `submitted`
settlements are looked at again at growing ages (seed 001's heartbeat: T+1h, T+1d, T+7d,
T+30d by default). Ages are whole seconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from itertools import pairwise
from typing import NamedTuple

from services.domain.settlement import DomainError, ReasonRequired


class BreakType(StrEnum):
    """What disagrees; the values are the stable names reports and records use."""

    MISSING_AT_RAIL = "missing_at_rail"
    UNKNOWN_AT_RAIL = "unknown_at_rail"
    DUPLICATE_AT_RAIL = "duplicate_at_rail"
    AMOUNT_MISMATCH = "amount_mismatch"
    CURRENCY_MISMATCH = "currency_mismatch"
    DESTINATION_MISMATCH = "destination_mismatch"
    STATUS_DRIFT = "status_drift"
    BALANCE_MISMATCH = "balance_mismatch"
    STATEMENT_GAP = "statement_gap"
    DUPLICATE_IN_LEDGER = "duplicate_in_ledger"
    OVERDUE = "overdue"


class BreakStatus(StrEnum):
    """Where a break stands."""

    OPEN = "open"
    HEALED = "healed"
    RESOLVED = "resolved"


_B = BreakStatus

TERMINAL: frozenset[BreakStatus] = frozenset({_B.HEALED, _B.RESOLVED})

TRANSITIONS: Mapping[BreakStatus, frozenset[BreakStatus]] = {
    _B.OPEN: frozenset({_B.HEALED, _B.RESOLVED}),
    _B.HEALED: frozenset(),
    _B.RESOLVED: frozenset(),
}

# A status the rail proves is healed by applying the proof (through the inbox's rules).
PROVEN_BY_THE_RAIL: frozenset[BreakType] = frozenset({BreakType.STATUS_DRIFT})
# What the evidence can resolve, and so may end healed: a drift the rail proves, a statement
# gap the missing statement fills, and a break a later comparison no longer finds (the
# object appeared, the unknown object was claimed, the reversals caught up). The rest (a
# duplicate, a currency or destination the rail will never change, a balance) waits for an
# operator.
HEALABLE: frozenset[BreakType] = frozenset(
    {
        BreakType.STATUS_DRIFT,
        BreakType.STATEMENT_GAP,
        BreakType.MISSING_AT_RAIL,
        BreakType.UNKNOWN_AT_RAIL,
        BreakType.AMOUNT_MISMATCH,
        BreakType.OVERDUE,
    }
)

SECONDS_PER_UNIT: Mapping[str, int] = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_RECHECK_AGES: tuple[int, ...] = (3600, 86400, 7 * 86400, 30 * 86400)
# A transfer shows at the rail at once and a webhook lands in seconds; an hour leaves room
# for the rail's first delivery retries before a lag is called a break.
DEFAULT_GRACE_SECONDS = 3600
# A drift the rail already shows final (a transfer made, a payout paid or failed, money
# reversed) needs no hour: the proof is there. It is left this long for its webhook, which
# lands in seconds, so that a run does not heal what the inbox is applying anyway; then it
# heals, however long the grace period.
PROVEN_DRIFT_SECONDS = 60
# How long after its arrival date a payout may still fail (Stripe: a few business days), so
# how long one still in transit is waited for before it is overdue.
PAYOUT_FAILURE_WINDOW_SECONDS = 5 * 86400
# Seconds an intraday run reads again before the last run's end, for objects listed late.
DEFAULT_OVERLAP_SECONDS = 300.0
_AGE = re.compile(r"([1-9][0-9]*)([smhd])")


class IllegalBreakTransition(DomainError):
    """The break cannot move from `source` to `target`; nothing was changed."""

    def __init__(self, source: BreakStatus, target: BreakStatus) -> None:
        allowed = ", ".join(sorted(TRANSITIONS[source])) or "nothing (terminal)"
        super().__init__(f"break cannot go from {source} to {target}; allowed: {allowed}")
        self.source = source
        self.target = target


class BreakNotHealable(DomainError):
    """Only the rail's proof of a status heals; this break type waits for an operator."""

    def __init__(self, break_type: BreakType) -> None:
        super().__init__(f"{break_type} is never healed automatically; an operator resolves it")
        self.break_type = break_type


class ResolutionKind(StrEnum):
    """How an operator resolved a break; the values are `resolution_kind`."""

    RESOLVE = "resolve"  # closed with a sentence, the books left as they are
    WRITE_OFF = "write_off"  # its amount booked to the platform's loss account
    CORRECT = "correct"  # its settlement moved where the rail says it is
    MATCH = "match"  # its rail object recorded as a settlement's reference


# The statuses an operator may take a break back to open from: healed is the evidence's.
REOPENABLE: frozenset[BreakStatus] = frozenset({_B.RESOLVED})


class BreakChange(NamedTuple):
    """One allowed step of a break, ready to be written as a guarded update."""

    source: BreakStatus  # the status the guarded UPDATE expects to find
    target: BreakStatus  # the status it writes
    reason: str | None  # the operator's reason; always set for resolved


def is_transition_valid(source: BreakStatus, target: BreakStatus) -> bool:
    """True if a break in `source` may move to `target`."""
    return target in TRANSITIONS[source]


def transition(
    break_type: BreakType, current: BreakStatus, target: BreakStatus, reason: str | None = None
) -> BreakChange:
    """The step from `current` to `target`; raises IllegalBreakTransition, BreakNotHealable
    (healing anything but a status drift) or ReasonRequired (resolving without a reason)."""
    if not is_transition_valid(current, target):
        raise IllegalBreakTransition(current, target)
    if target is _B.HEALED and break_type not in HEALABLE:
        raise BreakNotHealable(break_type)
    if target is _B.RESOLVED and not (reason and reason.strip()):
        raise ReasonRequired(f"resolving a {break_type} break needs the operator's reason")
    return BreakChange(current, target, reason)


def reopening(current: BreakStatus, reason: str | None) -> BreakChange:
    """The step back to open of a break in `current`; IllegalBreakTransition unless it was
    resolved, ReasonRequired without a reason."""
    if current not in REOPENABLE:
        raise IllegalBreakTransition(current, _B.OPEN)
    if not (reason and reason.strip()):
        raise ReasonRequired("reopening a break needs the operator's reason")
    return BreakChange(current, _B.OPEN, reason)


def parse_ages(text: str) -> tuple[int, ...]:
    """Re-check ages in seconds from e.g. "1h,1d,7d,30d" (units s, m, h, d), strictly growing."""
    ages: list[int] = []
    for part in text.split(","):
        found = _AGE.fullmatch(part.strip())
        if found is None:
            raise ValueError(f"re-check age {part.strip()!r} is not a count and unit, e.g. 1h")
        ages.append(int(found.group(1)) * SECONDS_PER_UNIT[found.group(2)])
    if any(later <= earlier for earlier, later in pairwise(ages)):
        raise ValueError(f"re-check ages must grow: {text!r}, e.g. 1h,1d,7d,30d")
    return tuple(ages)


def age_label(seconds: int) -> str:
    """An age as "T+<n><unit>" in the largest unit that divides it: 3600 -> "T+1h"."""
    for unit in ("d", "h", "m"):
        if seconds and seconds % SECONDS_PER_UNIT[unit] == 0:
            return f"T+{seconds // SECONDS_PER_UNIT[unit]}{unit}"
    return f"T+{seconds}s"


def age_bucket(age: int, ages: tuple[int, ...] = DEFAULT_RECHECK_AGES) -> str:
    """The label of the last re-check age `age` has reached; "T+0s" before the first."""
    reached = [a for a in ages if a <= age]
    return age_label(reached[-1] if reached else 0)


def next_recheck(age: int, ages: tuple[int, ...] = DEFAULT_RECHECK_AGES) -> int | None:
    """The next re-check age after `age`, or None once the last one has passed."""
    return next((a for a in ages if a > age), None)


def is_pending(age: int, grace: int = DEFAULT_GRACE_SECONDS) -> bool:
    """True while an item `age` seconds old is inside its expected settlement time: at the
    end of the grace period (age == grace) it no longer is."""
    return age < grace
