"""Changes the rail makes after answering: payouts settle or fail, money comes back."""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from enum import Enum

from railsim.announce import Withheld, announce
from railsim.balance import BalanceBook, MovementType
from railsim.faults import Dice, Faults
from railsim.objects import Payout, Reversal, Transfer, new_id
from railsim.replies import Delivery

REVERSING = "acct_reverse"  # accepted, then reversed after reversal_delay_ms
PARTLY_REVERSING = "acct_partial"  # a transfer accepted, then reversed in part


class Action(Enum):
    """A change due at some time."""

    PAY = "pay"  # payout pending -> paid
    FAIL_CLOSED = "fail_closed"  # payout pending -> failed, account_closed
    FAIL_PROCESSING = "fail_processing"  # payout pending -> failed, could_not_process
    REVERSE = "reverse"  # transfer reversed in full, or paid payout returned (-> failed)
    REVERSE_PART = "reverse_part"  # transfer reversed in part: half its amount, rounded down


_FAILURES = {
    Action.FAIL_CLOSED: ("account_closed", "The bank account has been closed."),
    Action.FAIL_PROCESSING: ("could_not_process", "The bank could not process this payout."),
}


class Timers:
    """Changes waiting for their time, earliest first."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Action, str]] = []
        self._order = itertools.count()  # ties keep the order they were scheduled in

    def add(self, due: float, action: Action, object_id: str) -> None:
        """Schedule `action` on `object_id` at `due` (Unix seconds)."""
        heapq.heappush(self._heap, (due, next(self._order), action, object_id))

    def pop_due(self, now: float) -> tuple[float, Action, str] | None:
        """Remove and return the earliest change due by `now`, if any."""
        if not self._heap or self._heap[0][0] > now:
            return None
        at, _, action, object_id = heapq.heappop(self._heap)
        return at, action, object_id


@dataclass(frozen=True, slots=True)
class Rail:
    """What a due change reads and writes: the objects, their timers, the balance, the dice."""

    objects: dict[str, Transfer | Payout]
    timers: Timers
    book: BalanceBook
    faults: Faults
    dice: Dice
    withheld: Withheld


def apply_due(rail: Rail, now: float) -> list[Delivery]:
    """Apply every change due by `now`, including those due changes schedule; announce them."""
    deliveries: list[Delivery] = []
    while (due := rail.timers.pop_due(now)) is not None:
        at, action, object_id = due
        obj = rail.objects.get(object_id)
        if obj is None:
            continue
        subject = obj.metadata.get("settlement_id", obj.id)
        if isinstance(obj, Transfer):
            type_ = _reverse(rail, obj, action, at)
        elif action is Action.PAY:
            type_ = _pay(rail, obj, subject, at)
        else:
            type_ = _fail(rail, obj, action, at)
        if type_ is None:
            continue
        deliveries.extend(
            announce(
                type_,
                obj.to_wire(),
                at=at,
                subject=subject,
                faults=rail.faults,
                dice=rail.dice,
                withheld=rail.withheld,
            )
        )
    return deliveries


def _reverse(rail: Rail, transfer: Transfer, action: Action, at: float) -> str | None:
    left = transfer.amount - transfer.amount_reversed
    amount = transfer.amount // 2 if action is Action.REVERSE_PART else left
    if not 0 < amount <= left:
        return None  # nothing (or too little) left to take back
    reversal_id = new_id("trr")
    txn = rail.book.record(
        MovementType.TRANSFER_REFUND, amount, transfer.currency, reversal_id, int(at)
    )
    transfer.reversals.append(Reversal(reversal_id, amount, int(at), txn))
    # Stripe announces a partial reversal with the same event type as a full one
    return "transfer.reversed"


def _pay(rail: Rail, payout: Payout, subject: str, at: float) -> str:
    payout.status = "paid"
    faults, dice = rail.faults, rail.dice
    if (
        (payout.destination or "").startswith(REVERSING)
        or dice.chance("reversal", subject, faults.reversal)
        or dice.chance("payout_return", subject, faults.payout_return)
    ):
        # A return comes after the arrival date, as a bank returns money that had arrived
        returning_at = max(at + faults.reversal_delay_ms / 1000, payout.arrival_date + 1)
        rail.timers.add(returning_at, Action.REVERSE, payout.id)
    return "payout.paid"


def _fail(rail: Rail, payout: Payout, action: Action, at: float) -> str:
    # A paid payout that comes back is reported by Stripe as payout.failed
    code, message = _FAILURES.get(action, ("account_closed", "The payout was returned."))
    payout.status, payout.failure_code, payout.failure_message = "failed", code, message
    payout.failure_balance_transaction = rail.book.record(
        MovementType.PAYOUT_FAILURE, payout.amount, payout.currency, payout.id, int(at)
    )
    return "payout.failed"
