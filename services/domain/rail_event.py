"""What a rail event means for a settlement: pure rules, no I/O (the webhook state machine).

A rail event is one of three signals about the money:

    event type                       signal     settlement moves
    transfer.created, payout.paid    confirmed  pre-terminal -> paid
    payout.failed, payout.canceled   failed     pre-terminal -> failed; paid -> reversed
    payout.failed, after arrival     reversed   as transfer.reversed, for the whole amount
    transfer.reversed                reversed   pre-terminal -> paid -> (partly_)reversed;
                                                paid|partly_reversed -> (partly_)reversed
    sepa.booked                      confirmed  the bank debited the transfer (pain.002 ACSC,
                                                a camt.054 or camt.053 DBIT entry)
    sepa.rejected                    failed     the bank rejected the transfer (pain.002 RJCT)
    sepa.returned                    reversed   the payee's bank sent it back (a CRDT entry,
                                                PMNT/ICDT/RRTN), for the amount returned
    payout.created, *.updated        (none)     row `ignored`: informational, confirms nothing
    anything else                    (none)     row `ignored`: unknown type

`plan` answers the moves that bring a settlement from where it stands to what the rail
reported; moves already made, and signals the settlement has moved past, plan nothing. So
duplicates and any arrival order end where the rail's last report says, never by an illegal
transition, and each posting rule runs at most once. A reversal arriving while the
settlement is still before `paid` books `paid` first, then the reversal: a transfer is only
reversed after it moved money, and stepping through `paid` keeps the postings on the
shared rules (in_transit -> paid_out -> funding) instead of inventing a shortcut.

A reversal reports the cumulative amount taken back (Stripe's `amount_reversed` on the
transfer), so it is compared with what the settlement has recorded as back already
(`Reversal`): more leads to `partly_reversed`, or to `reversed` once it is the whole amount,
and the transition books only the difference; the same amount again, or an older smaller
one arriving late, plans nothing. Each reported amount is its own change (`change_key`).

A payout that was paid and then returned sends `payout.paid` then `payout.failed`. A
`payout.failed` created by the payout's `arrival_date` is a payout that never paid: `failed`.
One created after it (`RETURNED`; `events.parse_event` reads the whole amount as come back)
is money back only if it had arrived: a settlement settle has seen `paid` ends `reversed`;
one it has not (its `payout.paid` lost or still on its way, or never sent because the money
never arrived) ends `failed`, so no `paid` is ever told for money that may not have arrived.
A `payout.paid` coming after that failure changes nothing: `failed` is final.

The inbox row's own states (SPEC 4.4): received -> applied | ignored | parked -> dead, with
`rejected` for a signed body that is not an event, and `mismatch` (final) for an event whose
object differs from what its settlement sent (`webhook_match`): never applied nor replayed,
a break for reconciliation and an operator.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from services.domain.settlement import (
    REVERSIBLE,
    TERMINAL,
    IllegalTransition,
    SettlementStatus,
    is_transition_valid,
    reversal_target,
)

_S = SettlementStatus


class Signal(StrEnum):
    """What the rail says happened to the money of one transfer or payout."""

    CONFIRMED = "confirmed"  # the money reached the destination
    FAILED = "failed"  # the rail did not pay it, or a paid payout came back
    REVERSED = "reversed"  # money was taken back after it moved, in part or in full
    RETURNED = "returned"  # a payout failed after its arrival date: back, if it had arrived


class InboxStatus(StrEnum):
    """Where an inbox row stands; the values are `inbox_events.status`."""

    RECEIVED = "received"
    APPLIED = "applied"
    IGNORED = "ignored"
    PARKED = "parked"
    DEAD = "dead"
    REJECTED = "rejected"
    MISMATCH = "mismatch"


SIGNALS: dict[str, Signal] = {
    "transfer.created": Signal.CONFIRMED,
    "payout.paid": Signal.CONFIRMED,
    "payout.failed": Signal.FAILED,
    "payout.canceled": Signal.FAILED,
    "transfer.reversed": Signal.REVERSED,
    "sepa.booked": Signal.CONFIRMED,
    "sepa.rejected": Signal.FAILED,
    "sepa.returned": Signal.REVERSED,
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


class Reversal(NamedTuple):
    """What a reversal reports against what the settlement has recorded, in minor units."""

    amount: int  # the settlement's amount
    before: int  # come back already, as the settlement records it
    reported: int  # come back in all, as the rail reports it now (cumulative)


def signal_for(event_type: str, amount_reversed: int | None) -> Signal | None:
    """The signal of a stored event: a payout's failure after its arrival date (one that
    reports an amount back) is a return; otherwise what its type carries."""
    if event_type == "payout.failed" and amount_reversed is not None:
        return Signal.RETURNED
    return signal_of(event_type)


def plan(
    current: SettlementStatus, signal: Signal, reversal: Reversal | None = None
) -> tuple[SettlementStatus, ...]:
    """The transitions, in order, that take a settlement in `current` to what `signal` reports;
    a reversal without `reversal` is one of the whole amount."""
    if current in TERMINAL and current not in REVERSIBLE:
        return ()  # failed and reversed are final: a late signal changes nothing
    if signal is Signal.RETURNED:
        # Back, if it had arrived: a reversal of what was paid, else a payout that failed.
        signal = Signal.REVERSED if current in REVERSIBLE else Signal.FAILED
    if signal is Signal.CONFIRMED:
        steps: tuple[SettlementStatus, ...] = () if current in REVERSIBLE else (_S.PAID,)
    elif signal is Signal.FAILED:
        steps = (_S.REVERSED,) if current in REVERSIBLE else (_S.FAILED,)
    elif reversal is not None and reversal.reported <= reversal.before:
        steps = ()  # this much (or more) is booked as back already: a duplicate or a late one
    else:
        target = (
            _S.REVERSED if reversal is None else reversal_target(reversal.amount, reversal.reported)
        )
        steps = (target,) if current in REVERSIBLE else (_S.PAID, target)
    _check(current, steps)
    return steps


def _check(current: SettlementStatus, steps: tuple[SettlementStatus, ...]) -> None:
    for target in steps:
        if not is_transition_valid(current, target):  # a bug in the table above, never input
            raise IllegalTransition(current, target)
        current = target
