"""Changes the rail makes after answering: payouts go in transit, settle or fail, money comes
back, and the account does what it does of its own (activity.py)."""

from __future__ import annotations

import re

from railsim.activity import perform
from railsim.announce import announce
from railsim.balance import MovementType
from railsim.objects import Payout, Reversal, Transfer, new_id
from railsim.replies import Delivery
from railsim.schedule import ACTIVITY, Action, Timers
from railsim.state import Rail

__all__ = ["PARTLY_REVERSING", "REVERSING", "Action", "Rail", "Timers", "apply_due", "pieces"]

REVERSING = "acct_reverse"  # accepted, then reversed after reversal_delay_ms
PARTLY_REVERSING = "acct_partial"  # a transfer accepted, then reversed in part
_IN_PIECES = re.compile(r"acct_partial([2-9])")  # reversed whole, in that many parts


_FAILURES = {
    Action.FAIL_CLOSED: ("account_closed", "The bank account has been closed."),
    Action.FAIL_PROCESSING: ("could_not_process", "The bank could not process this payout."),
}


def pieces(destination: str) -> int:
    """How many parts a transfer to `destination` is reversed in (`acct_partial3`: 3), or 0."""
    found = _IN_PIECES.match(destination)
    return int(found.group(1)) if found else 0


def apply_due(rail: Rail, now: float) -> list[Delivery]:
    """Apply every change due by `now`, including those due changes schedule; announce them."""
    deliveries: list[Delivery] = []
    while (due := rail.timers.pop_due(now)) is not None:
        at, action, object_id = due
        if action in ACTIVITY:
            perform(rail, action, at)
            continue
        obj = rail.objects.get(object_id)
        if obj is None:
            continue
        subject = obj.metadata.get("settlement_id", obj.id)
        type_ = _change(rail, obj, action, subject, at)
        if type_ is None:
            continue
        rail.state.changed(obj)
        if isinstance(obj, Payout) and obj.automatic:
            continue  # the account's own payouts are not announced to settle's endpoint
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


def _change(
    rail: Rail, obj: Transfer | Payout, action: Action, subject: str, at: float
) -> str | None:
    """Apply `action` to `obj`; the type of the event announcing it, None if nothing changed."""
    if isinstance(obj, Transfer):
        return _reverse(rail, obj, action, at)
    if action is Action.TRANSIT:
        if obj.status != "pending":
            return None
        obj.status = "in_transit"
        return "payout.updated"  # Stripe announces the step into transit as an update
    if action is Action.PAY:
        return _pay(rail, obj, subject, at)
    return _fail(rail, obj, action, at)


def _reverse(rail: Rail, transfer: Transfer, action: Action, at: float) -> str | None:
    left = transfer.amount - transfer.amount_reversed
    if action is Action.REVERSE_PART:
        amount = transfer.amount // 2
    elif action is Action.REVERSE_PIECE:
        parts = max(pieces(transfer.destination), 1)
        last = len(transfer.reversals) >= parts - 1
        amount = left if last else transfer.amount // parts
    else:
        amount = left
    if not 0 < amount <= left:
        return None  # nothing (or too little) left to take back
    reversal_id = new_id("trr")
    txn = rail.book.record(
        MovementType.TRANSFER_REFUND, amount, transfer.currency, reversal_id, int(at)
    )
    transfer.reversals.append(Reversal(reversal_id, amount, int(at), txn))
    rail.state.reversed_by[reversal_id] = transfer
    # Stripe announces a partial reversal with the same event type as a full one
    return "transfer.reversed"


def _pay(rail: Rail, payout: Payout, subject: str, at: float) -> str:
    payout.status = "paid"
    faults, dice = rail.faults, rail.dice
    if not payout.automatic and (
        (payout.destination or "").startswith(REVERSING)
        or dice.chance("reversal", subject, faults.reversal)
        or dice.chance("payout_return", subject, faults.payout_return)
    ):
        # A return comes after the arrival date, as a bank returns money that had arrived
        returning_at = max(at + faults.reversal_delay_ms / 1000, payout.arrival_date + 1)
        rail.timers.add(returning_at, Action.REVERSE, payout.id)
    return "payout.paid"


def _fail(rail: Rail, payout: Payout, action: Action, at: float) -> str | None:
    if payout.status == "failed":
        return None
    # A paid payout that comes back is reported by Stripe as payout.failed
    code, message = _FAILURES.get(action, ("account_closed", "The payout was returned."))
    payout.status, payout.failure_code, payout.failure_message = "failed", code, message
    payout.failure_balance_transaction = rail.book.record(
        MovementType.PAYOUT_FAILURE, payout.amount, payout.currency, payout.id, int(at)
    )
    return "payout.failed"
