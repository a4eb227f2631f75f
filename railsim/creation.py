"""What a fresh create request comes to: a refusal, or a new object and its due changes."""

from __future__ import annotations

import math

from railsim.balance import MovementType
from railsim.errors import ApiError
from railsim.faults import Dice, Faults
from railsim.objects import Payout, Transfer, new_id
from railsim.params import CreateRequest, Kind
from railsim.timers import PARTLY_REVERSING, REVERSING, Action, Rail

# Destinations that make the rail refuse every time, for tests to aim at.
REFUSALS = (
    ("acct_closed", "account_closed", "The destination account is closed."),
    ("acct_refuse", "transfers_not_allowed", "Transfers to this account are not allowed."),
    ("acct_nofunds", "balance_insufficient", "You have insufficient funds in your Stripe account."),
)
FAILING_PAYOUT = "acct_fail"  # accepted, then the payout fails with account_closed


def refusal(request: CreateRequest, subject: str, faults: Faults, dice: Dice) -> ApiError | None:
    """The terminal refusal this request gets, if any: by destination, or by the refuse fault."""
    destination = request.destination or ""
    for prefix, code, message in REFUSALS:
        if destination.startswith(prefix):
            return ApiError(message, code=code, param="destination")
    if dice.chance("refuse", subject, faults.refuse):
        return ApiError(
            "Transfers to this account are not allowed.",
            code="transfers_not_allowed",
            param="destination",
        )
    return None


def make(request: CreateRequest, subject: str, now: float, rail: Rail) -> Transfer | Payout:
    """The new transfer or payout, booked against the balance, with its later changes (settle,
    fail, reverse) scheduled."""
    destination = request.destination or ""
    faults, dice, created = rail.faults, rail.dice, int(now)
    if request.kind is Kind.TRANSFER:
        transfer = Transfer(
            id=new_id("tr"),
            amount=request.amount,
            currency=request.currency,
            destination=destination,
            created=created,
            transfer_group=request.transfer_group,
            description=request.description,
            metadata=request.metadata,
        )
        transfer.balance_transaction = rail.book.record(
            MovementType.TRANSFER, -request.amount, request.currency, transfer.id, created
        )
        reversing_at = now + faults.reversal_delay_ms / 1000
        if destination.startswith(REVERSING) or dice.chance("reversal", subject, faults.reversal):
            rail.timers.add(reversing_at, Action.REVERSE, transfer.id)
        elif destination.startswith(PARTLY_REVERSING) or dice.chance(
            "partial_reversal", subject, faults.partial_reversal
        ):
            rail.timers.add(reversing_at, Action.REVERSE_PART, transfer.id)
        return transfer
    payout = Payout(
        id=new_id("po"),
        amount=request.amount,
        currency=request.currency,
        destination=request.destination,
        created=created,
        # The whole second by which it pays: a failure that never paid comes by then
        arrival_date=math.ceil(now + faults.payout_delay_ms / 1000),
        method=request.method,
        description=request.description,
        metadata=request.metadata,
    )
    payout.balance_transaction = rail.book.record(
        MovementType.PAYOUT, -request.amount, request.currency, payout.id, created
    )
    if destination.startswith(FAILING_PAYOUT):
        action = Action.FAIL_CLOSED
    elif dice.chance("payout_fail", subject, faults.payout_fail):
        action = Action.FAIL_PROCESSING
    else:
        action = Action.PAY
    rail.timers.add(now + faults.payout_delay_ms / 1000, action, payout.id)
    return payout
