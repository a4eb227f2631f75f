"""What a fresh create request comes to: a refusal, or a new object and its due changes."""

from __future__ import annotations

from railsim.balance import MovementType
from railsim.errors import ApiError
from railsim.faults import Dice, Faults
from railsim.fees import fee_detail, instant_payout_fee
from railsim.habits import payout_times
from railsim.objects import Payout, Transfer, Wire, new_id
from railsim.params import CreateRequest, Kind
from railsim.timers import PARTLY_REVERSING, REVERSING, Action, Rail, pieces

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
    rail.state.outflow.add(request.currency, request.amount)
    if request.kind is Kind.TRANSFER:
        return _transfer(request, subject, now, rail)
    return _payout(request, subject, now, rail)


def _transfer(request: CreateRequest, subject: str, now: float, rail: Rail) -> Transfer:
    destination = request.destination or ""
    faults, dice, created = rail.faults, rail.dice, int(now)
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
    elif parts := pieces(destination):
        for part in range(1, parts + 1):  # each part its own reversal, one delay apart
            rail.timers.add(
                now + part * faults.reversal_delay_ms / 1000, Action.REVERSE_PIECE, transfer.id
            )
    elif destination.startswith(PARTLY_REVERSING) or dice.chance(
        "partial_reversal", subject, faults.partial_reversal
    ):
        rail.timers.add(reversing_at, Action.REVERSE_PART, transfer.id)
    return transfer


def _payout(request: CreateRequest, subject: str, now: float, rail: Rail) -> Payout:
    destination = request.destination or ""
    faults, dice, habits, created = rail.faults, rail.dice, rail.habits, int(now)
    instant = request.method == "instant"
    transit, due, arrival = payout_times(habits, faults.payout_delay_ms, now, instant=instant)
    payout = Payout(
        id=new_id("po"),
        amount=request.amount,
        currency=request.currency,
        destination=request.destination,
        created=created,
        # The whole second by which it pays (or Stripe's bank day): a failure that never paid
        # comes by then
        arrival_date=arrival,
        method=request.method,
        description=request.description,
        metadata=request.metadata,
    )
    fees: list[Wire] = []
    if instant and habits.fees:
        fee = instant_payout_fee(request.amount)
        fees.append(fee_detail(fee, request.currency, "Instant Payout fee"))
    payout.balance_transaction = rail.book.record(
        MovementType.PAYOUT, -request.amount, request.currency, payout.id, created, fees=fees
    )
    if destination.startswith(FAILING_PAYOUT):
        action = Action.FAIL_CLOSED
    elif dice.chance("payout_fail", subject, faults.payout_fail):
        action = Action.FAIL_PROCESSING
    else:
        action = Action.PAY
    if transit is not None:
        rail.timers.add(transit, Action.TRANSIT, payout.id)
    rail.timers.add(due, action, payout.id)
    return payout
