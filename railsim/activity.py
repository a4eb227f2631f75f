"""What a live platform account does that settle did not ask for (the `realistic` habits).

On the simulator's clock, each kind of activity comes round about every `*_every` seconds
(between half and one and a half times that, drawn from the seeded generator): a card
charge, sized to bring back what settle sent out in that currency since the last one plus
a sale of its own, so the balance keeps ahead of settle's outflow; a destination charge,
whose money less a 10% application fee goes on to another connected account as a transfer
naming the charge in `source_transaction`; a transfer made by another system (its own
metadata and `transfer_group`, none of settle's); Connect's bill for settle's transfers and
payouts since the last one, as its own negative `stripe_fee` balance transaction; and the
payout schedule, paying out part of each currency's available balance in an automatic
payout that takes every available movement not yet paid out. None of it is announced by
webhook: settle's endpoint hears only of its own objects.
"""

from __future__ import annotations

import random
import string
from datetime import UTC, datetime

from railsim.balance import MovementType
from railsim.fees import card_fee, connect_fee, fee_detail, share
from railsim.habits import Habits, payout_times
from railsim.objects import Charge, Payout, Transfer, new_id
from railsim.params import MAX_AMOUNT
from railsim.schedule import Action
from railsim.state import Rail
from services.domain.money import exponent

APPLICATION_FEE_BASIS_POINTS = 1_000  # the platform keeps 10% of a destination charge
PAYOUT_DESCRIPTION = "STRIPE PAYOUT"  # what Stripe writes on an automatic payout


def _every(habits: Habits, action: Action) -> float:
    return {
        Action.CHARGE: habits.charge_every,
        Action.DESTINATION_CHARGE: habits.destination_charge_every,
        Action.OTHER_TRANSFER: habits.other_transfer_every,
        Action.CONNECT_FEE: habits.connect_fee_every,
        Action.AUTOMATIC_PAYOUT: habits.automatic_payout_every,
    }[action]


def start(rail: Rail, now: float) -> None:
    """Schedule the first of each kind of activity the habits have."""
    for action in (
        Action.CHARGE,
        Action.DESTINATION_CHARGE,
        Action.OTHER_TRANSFER,
        Action.CONNECT_FEE,
        Action.AUTOMATIC_PAYOUT,
    ):
        _again(rail, action, now)


def _again(rail: Rail, action: Action, now: float) -> None:
    every = _every(rail.habits, action)
    if every > 0:
        rail.timers.add(now + every * rail.state.rng.uniform(0.5, 1.5), action, "")


def perform(rail: Rail, action: Action, at: float) -> None:
    """Do one piece of the account's activity at `at`, and schedule the next of its kind."""
    if action is Action.CHARGE:
        currency = _charge_currency(rail)
        owed = rail.state.outflow.since_charge.pop(currency, 0)
        _charge(rail, at, currency, _sale(rail.state.rng, currency) + owed * 11 // 10)
    elif action is Action.DESTINATION_CHARGE:
        _destination_charge(rail, at)
    elif action is Action.OTHER_TRANSFER:
        _other_transfer(rail, at)
    elif action is Action.CONNECT_FEE:
        _connect_fees(rail, at)
    else:
        rail.book.mature(at)  # the schedule pays out what is available by now
        for currency in rail.book.currencies():
            _automatic_payout(rail, at, currency)
    _again(rail, action, at)


def _sale(rng: random.Random, currency: str) -> int:
    """A sale's amount: 10 to 200 major units of `currency`."""
    return rng.randint(10, 200) * int(10 ** exponent(currency.upper()))


def _currencies(rail: Rail) -> list[str]:
    used = set(rail.book.currencies()) | set(rail.state.outflow.since_charge)
    return sorted(used) or ["usd"]


def _charge_currency(rail: Rail) -> str:
    owed = rail.state.outflow.since_charge
    if owed:
        return max(sorted(owed), key=lambda c: owed[c])
    return rail.state.rng.choice(_currencies(rail))


def _charge(rail: Rail, at: float, currency: str, amount: int) -> Charge:
    rng, created = rail.state.rng, int(at)
    order = f"ORD-{rng.randint(100_000, 999_999)}"
    charge = Charge(
        new_id("ch"),
        min(amount, MAX_AMOUNT),
        currency,
        created,
        description=f"Payment for order {order}",
        metadata={"order_id": order},
    )
    fee = fee_detail(card_fee(charge.amount), currency, "Stripe processing fees")
    charge.balance_transaction = rail.book.record(
        MovementType.CHARGE,
        charge.amount,
        currency,
        charge.id,
        created,
        fees=[fee],
        available_on=int(at + rail.habits.charge_pending_seconds),
        description=charge.description,
    )
    rail.state.keep(charge, api=False)
    return charge


def _connected_account(rng: random.Random) -> str:
    """Another business's connected account, as Stripe spells an account id."""
    return "acct_1" + "".join(rng.choices(string.ascii_letters + string.digits, k=15))


def _destination_charge(rail: Rail, at: float) -> None:
    rng = rail.state.rng
    currency = rng.choice(_currencies(rail))
    charge = _charge(rail, at, currency, _sale(rng, currency))
    charge.application_fee_amount = share(charge.amount, APPLICATION_FEE_BASIS_POINTS)
    charge.transfer_destination = _connected_account(rng)
    charge.transfer_group = f"group_{charge.id}"
    transfer = Transfer(
        new_id("tr"),
        charge.amount - charge.application_fee_amount,
        currency,
        charge.transfer_destination,
        int(at),
        transfer_group=charge.transfer_group,
        source_transaction=charge.id,
    )
    _book_transfer(rail, transfer)
    charge.transfer = transfer.id
    rail.state.changed(charge)


def _other_transfer(rail: Rail, at: float) -> None:
    rng = rail.state.rng
    currency = rng.choice(_currencies(rail))
    order = f"ORDER-{rng.randint(100_000, 999_999)}"
    transfer = Transfer(
        new_id("tr"),
        _sale(rng, currency),
        currency,
        _connected_account(rng),
        int(at),
        transfer_group=order,
        description=f"Seller payout for {order}",
        metadata={"order_id": order, "system": "marketplace"},
    )
    _book_transfer(rail, transfer)


def _book_transfer(rail: Rail, transfer: Transfer) -> None:
    transfer.balance_transaction = rail.book.record(
        MovementType.TRANSFER, -transfer.amount, transfer.currency, transfer.id, transfer.created
    )
    rail.state.keep(transfer, api=False)


def _connect_fees(rail: Rail, at: float) -> None:
    day = datetime.fromtimestamp(at, UTC).date().isoformat()
    billable = rail.state.outflow.billable
    for currency in sorted(billable):
        volume, count = billable.pop(currency)
        rail.book.record(
            MovementType.STRIPE_FEE,
            -connect_fee(volume, count),
            currency,
            None,
            int(at),
            description=f"Connect ({day}): Payouts Volume Billing",
        )


def _automatic_payout(rail: Rail, at: float, currency: str) -> None:
    amount = rail.book.available(currency) * rail.habits.automatic_payout_percent // 100
    if amount <= 0:
        return
    transit, due, arrival = payout_times(rail.habits, 0, at, instant=False)
    payout = Payout(
        new_id("po"),
        amount,
        currency,
        f"ba_platform_{currency}",
        int(at),
        arrival_date=arrival,
        description=PAYOUT_DESCRIPTION,
        automatic=True,
    )
    payout.balance_transaction = rail.book.record(
        MovementType.PAYOUT, -amount, currency, payout.id, int(at), description=PAYOUT_DESCRIPTION
    )
    rail.book.sweep(currency, payout.id)
    rail.state.keep(payout, api=False)
    if transit is not None:
        rail.timers.add(transit, Action.TRANSIT, payout.id)
    rail.timers.add(due, Action.PAY, payout.id)
