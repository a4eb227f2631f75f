"""The rail instruction's state machine (SPEC 4.2): the two-pass pattern as a pure table.

    status       event            next          when
    pending      claim            processing    pass 1 claims it: new fence, lease, attempt
    pending      reclaim          processing    pass 2 takes a pending row nobody claimed
    processing   reclaim          processing    pass 2 takes over a lease that ran out
    processing   schedule_retry   processing    a retryable answer: the lease waits the backoff
    processing   accept           transferred   the rail took it, or a lookup found it there
    processing   refuse           failed        the rail refused it: it did nothing
    processing   give_up          failed        budget spent, and the rail surely did nothing
    processing   refer            needs_review  the rail may have acted: an operator decides
    transferred, failed, needs_review           terminal: no event moves them

An operator's resolution is the one way out of needs_review (`resolved_status`), after the
rail, looked up at that moment, agreed: paid -> transferred, failed -> failed, retry ->
pending, re-armed under the same rail key for the dispatcher to send again.

Every write the dispatcher makes is one of these events, and its SQL (relay/dispatch_sql.py)
expects exactly the statuses the table gives as the event's sources.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from services.domain.settlement import DomainError, SettlementStatus


class InstructionStatus(StrEnum):
    """Where a rail instruction stands; the values are `rail_instructions.status`."""

    PENDING = "pending"
    PROCESSING = "processing"
    TRANSFERRED = "transferred"
    FAILED = "failed"
    NEEDS_REVIEW = "needs_review"


class InstructionEvent(StrEnum):
    """What the dispatcher does to an instruction, or learns about it."""

    CLAIM = "claim"
    RECLAIM = "reclaim"
    SCHEDULE_RETRY = "schedule_retry"
    ACCEPT = "accept"
    REFUSE = "refuse"
    GIVE_UP = "give_up"
    REFER = "refer"


_I = InstructionStatus
_E = InstructionEvent

TERMINAL: frozenset[InstructionStatus] = frozenset({_I.TRANSFERRED, _I.FAILED, _I.NEEDS_REVIEW})

NEXT: Mapping[tuple[InstructionStatus, InstructionEvent], InstructionStatus] = {
    (_I.PENDING, _E.CLAIM): _I.PROCESSING,
    (_I.PENDING, _E.RECLAIM): _I.PROCESSING,
    (_I.PROCESSING, _E.RECLAIM): _I.PROCESSING,
    (_I.PROCESSING, _E.SCHEDULE_RETRY): _I.PROCESSING,
    (_I.PROCESSING, _E.ACCEPT): _I.TRANSFERRED,
    (_I.PROCESSING, _E.REFUSE): _I.FAILED,
    (_I.PROCESSING, _E.GIVE_UP): _I.FAILED,
    (_I.PROCESSING, _E.REFER): _I.NEEDS_REVIEW,
}

# Where each event moves the instruction's settlement (a reclaim only from pending: one taken
# over in processing was dispatching already); schedule_retry leaves it where it is.
SETTLEMENT_AFTER: Mapping[InstructionEvent, SettlementStatus] = {
    _E.CLAIM: SettlementStatus.DISPATCHING,
    _E.RECLAIM: SettlementStatus.DISPATCHING,
    _E.ACCEPT: SettlementStatus.SUBMITTED,
    _E.REFUSE: SettlementStatus.FAILED,
    _E.GIVE_UP: SettlementStatus.FAILED,
    _E.REFER: SettlementStatus.NEEDS_REVIEW,
}


class IllegalInstructionEvent(DomainError):
    """The event cannot happen to an instruction in `status`; nothing was changed."""

    def __init__(self, status: InstructionStatus, event: InstructionEvent) -> None:
        allowed = ", ".join(sorted(e for (s, e) in NEXT if s == status)) or "nothing (terminal)"
        super().__init__(f"rail instruction {status} cannot take {event}; allowed: {allowed}")
        self.status = status
        self.event = event


def next_status(current: InstructionStatus, event: InstructionEvent) -> InstructionStatus:
    """Where `event` takes an instruction in `current`; raises IllegalInstructionEvent."""
    target = NEXT.get((current, event))
    if target is None:
        raise IllegalInstructionEvent(current, event)
    return target


def sources_of(event: InstructionEvent) -> frozenset[InstructionStatus]:
    """The statuses `event` may start from: what its guarded SQL must expect."""
    return frozenset(s for (s, e) in NEXT if e == event)


def target_of(event: InstructionEvent) -> InstructionStatus:
    """The one status `event` leads to, from whichever of its sources."""
    (target,) = {t for (_, e), t in NEXT.items() if e == event}
    return target


def is_transition_valid(source: InstructionStatus, target: InstructionStatus) -> bool:
    """True if some event takes an instruction from `source` to `target`."""
    return any(s == source and t == target for (s, _), t in NEXT.items())


def end_of_budget(ambiguous: bool) -> InstructionEvent:
    """How an instruction past its retry budget ends: refer it when the rail may have acted
    (any attempt was ambiguous), else give up, since the rail surely did nothing."""
    return _E.REFER if ambiguous else _E.GIVE_UP


class Resolution(StrEnum):
    """What an operator says happened to an instruction the dispatcher referred."""

    PAID = "paid"  # the rail made exactly the one object asked for
    FAILED = "failed"  # the rail made nothing and nothing is in flight
    RETRY = "retry"  # the rail made nothing: send again under the same key


_R = Resolution

# A paid or failed resolution may find the instruction already where the rail put it (the
# relay recorded the answer, then a webhook sent the settlement to review).
RESOLVED: Mapping[tuple[InstructionStatus, Resolution], InstructionStatus] = {
    (_I.NEEDS_REVIEW, _R.PAID): _I.TRANSFERRED,
    (_I.TRANSFERRED, _R.PAID): _I.TRANSFERRED,
    (_I.NEEDS_REVIEW, _R.FAILED): _I.FAILED,
    (_I.FAILED, _R.FAILED): _I.FAILED,
    (_I.NEEDS_REVIEW, _R.RETRY): _I.PENDING,
}

# The dispatcher may be calling the rail for an instruction in these statuses.
IN_FLIGHT: frozenset[InstructionStatus] = frozenset({_I.PENDING, _I.PROCESSING})

# Where each resolution moves the instruction's settlement; a retry leaves it in review until
# the dispatcher records the rail's answer (needs_review -> submitted or failed).
SETTLEMENT_RESOLVED: Mapping[Resolution, SettlementStatus | None] = {
    _R.PAID: SettlementStatus.PAID,
    _R.FAILED: SettlementStatus.FAILED,
    _R.RETRY: None,
}


class IllegalResolution(DomainError):
    """The instruction is not in a status the operator's resolution may start from."""

    def __init__(self, status: InstructionStatus, resolution: Resolution) -> None:
        allowed = ", ".join(sorted(s for (s, r) in RESOLVED if r == resolution))
        super().__init__(
            f"rail instruction {status} cannot be resolved as {resolution}; it must be {allowed}"
        )
        self.status = status
        self.resolution = resolution


def resolved_status(current: InstructionStatus, resolution: Resolution) -> InstructionStatus:
    """Where an operator's `resolution` takes an instruction in `current`; raises
    IllegalResolution."""
    target = RESOLVED.get((current, resolution))
    if target is None:
        raise IllegalResolution(current, resolution)
    return target
