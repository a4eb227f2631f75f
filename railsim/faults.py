"""Fault settings, the named profiles, and the seeded dice that decide when a fault fires."""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from railsim.errors import FaultsError

P = TypeVar("P")  # a simulator's fault settings


@dataclass(frozen=True, slots=True)
class Faults:
    """What goes wrong, and how often; probabilities are in [0, 1]."""

    latency_ms: float = 0.0  # added to every API call
    fail_before: float = 0.0  # 500 api_error before anything happens
    fail_after: float = 0.0  # object created, then 500 api_error
    timeout_after: float = 0.0  # object created, then the answer is held back
    timeout_seconds: float = 30.0  # how long a held answer is held
    refuse: float = 0.0  # terminal 400 transfers_not_allowed
    webhook_duplicate: float = 0.0  # the same event (same id) delivered twice
    webhook_twin: float = 0.0  # a second event, new id, for the same change
    webhook_reorder: float = 0.0  # an event held back so a later one overtakes it
    webhook_early: float = 0.0  # the created event posted before the API answers
    payout_fail: float = 0.0  # an accepted payout fails later
    reversal: float = 0.0  # a transfer or paid payout is reversed later
    # The faults only a reconciliation catches. Drops are on in demo and chaos (a lost webhook
    # is what reconciliation heals); partial reversals and returns in chaos.
    webhook_drop: float = 0.0  # a change's events are never sent at all
    partial_reversal: float = 0.0  # a transfer is later reversed in part (half, rounded down)
    payout_return: float = 0.0  # a paid payout comes back later (payout.paid, then .failed)
    reversal_delay_ms: float = 2000.0
    payout_delay_ms: float = 200.0  # pending -> paid/failed
    reorder_delay_ms: float = 500.0  # how long a reordered event is held back
    seed: int = 0


PROBABILITIES = frozenset(
    {
        "fail_before",
        "fail_after",
        "timeout_after",
        "refuse",
        "webhook_duplicate",
        "webhook_twin",
        "webhook_reorder",
        "webhook_early",
        "payout_fail",
        "reversal",
        "webhook_drop",
        "partial_reversal",
        "payout_return",
    }
)

PROFILES: dict[str, Faults] = {
    "none": Faults(),
    "demo": Faults(
        latency_ms=5,
        fail_before=0.02,
        fail_after=0.02,
        timeout_after=0.01,
        refuse=0.01,
        webhook_duplicate=0.05,
        webhook_twin=0.02,
        webhook_reorder=0.05,
        webhook_early=0.05,
        payout_fail=0.02,
        reversal=0.01,
        webhook_drop=0.02,
    ),
    "chaos": Faults(
        latency_ms=25,
        fail_before=0.1,
        fail_after=0.1,
        timeout_after=0.05,
        refuse=0.03,
        webhook_duplicate=0.2,
        webhook_twin=0.1,
        webhook_reorder=0.2,
        webhook_early=0.2,
        payout_fail=0.05,
        reversal=0.05,
        webhook_drop=0.05,
        partial_reversal=0.03,
        payout_return=0.02,
    ),
}


def profile(name: str) -> Faults:
    """The named fault profile (none, demo, chaos)."""
    return named_profile(PROFILES, name, FaultsError)


def updated(base: Faults, changes: Mapping[str, object]) -> Faults:
    """`base` with `changes` applied; a key `profile` starts from that profile instead."""
    base = starting_profile(base, changes, PROFILES, FaultsError)
    known = {f.name for f in dataclasses.fields(Faults)}
    values: dict[str, float | int] = {}
    for key, value in changes.items():
        if key == "profile":
            continue
        if key not in known:
            raise FaultsError(f"{key}: unknown fault; use one of {sorted(known)}")
        values[key] = _checked(key, value)
    return dataclasses.replace(base, **values)  # type: ignore[arg-type]


def named_profile(profiles: Mapping[str, P], name: str, error: type[Exception]) -> P:
    """The profile `name` of `profiles`; `error`, naming the profiles there are, for any other
    name. The bank simulator (banksim.faults) looks its own profiles up with this too."""
    try:
        return profiles[name]
    except KeyError:
        raise error(f"unknown fault profile {name!r}; use one of {sorted(profiles)}") from None


def starting_profile(
    base: P, changes: Mapping[str, object], profiles: Mapping[str, P], error: type[Exception]
) -> P:
    """What `changes` apply over: the profile of `profiles` their key `profile` names, else
    `base`; `error` if that key is not a profile's name."""
    if "profile" not in changes:
        return base
    name = changes["profile"]
    if not isinstance(name, str):
        raise error("profile: must be a profile name")
    return named_profile(profiles, name, error)


def _checked(key: str, value: object) -> float | int:
    # bool is an int to Python, but `true` is never a sensible probability or delay
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FaultsError(f"{key}: must be a number")
    if key == "seed":
        if not isinstance(value, int):
            raise FaultsError("seed: must be an integer")
        return value
    if value < 0 or (key in PROBABILITIES and value > 1):
        bounds = "between 0 and 1" if key in PROBABILITIES else ">= 0"
        raise FaultsError(f"{key}: must be {bounds}")
    return float(value)


# Subjects whose fired faults are remembered; past this the oldest are forgotten, so a
# simulator serving for days keeps a bounded record
MET_LIMIT = 100_000


class Dice:
    """Seeded decisions that do not depend on how requests interleave.

    The n-th roll named `name` for `subject` (a settlement or idempotency key) while that fault
    is on comes out the same in every run with the same seed and settings, however many relays
    race each other. Which faults fired for which subject is remembered (see `met`), so a
    report can tell the settlements that met a fault from those that met none.
    """

    def __init__(self, seed: int, met_limit: int = MET_LIMIT) -> None:
        self.seed = seed
        self._rolls: Counter[tuple[str, str]] = Counter()
        self._met: dict[str, set[str]] = {}
        self._met_limit = met_limit

    def chance(self, name: str, subject: str, probability: float) -> bool:
        """Whether the fault `name` fires for `subject` this time, given its probability."""
        if probability <= 0:
            # Not counted: a fault that is off costs nothing and remembers nothing per subject
            # (eleven rolls per transfer); a run under the same settings repeats as before
            return False
        n = self._rolls[(name, subject)]
        self._rolls[(name, subject)] = n + 1
        digest = hashlib.sha256(f"{self.seed}\x1f{name}\x1f{subject}\x1f{n}".encode()).digest()
        fired = int.from_bytes(digest[:8], "big") / 2**64 < probability
        if fired:
            self._remember(subject, name)
        return fired

    def met(self, subjects: Iterable[str]) -> dict[str, list[str]]:
        """The faults that fired for each of `subjects`, by name; subjects that met none are
        left out."""
        return {s: sorted(self._met[s]) for s in subjects if s in self._met}

    def _remember(self, subject: str, name: str) -> None:
        names = self._met.get(subject)
        if names is None:
            if len(self._met) >= self._met_limit:
                del self._met[next(iter(self._met))]  # the oldest subject goes first
            names = self._met[subject] = set()
        names.add(name)
