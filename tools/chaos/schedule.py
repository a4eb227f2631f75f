"""The faults of a chaos run, decided by the seed alone: the same seed, the same schedule.

Pure code (no I/O): `fault_schedule(seed, seconds, lease_s)` returns the ordered actions the
runner carries out. Every schedule holds, inside the first 85 % of the run:
  - `kill` (SIGKILL, the supervisor restarts it) of the ledger, of a relay, of the inbox and
    of the reconciler, each at least twice (one more per minute of run),
  - `pause` of one relay for longer than the relay lease, then its `resume`,
  - `self_pause` of each relay several times at the moments that matter for money (just
    after a claim, at the last check before the rail write, just after that write, after a
    take-over's lookup found nothing): the relays carry failpoints (`self_pauses`) that stop
    them there, and the runner wakes each one past its lease (tools/chaos/inject.py),
  - `kafka_stop` (SIGKILL of the broker) then `kafka_start` a few seconds later,
  - `postgres_stop` (`pg_ctl -m immediate`, a crash) then `postgres_start`,
  - `rail_faults` at 0 (the simulator's `chaos` profile) and `rail_faults none` at the end of
    the fault window, so the system can converge while webhooks already scheduled still land.
The two infrastructure outages never overlap, and no relay is killed while it is paused.
"""

from __future__ import annotations

import random
from typing import NamedTuple

RELAYS = ("relay-1", "relay-2")
KILLED = ("ledger", "relay", "inbox", "reconciler")
WINDOW = (0.05, 0.85)  # fraction of the run in which faults happen
OUTAGE_S = (3.0, 6.0)  # how long PostgreSQL or Kafka stays down
PAUSE_BEYOND_LEASE_S = (2.0, 5.0)  # a paused relay sleeps its lease plus this
MIN_SECONDS = 20.0
KILL_GAP_S = 3.0  # between two kills of one service: it restarts and answers again by then
RAIL_PROFILE = "chaos"
# Where a relay stops itself, and how often, as a share of the run's settlements: the writes
# come once per settlement, split between two relays; claims come in batches; lookups only
# on take-overs where the rail ignores keys.
SELF_PAUSE_EVERY = {
    "dispatch.after_claim": 1 / 150,
    "rail.before_write": 1 / 7,
    "rail.after_write": 1 / 7,
    "dispatch.after_lookup": 1 / 100,
}
FIRST_SELF_PAUSE = (2, 20)  # on which hit a point first fires in each life of a relay
BANK_PROFILE = "chaos"
# A relay uploads a file a second or so while it has SEPA instructions: it is killed right
# after the bank's answer on one of its first uploads, then every few uploads of each life.
FIRST_FILE_KILL = (2, 6)
FILE_KILL_EVERY = 8


class Fault(NamedTuple):
    """One scheduled action."""

    at: float  # seconds after the start of the run
    action: str  # kill, pause, resume, kafka_stop, kafka_start, postgres_stop, ...
    target: str  # a child's name, "kafka", "postgres" or "railsim"
    detail: str = ""  # the simulator profile, the pause length, ...


def kills_per_service(seconds: float) -> int:
    """At least two kills of each service, one more per minute of run."""
    return 2 + int(seconds // 60)


def _outage(rng: random.Random, start: float, end: float) -> tuple[float, float]:
    down = rng.uniform(start, end - OUTAGE_S[1])
    return down, down + rng.uniform(*OUTAGE_S)


def _apart(rng: random.Random, start: float, end: float, drawn: list[float]) -> float:
    """A time in [start, end) at least KILL_GAP_S from every one in `drawn` (which it joins),
    so a second kill never finds the service still down from the first."""
    at = rng.uniform(start, end)
    for _ in range(100):  # a few draws suffice: the window holds many gaps
        if all(abs(at - other) >= KILL_GAP_S for other in drawn):
            break
        at = rng.uniform(start, end)
    drawn.append(at)
    return at


def fault_schedule(
    seed: int, seconds: float, lease_s: float, rails: tuple[str, ...] = ("sim",)
) -> list[Fault]:
    """The run's faults, ordered by time; the same (seed, seconds, lease_s, rails), the same
    list. Where the stack pays by SEPA, the bank simulator's faults are on through the window
    and it is killed (and restarted by the supervisor) as often as each service."""
    if seconds < MIN_SECONDS:
        raise ValueError(f"a chaos run needs at least {MIN_SECONDS:.0f} s, got {seconds}")
    rng = random.Random(seed)
    start, end = seconds * WINDOW[0], seconds * WINDOW[1]
    middle = (start + end) / 2
    faults = [Fault(0.0, "rail_faults", "railsim", RAIL_PROFILE)]
    # One outage in each half of the window, which half is PostgreSQL's decided by the seed.
    halves = [(start, middle), (middle, end)]
    rng.shuffle(halves)
    for name, (lo, hi) in zip(("postgres", "kafka"), halves, strict=True):
        down, up = _outage(rng, lo, hi)
        faults += [Fault(down, f"{name}_stop", name), Fault(up, f"{name}_start", name)]
    paused = rng.choice(RELAYS)
    asleep = lease_s + rng.uniform(*PAUSE_BEYOND_LEASE_S)
    pause_at = rng.uniform(start, end - asleep)
    faults += [
        Fault(pause_at, "pause", paused, f"{asleep:.1f} s, lease {lease_s:.0f} s"),
        Fault(pause_at + asleep, "resume", paused),
    ]
    for service in KILLED:
        drawn: list[float] = []
        for _ in range(kills_per_service(seconds)):
            at = _apart(rng, start, end, drawn)
            target = service
            if service == "relay":
                target = rng.choice(RELAYS)
                if target == paused and pause_at - 1 <= at <= pause_at + asleep + 1:
                    target = next(r for r in RELAYS if r != paused)
            faults.append(Fault(at, "kill", target, "SIGKILL"))
    faults.append(Fault(end, "rail_faults", "railsim", "none"))
    if "sepa" in rails:
        faults += _bank_faults(random.Random(f"{seed}/bank"), seconds, start, end)
    return sorted((f._replace(at=round(f.at, 2)) for f in faults), key=lambda f: (f.at, f.action))


def _bank_faults(rng: random.Random, seconds: float, start: float, end: float) -> list[Fault]:
    faults = [Fault(0.0, "bank_faults", "banksim", BANK_PROFILE)]
    drawn: list[float] = []
    for _ in range(kills_per_service(seconds)):
        faults.append(Fault(_apart(rng, start, end, drawn), "kill", "banksim", "SIGKILL"))
    return [*faults, Fault(end, "bank_faults", "banksim", "none")]


def self_pauses(seed: int, count: int, rails: tuple[str, ...] = ("sim",)) -> dict[str, str]:
    """Each relay's SETTLE_FAILPOINTS for a run of `count` settlements: one point around the
    rail write and one around a claim or a take-over's lookup, which ones decided by the seed,
    each first firing within FIRST_SELF_PAUSE hits and then again every so often
    (SELF_PAUSE_EVERY), so that every relay stops itself several times a run."""
    rng = random.Random(f"{seed}/self-pauses")
    writes = [p for p in SELF_PAUSE_EVERY if p.startswith("rail.")]
    others = [p for p in SELF_PAUSE_EVERY if not p.startswith("rail.")]
    rng.shuffle(writes)
    rng.shuffle(others)
    specs = {}
    for relay, points in zip(RELAYS, zip(writes, others, strict=True), strict=True):
        specs[relay] = ",".join(
            f"{point}=stop@{rng.randint(*FIRST_SELF_PAUSE)}"
            f"+{max(5, round(count * SELF_PAUSE_EVERY[point]))}"
            for point in points
        )
    if "sepa" in rails:  # and each relay is killed between a file's upload and its record
        for relay in RELAYS:
            first = rng.randint(*FIRST_FILE_KILL)
            specs[relay] += f",files.after_upload=kill@{first}+{FILE_KILL_EVERY}"
    return specs
