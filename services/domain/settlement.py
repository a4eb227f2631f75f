"""The settlement state machine (SPEC 4.1): which status may follow which, and the event it emits.

    from            may go to
    accepted        dispatching, submitted, paid, failed, needs_review
    dispatching     submitted, paid, failed, needs_review
    submitted       paid, failed, needs_review
    needs_review    submitted, paid, failed
    paid            partly_reversed, reversed
    partly_reversed partly_reversed, reversed
    failed          (terminal)
    reversed        (terminal)

Webhooks can arrive before the relay recorded the rail's response, so `paid` and `failed` are
reachable from every pre-terminal state. `paid`, `partly_reversed`, `failed` and `reversed`
are terminal; only a recorded reversal moves a `paid` settlement on. A reversal of part of the
amount (`amount_reversed` below `amount`, in minor units, cumulative as the rail reports it)
leads to `partly_reversed`; each further part is a step of its own from `partly_reversed` to
itself, audited and published like any other; the reversal that brings the whole amount back
leads to `reversed` (`reversal_target`). So `reversed` always means all of the money came back.

One step keeps the status: when the rail's answer is recorded after a webhook already moved
the settlement on without a rail reference, the reference is written as a step of its own
(`reference_recorded`): versioned, audited from and to the same status, and published as a
`rail_reference_recorded` event. The error classes of the domain package live here too:

    DomainError (SettleError)       base of the pure domain's errors; never retriable
    ├── IllegalTransition           the target status may not follow the current one
    ├── ReasonRequired              needs_review, or a break resolved, without a reason
    ├── IllegalInstructionEvent     a rail instruction cannot take the event (instruction.py)
    ├── IllegalResolution           an operator's resolution cannot start from that status
    ├── IllegalBreakTransition      a break cannot go to that status (breaks.py)
    └── BreakNotHealable            healing a break only an operator may resolve (breaks.py)
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import NamedTuple

from services.domain.errors import SettleError


class SettlementStatus(StrEnum):
    """Where a settlement stands; the values are the strings stored in `settlements.status`."""

    ACCEPTED = "accepted"
    DISPATCHING = "dispatching"
    SUBMITTED = "submitted"
    PAID = "paid"
    FAILED = "failed"
    REVERSED = "reversed"
    PARTLY_REVERSED = "partly_reversed"
    NEEDS_REVIEW = "needs_review"


_S = SettlementStatus

TERMINAL: frozenset[SettlementStatus] = frozenset(
    {_S.PAID, _S.PARTLY_REVERSED, _S.FAILED, _S.REVERSED}
)
# The statuses a reversal moves on from: money the rail paid, some of which may come back.
REVERSIBLE: frozenset[SettlementStatus] = frozenset({_S.PAID, _S.PARTLY_REVERSED})

TRANSITIONS: Mapping[SettlementStatus, frozenset[SettlementStatus]] = {
    _S.ACCEPTED: frozenset({_S.DISPATCHING, _S.SUBMITTED, _S.PAID, _S.FAILED, _S.NEEDS_REVIEW}),
    _S.DISPATCHING: frozenset({_S.SUBMITTED, _S.PAID, _S.FAILED, _S.NEEDS_REVIEW}),
    _S.SUBMITTED: frozenset({_S.PAID, _S.FAILED, _S.NEEDS_REVIEW}),
    _S.PAID: frozenset({_S.PARTLY_REVERSED, _S.REVERSED}),
    _S.PARTLY_REVERSED: frozenset({_S.PARTLY_REVERSED, _S.REVERSED}),
    _S.NEEDS_REVIEW: frozenset({_S.SUBMITTED, _S.PAID, _S.FAILED}),
    _S.FAILED: frozenset(),
    _S.REVERSED: frozenset(),
}

# The type of the first event of a settlement; no transition leads into `accepted`.
CREATED = "created"
# The type of the event of a step that records the rail's reference and keeps the status.
RAIL_REFERENCE_RECORDED = "rail_reference_recorded"


class DomainError(SettleError):
    """Base of the pure domain's errors: a rule refused the input, so retrying cannot help."""

    retriable = False


class IllegalTransition(DomainError):
    """The settlement cannot move from `source` to `target`; nothing was changed."""

    def __init__(self, source: SettlementStatus, target: SettlementStatus) -> None:
        allowed = ", ".join(sorted(TRANSITIONS[source])) or "nothing (terminal)"
        super().__init__(f"settlement cannot go from {source} to {target}; allowed: {allowed}")
        self.source = source
        self.target = target


class ReasonRequired(DomainError):
    """A move to needs_review, or a break's resolution, came without a reason; a reader must
    know why."""


class Transition(NamedTuple):
    """One allowed step, ready to be written as a guarded update plus audit row."""

    source: SettlementStatus  # the status the guarded UPDATE expects to find
    target: SettlementStatus  # the status it writes; `source` for a reference recorded
    event_type: str  # the `type` of the SettlementEvent this change publishes
    reason: str | None  # why, for the audit row and event; always set for needs_review


def is_transition_valid(source: SettlementStatus, target: SettlementStatus) -> bool:
    """True if a settlement in `source` may move to `target`."""
    return target in TRANSITIONS[source]


def event_type(target: SettlementStatus) -> str:
    """The SettlementEvent `type` for reaching `target`: its value, or "created" for accepted."""
    return CREATED if target == _S.ACCEPTED else target.value


# Steps into these statuses publish no event: the move to dispatching only says that the relay
# is about to call the rail, which no consumer acts on. Their sequence numbers are left out of
# the settlement's events (1 created, 3 submitted, 4 paid).
UNPUBLISHED_TARGETS: frozenset[SettlementStatus] = frozenset({_S.DISPATCHING})


def publishes_event(source: SettlementStatus | None, target: SettlementStatus) -> bool:
    """Whether the step from `source` (None: booking) to `target` publishes a SettlementEvent:
    every step but a move into an internal status (a reference recorded there publishes)."""
    return target not in UNPUBLISHED_TARGETS or source == target


def transition(
    current: SettlementStatus, target: SettlementStatus, reason: str | None = None
) -> Transition:
    """The change from `current` to `target`; raises IllegalTransition or ReasonRequired."""
    if not is_transition_valid(current, target):
        raise IllegalTransition(current, target)
    if target == _S.NEEDS_REVIEW and not reason:
        raise ReasonRequired(f"moving from {current} to needs_review needs a reason")
    return Transition(current, target, event_type(target), reason)


def reference_recorded(current: SettlementStatus) -> Transition:
    """The step recording the rail's reference on a settlement in `current`, keeping it there."""
    return Transition(current, current, RAIL_REFERENCE_RECORDED, None)


def step_event_type(source: SettlementStatus | None, target: SettlementStatus) -> str:
    """The event type of the audit step from `source` (None: booking) to `target`."""
    if source == target and not is_transition_valid(target, target):
        return RAIL_REFERENCE_RECORDED
    return event_type(target)


def reversal_target(amount: int, amount_reversed: int) -> SettlementStatus:
    """The status of a paid settlement once `amount_reversed` of its `amount` came back."""
    if not 0 < amount_reversed <= amount:
        raise ValueError(f"amount_reversed must be in 1 .. {amount}, not {amount_reversed!r}")
    return _S.REVERSED if amount_reversed == amount else _S.PARTLY_REVERSED


def reversed_after(
    current: SettlementStatus,
    target: SettlementStatus,
    amount: int,
    before: int,
    reported: int | None,
) -> int:
    """The cumulative amount come back after a step from `current` to `target`, given what
    was back `before` and what the rail `reported` (None: all of it; ignored unless the step
    is a reversal); IllegalTransition if a reversal adds nothing, exceeds the amount, or
    does not lead to `target`."""
    if target not in (_S.PARTLY_REVERSED, _S.REVERSED):
        return before
    after = amount if reported is None else reported
    if not before < after <= amount or reversal_target(amount, after) is not target:
        raise IllegalTransition(current, target)
    return after
