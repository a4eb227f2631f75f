"""What an operator does with a reconciliation break besides closing it with a sentence: which
action applies to which break, the platform entry a write-off or an adjustment books, the
settlement step a correction asks for, and how old a break is. Pure.

    action     the break must be                                 a second operator
    write_off  open, with an amount (below)                      yes, in two-person mode
    adjust     open                                              yes
    correct    open, naming a settlement: missing_at_rail,       yes
               status_drift, overdue or unknown_at_rail
    match      open unknown_at_rail, naming a rail object        yes
    assign     open                                              no: nothing moves or closes
    comment    any                                               no
    reopen     resolved (breaks.py `reopening`)                  no

A write-off books what settle lost, from the platform's funding to its `write_offs` account:
what left the rail by the rail's account less what left by the ledger's. From the break:

    type              field                 loss
    amount_mismatch   amount                +difference  the rail paid more than was booked
    amount_mismatch   amount_reversed       -difference  the rail took back more than booked
    balance_mismatch  balance               +difference  more left the balance than was booked
    balance_mismatch  balance_transactions  -difference  the balance holds more than its moves
    balance_mismatch  closing               -difference  a bank statement's, likewise
    missing_at_rail   count                 -(amount - amount_reversed) of a paid or partly
                                            reversed settlement: booked as sent, never sent

`difference` is the break's actual less its expected (the number of its reason code). A
negative loss is a gain, booked the other way. Any other break has no amount to write off.

A break's age is counted from `first_seen`, in buckets 0-1d, 1-7d, 7-30d and 30d+, each
holding its lower bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

from services.domain.breaks import BreakStatus, BreakType
from services.domain.postings import PlatformAccount, Posting, platform_postings
from services.domain.settlement import (
    REVERSIBLE,
    DomainError,
    SettlementStatus,
    is_transition_valid,
)

BREAK_CLOSED = "break_closed"
NOT_RESOLVED = "not_resolved"
NO_AMOUNT = "no_amount"
WRONG_BREAK_TYPE = "wrong_break_type"
ILLEGAL_CORRECTION = "illegal_correction"
IN_REVIEW = "in_review"


class BreakAction(StrEnum):
    """What an operator does to a break beyond resolving it; the names are the audit rows'."""

    WRITE_OFF = "break.write_off"
    ADJUST = "break.adjust"
    CORRECT = "break.correct"
    MATCH = "break.match"
    ASSIGN = "break.assign"
    COMMENT = "break.comment"
    REOPEN = "break.reopen"


_A = BreakAction
# Neither moves money nor closes a break, so maker-checker leaves them to one operator.
UNCHECKED: frozenset[BreakAction] = frozenset({_A.ASSIGN, _A.COMMENT, _A.REOPEN})
CORRECTABLE: frozenset[BreakType] = frozenset(
    {
        BreakType.MISSING_AT_RAIL,
        BreakType.STATUS_DRIFT,
        BreakType.OVERDUE,
        BreakType.UNKNOWN_AT_RAIL,
    }
)
# The sign that turns a break's difference into settle's loss (see the module docstring).
LOSS_SIGN: Mapping[tuple[BreakType, str], int] = {
    (BreakType.AMOUNT_MISMATCH, "amount"): 1,
    (BreakType.AMOUNT_MISMATCH, "amount_reversed"): -1,
    (BreakType.BALANCE_MISMATCH, "balance"): 1,
    (BreakType.BALANCE_MISMATCH, "balance_transactions"): -1,
    (BreakType.BALANCE_MISMATCH, "closing"): -1,
}
_OPEN_ONLY = frozenset({_A.WRITE_OFF, _A.ADJUST, _A.CORRECT, _A.MATCH, _A.ASSIGN})


class BreakWorkRefused(DomainError):
    """The action does not apply to this break (or settlement) as it stands; `code` says why."""

    def __init__(self, message: str, code: str, field: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.field = field


class BreakFacts(NamedTuple):
    """What decides which actions a break takes."""

    break_id: int
    break_type: BreakType
    status: BreakStatus
    field: str  # what differed
    settlement_id: str | None
    rail_object_id: str | None


def check_applies(action: BreakAction, item: BreakFacts) -> None:
    """Refuse (BreakWorkRefused) unless `action` applies to the break as it stands."""
    name = f"break {item.break_id}"
    if action in _OPEN_ONLY and item.status is not BreakStatus.OPEN:
        raise BreakWorkRefused(f"{name} is {item.status}", BREAK_CLOSED)
    if action is _A.REOPEN and item.status is not BreakStatus.RESOLVED:
        raise BreakWorkRefused(f"{name} is {item.status}; only a resolved one", NOT_RESOLVED)
    wanted = {
        _A.WRITE_OFF: _has_amount(item),
        _A.CORRECT: item.break_type in CORRECTABLE and item.settlement_id is not None,
        _A.MATCH: item.break_type is BreakType.UNKNOWN_AT_RAIL and bool(item.rail_object_id),
    }.get(action, True)
    if not wanted:
        code = NO_AMOUNT if action is _A.WRITE_OFF else WRONG_BREAK_TYPE
        raise BreakWorkRefused(f"{name} ({item.break_type}, {item.field}): no {action}", code)


def _has_amount(item: BreakFacts) -> bool:
    found = (item.break_type, item.field) in LOSS_SIGN
    return found or (item.break_type is BreakType.MISSING_AT_RAIL and bool(item.settlement_id))


def ledger_sent(status: SettlementStatus, amount: int, amount_reversed: int) -> int | None:
    """What the ledger says left for the payee and stayed there; None before it was paid."""
    return amount - amount_reversed if status in REVERSIBLE else None


def write_off_loss(item: BreakFacts, difference: int | None, sent: int | None) -> int:
    """Settle's signed loss on the break (`difference`: actual - expected; `sent`: what the
    ledger says its settlement paid out); BreakWorkRefused `no_amount` when it has none."""
    check_applies(_A.WRITE_OFF, item)
    sign = LOSS_SIGN.get((item.break_type, item.field))
    if sign is not None and difference:
        return sign * difference
    if item.break_type is BreakType.MISSING_AT_RAIL and sent:
        return -sent
    raise BreakWorkRefused(f"break {item.break_id} has no amount to write off", NO_AMOUNT)


def write_off_postings(loss: int, currency: str) -> list[Posting]:
    """The platform entry of writing off `loss` (negative: a gain) in `currency`."""
    return platform_postings(PlatformAccount.WRITE_OFFS, loss, currency)


class Direction(StrEnum):
    """Which side of an adjustment the operator's account takes."""

    DEBIT = "debit"  # the account takes the amount from the platform's funding
    CREDIT = "credit"  # the account gives the amount back to the platform's funding


def adjust_postings(
    account: PlatformAccount, direction: Direction, amount: int, currency: str
) -> list[Posting]:
    """The platform entry of an adjustment of `amount` (> 0) to `account` in `direction`."""
    if type(amount) is not int or amount <= 0:
        raise ValueError(f"an adjustment's amount is a positive int, not {amount!r}")
    signed = amount if direction is Direction.DEBIT else -amount
    return platform_postings(account, signed, currency)


class Correction(StrEnum):
    """Where an operator's correction takes a settlement the rail contradicts."""

    REVERSED = "reversed"  # paid, but its money never left or all came back
    FAILED = "failed"  # not paid yet, and the rail made nothing or the payout failed
    PAID = "paid"  # not paid yet, and the rail paid exactly it


def correction_target(status: SettlementStatus, correction: Correction) -> SettlementStatus:
    """The status a correction moves a settlement in `status` to, by the settlement state
    machine; BreakWorkRefused (`in_review`, `illegal_correction`) otherwise."""
    target = SettlementStatus(correction.value)
    if status is SettlementStatus.NEEDS_REVIEW:
        raise BreakWorkRefused(
            "the settlement is under review: resolve it with `settle review resolve`", IN_REVIEW
        )
    if not is_transition_valid(status, target):
        raise BreakWorkRefused(
            f"a settlement {status} cannot be corrected as {correction}", ILLEGAL_CORRECTION, "as"
        )
    return target


class AgingBucket(StrEnum):
    """How long ago a break was first seen."""

    DAY = "0-1d"
    WEEK = "1-7d"
    MONTH = "7-30d"
    OLDER = "30d+"


# Each bucket's lower bound in days; a bucket ends where the next one starts.
_FROM_DAYS: Mapping[AgingBucket, int] = {
    AgingBucket.DAY: 0,
    AgingBucket.WEEK: 1,
    AgingBucket.MONTH: 7,
    AgingBucket.OLDER: 30,
}


def aging_bucket(first_seen: datetime, now: datetime) -> AgingBucket:
    """The bucket of a break first seen at `first_seen`, at `now` (a future one is 0-1d)."""
    age = now - first_seen
    return max(
        (b for b, days in _FROM_DAYS.items() if age >= timedelta(days=days)),
        key=lambda b: _FROM_DAYS[b],
        default=AgingBucket.DAY,
    )


def first_seen_window(
    bucket: AgingBucket, now: datetime
) -> tuple[datetime | None, datetime | None]:
    """`(after, at_or_before)`: the first_seen of a break in `bucket` at `now` is later than
    `after` and no later than `at_or_before` (None: unbounded)."""
    buckets = list(_FROM_DAYS)
    at = buckets.index(bucket)
    later = buckets[at + 1] if at + 1 < len(buckets) else None
    after = None if later is None else now - timedelta(days=_FROM_DAYS[later])
    at_or_before = None if at == 0 else now - timedelta(days=_FROM_DAYS[bucket])
    return after, at_or_before
