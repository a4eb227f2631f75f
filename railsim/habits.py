"""The platform account's habits: what it does besides settle's calls, and how its money moves.

`none` is the simulator as it always was: only settle's objects, no fees, every movement
available at once, a payout paid or failed one step after `payout_delay_ms`. `realistic` is a
live platform account, on the simulator's clock: card charges (some with a transfer to a
connected account, as destination charges make), transfers other systems make, Connect's
fees, automatic payouts of part of the available balance, payouts that stay pending and in
transit before they pay, arrival dates on bank days, fees on Instant Payouts, and reports
whose data ends at the start of the current hour.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from railsim.errors import RailSimError


class HabitsError(RailSimError):
    """An account activity profile or setting the simulator does not know or cannot use."""


@dataclass(frozen=True, slots=True)
class Habits:
    """How the account behaves; periods are simulator seconds, 0 meaning never."""

    name: str = "none"
    fees: bool = False  # Instant Payouts carry Stripe's fee on their balance transaction
    charge_every: float = 0.0  # card charges made by the platform's own checkout
    destination_charge_every: float = 0.0  # charges whose money goes on to a connected account
    other_transfer_every: float = 0.0  # transfers made by systems other than settle
    connect_fee_every: float = 0.0  # Connect's bill for settle's transfers and payouts
    automatic_payout_every: float = 0.0  # the payout schedule
    automatic_payout_percent: int = 50  # of the available balance; the rest stays as a reserve
    charge_pending_seconds: float = 0.0  # how long a charge's money is pending
    payout_pending_seconds: float | None = None  # None: paid or failed in one step
    payout_transit_seconds: float = 0.0  # in_transit, between pending and paid or failed
    bank_arrival: bool = False  # arrival_date: midnight UTC of the next bank day, as Stripe
    report_data_interval: int = 1  # reports hold data up to the start of the current period
    report_run_seconds: float = 0.5  # how long a report run takes to succeed

    @property
    def active(self) -> bool:
        """Whether the account makes anything of its own."""
        return any(
            every > 0
            for every in (
                self.charge_every,
                self.destination_charge_every,
                self.other_transfer_every,
                self.connect_fee_every,
                self.automatic_payout_every,
            )
        )


PROFILES: dict[str, Habits] = {
    "none": Habits(),
    "realistic": Habits(
        name="realistic",
        fees=True,
        charge_every=2.0,
        destination_charge_every=7.0,
        other_transfer_every=11.0,
        connect_fee_every=30.0,
        automatic_payout_every=20.0,
        charge_pending_seconds=5.0,
        payout_pending_seconds=1.0,
        payout_transit_seconds=3.0,
        bank_arrival=True,
        report_data_interval=3600,
        report_run_seconds=2.0,
    ),
}


def account_habits(name: str, **overrides: float | int | None) -> Habits:
    """The profile `name` with the settings in `overrides` (None leaves one as it is)."""
    try:
        base = PROFILES[name]
    except KeyError:
        known_names = sorted(PROFILES)
        raise HabitsError(f"unknown account activity {name!r}; use one of {known_names}") from None
    known = {f.name for f in dataclasses.fields(Habits)} - {"name"}
    changes = {k: v for k, v in overrides.items() if v is not None}
    for key, value in changes.items():
        if key not in known:
            raise HabitsError(f"{key}: unknown setting; use one of {sorted(known)}")
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise HabitsError(f"{key}: must be a number >= 0")
    if "payout_transit_seconds" in changes and base.payout_pending_seconds is None:
        changes.setdefault("payout_pending_seconds", 0.0)  # a transit needs the step into it
    if changes.get("report_data_interval", 1) < 1:
        raise HabitsError("report_data_interval: must be at least 1 second")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def arrival_date(due: float, *, instant: bool, bank_days: bool) -> int:
    """A payout's `arrival_date` for one due to pay at `due`: the whole second it pays; or, on
    bank days, the midnight (UTC) that starts the next weekday, as Stripe dates a standard
    payout (an Instant Payout arrives within minutes, any day)."""
    if instant or not bank_days:
        return math.ceil(due)
    day = datetime.fromtimestamp(due, UTC).date() + timedelta(days=1)
    while day.weekday() >= 5:  # Saturday, Sunday: banks do not settle
        day += timedelta(days=1)
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp())


def payout_times(
    habits: Habits, delay_ms: float, now: float, *, instant: bool
) -> tuple[float | None, float, int]:
    """When a payout made at `now` goes in transit (None: it never shows that step), when it
    pays or fails, and its `arrival_date`; `delay_ms` is the one-step delay of `none`."""
    if habits.payout_pending_seconds is None:
        due = now + delay_ms / 1000
        return None, due, math.ceil(due)
    transit = now + habits.payout_pending_seconds
    due = transit + habits.payout_transit_seconds
    return transit, due, arrival_date(due, instant=instant, bank_days=habits.bank_arrival)
