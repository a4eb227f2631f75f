"""Fault settings of the bank and its named profiles.

A fault here is something a real bank does that settle must survive: an upload whose answer
is lost after the file was taken, transactions rejected or returned with ISO reason codes,
batch booking where single booking was asked, charges, and statements that come late or
out of sequence. Which transaction meets which fault is decided by `banksim.dice`, seeded,
so a restarted simulator decides as before. A profile is looked up, and changes apply over
it, as railsim's are (railsim.faults).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from banksim.errors import FaultsError
from railsim.faults import named_profile, starting_profile

REASON_CODE = re.compile(r"^[A-Z0-9]{4}$")


@dataclass(frozen=True, slots=True)
class Faults:
    """What goes wrong, and how often; rates are probabilities in [0, 1]."""

    lost_answer: float = 0.0  # per taken file: stored, then its answer is lost
    lost_answer_dropped: float = 0.5  # of lost answers, the share dropped mid-answer (else 504)
    # Per transaction at intake, a reason code and its rate (the rates sum to at most 1)
    rejects: Mapping[str, float] = field(default_factory=dict)
    # Per booked transaction, a reason code and its rate: returned some business days later
    returns: Mapping[str, float] = field(default_factory=dict)
    return_days_min: int = 1
    return_days_max: int = 3
    batch_forced: float = 0.0  # per block asking BtchBookg false: booked as one batch anyway
    charge: float = 0.0  # per booked transaction: a fee, booked as its own DBIT entry
    charge_minor: int = 35  # the fee, in cents
    statement_late: float = 0.0  # per account and day: delivered one business day late
    statement_missing: float = 0.0  # per account and day: held back, later ones overtake it
    statement_missing_days: int = 2  # business days a missing statement is held back
    seed: int = 0


RATES = frozenset(
    {"lost_answer", "lost_answer_dropped", "batch_forced", "charge"}
    | {"statement_late", "statement_missing"}
)
COUNTS = frozenset(
    {"return_days_min", "return_days_max", "charge_minor", "statement_missing_days", "seed"}
)
CODE_RATES = frozenset({"rejects", "returns"})

PROFILES: dict[str, Faults] = {
    "none": Faults(),
    "demo": Faults(
        lost_answer=0.02,
        rejects={"AC04": 0.01, "AM04": 0.005},
        returns={"AC04": 0.01, "AC06": 0.005},
        charge=0.05,
        statement_late=0.05,
        statement_missing=0.02,
    ),
    "chaos": Faults(
        lost_answer=0.1,
        rejects={"AC01": 0.01, "AC04": 0.02, "AM04": 0.01, "BE04": 0.005, "MS03": 0.005},
        returns={"AC04": 0.02, "AC06": 0.01, "MD07": 0.005},
        return_days_max=5,
        batch_forced=0.2,
        charge=0.1,
        statement_late=0.1,
        statement_missing=0.05,
        statement_missing_days=3,
    ),
    # One fault at a time, at a rate a short run meets often
    "lossy": Faults(lost_answer=0.25),
    "returns": Faults(returns={"AC04": 0.1, "AC06": 0.05, "MD07": 0.05}),
    "statements": Faults(statement_late=0.2, statement_missing=0.2),
}


def profile(name: str) -> Faults:
    """The named fault profile (see PROFILES)."""
    return named_profile(PROFILES, name, FaultsError)


def updated(base: Faults, changes: Mapping[str, object]) -> Faults:
    """`base` with `changes` applied; a key `profile` starts from that profile instead."""
    base = starting_profile(base, changes, PROFILES, FaultsError)
    values: dict[str, Any] = {}  # each checked against its field's type below
    for key, value in changes.items():
        if key == "profile":
            continue
        if key in RATES:
            values[key] = _rate(key, value)
        elif key in COUNTS:
            values[key] = _count(key, value)
        elif key in CODE_RATES:
            values[key] = _code_rates(key, value)
        else:
            known = sorted(RATES | COUNTS | CODE_RATES)
            raise FaultsError(f"{key}: unknown fault; use one of {known}")
    faults = dataclasses.replace(base, **values)
    if faults.return_days_min > faults.return_days_max:
        raise FaultsError("return_days_min: must not exceed return_days_max")
    return faults


def as_json(faults: Faults) -> dict[str, object]:
    """The settings as a JSON object, as GET /_control/faults shows them."""
    return {f.name: _plain(getattr(faults, f.name)) for f in dataclasses.fields(Faults)}


def _plain(value: object) -> object:
    return dict(value) if isinstance(value, Mapping) else value


def _rate(key: str, value: object) -> float:
    # bool is an int to Python, but `true` is never a sensible probability
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise FaultsError(f"{key}: must be a number between 0 and 1")
    return float(value)


def _count(key: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or (key != "seed" and value < 0):
        raise FaultsError(f"{key}: must be an integer" + ("" if key == "seed" else " >= 0"))
    return value


def _code_rates(key: str, value: object) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise FaultsError(f'{key}: must be an object of reason codes and rates, {{"AC04": 0.01}}')
    rates = {}
    for code, rate in value.items():
        if not isinstance(code, str) or not REASON_CODE.match(code):
            raise FaultsError(f"{key}: {code!r} is not an ISO reason code (four capitals/digits)")
        rates[code] = _rate(f"{key}.{code}", rate)
    if sum(rates.values()) > 1:
        raise FaultsError(f"{key}: the rates must sum to at most 1")
    return rates
