"""What a rail event means for a settlement: pure rules, no I/O (the webhook state machine).

A rail event is one of three signals about the money:

    event type                       signal     settlement moves
    transfer.created, payout.paid    confirmed  pre-terminal -> paid
    payout.failed, payout.canceled   failed     pre-terminal -> failed; paid -> reversed
    transfer.reversed                reversed   pre-terminal -> paid -> reversed; paid -> reversed
    payout.created, *.updated        (none)     row `ignored`: informational, confirms nothing
    anything else                    (none)     row `ignored`: unknown type

`plan` answers the moves that bring a settlement from where it stands to what the rail
reported; moves already made, and signals the settlement has moved past, plan nothing. So
duplicates and any arrival order end where the rail's last report says, never by an illegal
transition, and each posting rule runs at most once. A reversal arriving while the
settlement is still before `paid` books `paid` first, then `reversed`: a transfer is only
reversed after it moved money, and stepping through `paid` keeps the postings on the
shared rules (in_transit -> paid_out -> funding) instead of inventing a shortcut.

One order the rail's events cannot settle: a payout that was paid and then returned sends
`payout.paid` then `payout.failed`, and a returned payout's `payout.failed` carries nothing
that tells it from a payout that never paid. Delivered in that order the settlement ends
`reversed`; delivered the other way round it ends `failed` and the late `payout.paid` plans
nothing. Either way the money is back in funding and the postings net to zero.

The inbox row's own states (SPEC 4.4): received -> applied | ignored | parked -> dead, with
`rejected` for a signed body that is not an event.
"""

from __future__ import annotations

from enum import StrEnum

from services.shared.domain.settlement import (
    TERMINAL,
    IllegalTransition,
    SettlementStatus,
    is_transition_valid,
)

_S = SettlementStatus


class Signal(StrEnum):
    """What the rail says happened to the money of one transfer or payout."""

    CONFIRMED = "confirmed"  # the money reached the destination
    FAILED = "failed"  # the rail did not pay it, or a paid payout came back
    REVERSED = "reversed"  # a transfer's money was taken back after it moved


class InboxStatus(StrEnum):
    """Where an inbox row stands; the values are `inbox_events.status`."""

    RECEIVED = "received"
    APPLIED = "applied"
    IGNORED = "ignored"
    PARKED = "parked"
    DEAD = "dead"
    REJECTED = "rejected"


SIGNALS: dict[str, Signal] = {
    "transfer.created": Signal.CONFIRMED,
    "payout.paid": Signal.CONFIRMED,
    "payout.failed": Signal.FAILED,
    "payout.canceled": Signal.FAILED,
    "transfer.reversed": Signal.REVERSED,
}
INFORMATIONAL = frozenset({"payout.created", "payout.updated", "transfer.updated"})

# The statuses an operator may send back to the worker.
REPLAYABLE = frozenset({InboxStatus.DEAD, InboxStatus.PARKED})


def signal_of(event_type: str) -> Signal | None:
    """The signal an event type carries, or None when the inbox has nothing to apply."""
    return SIGNALS.get(event_type)


def ignore_reason(event_type: str) -> str:
    """Why an event type without a signal is recorded `ignored`."""
    if event_type in INFORMATIONAL:
        return f"{event_type} is informational: it confirms nothing about the money"
    return f"unknown event type {event_type}"


def plan(current: SettlementStatus, signal: Signal) -> tuple[SettlementStatus, ...]:
    """The transitions, in order, that take a settlement in `current` to what `signal` reports."""
    if current in TERMINAL and current is not _S.PAID:
        return ()  # failed and reversed are final: a late signal changes nothing
    if signal is Signal.CONFIRMED:
        steps: tuple[SettlementStatus, ...] = () if current is _S.PAID else (_S.PAID,)
    elif signal is Signal.FAILED:
        steps = (_S.REVERSED,) if current is _S.PAID else (_S.FAILED,)
    else:
        steps = (_S.REVERSED,) if current is _S.PAID else (_S.PAID, _S.REVERSED)
    _check(current, steps)
    return steps


def _check(current: SettlementStatus, steps: tuple[SettlementStatus, ...]) -> None:
    for target in steps:
        if not is_transition_valid(current, target):  # a bug in the table above, never input
            raise IllegalTransition(current, target)
        current = target
