"""Changes the rail makes after answering: payouts settle or fail, money comes back."""

from __future__ import annotations

import heapq
import itertools
from enum import Enum

from railsim.announce import announce
from railsim.faults import Dice, Faults
from railsim.objects import Payout, Transfer, new_id
from railsim.replies import Delivery

REVERSING = "acct_reverse"  # accepted, then reversed after reversal_delay_ms


class Action(Enum):
    """A change due at some time."""

    PAY = "pay"  # payout pending -> paid
    FAIL_CLOSED = "fail_closed"  # payout pending -> failed, account_closed
    FAIL_PROCESSING = "fail_processing"  # payout pending -> failed, could_not_process
    REVERSE = "reverse"  # transfer reversed in full, or paid payout returned (-> failed)


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


def apply_due(
    timers: Timers,
    objects: dict[str, Transfer | Payout],
    now: float,
    faults: Faults,
    dice: Dice,
) -> list[Delivery]:
    """Apply every change due by `now`, including those due changes schedule; announce them."""
    deliveries: list[Delivery] = []
    while (due := timers.pop_due(now)) is not None:
        at, action, object_id = due
        obj = objects.get(object_id)
        if obj is None:
            continue
        subject = obj.metadata.get("settlement_id", obj.id)
        if isinstance(obj, Transfer):
            obj.reversal_id = new_id("trr")
            type_ = "transfer.reversed"
        elif action is Action.PAY:
            obj.status = "paid"
            type_ = "payout.paid"
            if (obj.destination or "").startswith(REVERSING) or dice.chance(
                "reversal", subject, faults.reversal
            ):
                timers.add(at + faults.reversal_delay_ms / 1000, Action.REVERSE, obj.id)
        else:
            # A paid payout that comes back is reported by Stripe as payout.failed
            code, message = _FAILURES.get(action, ("account_closed", "The payout was returned."))
            obj.status, obj.failure_code, obj.failure_message = "failed", code, message
            type_ = "payout.failed"
        deliveries.extend(
            announce(type_, obj.to_wire(), at=at, subject=subject, faults=faults, dice=dice)
        )
    return deliveries
