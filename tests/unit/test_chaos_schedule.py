"""The chaos fault schedule: decided by the seed alone, and every required fault in it."""

from __future__ import annotations

import itertools
import signal
from collections import Counter

import pytest

from services.platform.failpoints import parse
from tools.chaos.schedule import (
    FIRST_SELF_PAUSE,
    KILL_GAP_S,
    RELAYS,
    SELF_PAUSE_EVERY,
    WINDOW,
    Fault,
    fault_schedule,
    kills_per_service,
    self_pauses,
)

LEASE_S = 6.0
SEEDS = range(60)


def kinds(schedule: list[Fault]) -> Counter[str]:
    counted: Counter[str] = Counter()
    for f in schedule:
        target = "relay" if f.target in RELAYS else f.target
        counted[f"{f.action} {target}"] += 1
    return counted


def test_same_seed_same_schedule_and_another_seed_another() -> None:
    assert fault_schedule(11, 40, LEASE_S) == fault_schedule(11, 40, LEASE_S)
    assert fault_schedule(11, 40, LEASE_S) != fault_schedule(12, 40, LEASE_S)


@pytest.mark.parametrize("seconds", [20.0, 40.0, 180.0])
def test_every_required_fault_is_scheduled(seconds: float) -> None:
    for seed in SEEDS:
        got = kinds(fault_schedule(seed, seconds, LEASE_S))
        for service in ("ledger", "relay", "inbox", "reconciler"):
            assert got[f"kill {service}"] == kills_per_service(seconds) >= 2
        assert got["pause relay"] == got["resume relay"] == 1
        for server in ("kafka", "postgres"):
            assert got[f"{server}_stop {server}"] == got[f"{server}_start {server}"] == 1
        assert got["rail_faults railsim"] == 2


def test_ordered_inside_the_window_and_the_rail_calmed_last() -> None:
    for seed in SEEDS:
        schedule = fault_schedule(seed, 40, LEASE_S)
        assert [f.at for f in schedule] == sorted(f.at for f in schedule)
        assert schedule[0] == Fault(0.0, "rail_faults", "railsim", "chaos")
        assert schedule[-1] == Fault(40 * WINDOW[1], "rail_faults", "railsim", "none")
        assert all(40 * WINDOW[0] <= f.at <= 40 * WINDOW[1] for f in schedule[1:])


def test_paused_relay_sleeps_past_its_lease_and_is_not_killed_meanwhile() -> None:
    for seed in SEEDS:
        schedule = fault_schedule(seed, 40, LEASE_S)
        pause = next(f for f in schedule if f.action == "pause")
        resume = next(f for f in schedule if f.action == "resume")
        assert resume.target == pause.target
        assert resume.at - pause.at > LEASE_S + 1
        killed = [f for f in schedule if f.action == "kill" and f.target == pause.target]
        assert not [f for f in killed if pause.at <= f.at <= resume.at]


def test_postgres_and_kafka_outages_do_not_overlap() -> None:
    for seed in SEEDS:
        at = {f.action: f.at for f in fault_schedule(seed, 40, LEASE_S)}
        pg = (at["postgres_stop"], at["postgres_start"])
        broker = (at["kafka_stop"], at["kafka_start"])
        assert pg[0] < pg[1] and broker[0] < broker[1]
        assert pg[1] <= broker[0] or broker[1] <= pg[0]


def test_a_run_too_short_for_the_schedule_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 20 s"):
        fault_schedule(1, 10, LEASE_S)


@pytest.mark.parametrize("seconds", [20.0, 60.0])
def test_two_kills_of_one_service_are_apart_so_the_second_finds_it_running(seconds: float) -> None:
    for seed in range(200):
        kills: dict[str, list[float]] = {}
        for fault in fault_schedule(seed, seconds, LEASE_S):
            if fault.action == "kill":
                kills.setdefault(fault.target, []).append(fault.at)
        for target, times in kills.items():
            ordered = sorted(times)
            gaps = [b - a for a, b in itertools.pairwise(ordered)]
            assert all(g >= KILL_GAP_S - 0.01 for g in gaps), (seed, target, times)


def test_each_relay_stops_itself_at_two_moments_that_matter_decided_by_the_seed() -> None:
    specs = self_pauses(7, 3000)
    assert specs == self_pauses(7, 3000) and specs != self_pauses(8, 3000)
    assert set(specs) == set(RELAYS)
    points = [parse(spec) for spec in specs.values()]
    assert sorted(name for p in points for name in p) == sorted(SELF_PAUSE_EVERY)
    for named in points:  # each relay freezes around a rail write, and elsewhere
        assert sorted(name.startswith("rail.") for name in named) == [False, True]
    for named in points:
        for point in named.values():
            assert point.signal == signal.SIGSTOP
            assert FIRST_SELF_PAUSE[0] <= point.nth <= FIRST_SELF_PAUSE[1]
            assert point.every is not None and point.every >= 5


def test_with_sepa_the_bank_has_its_faults_and_kills_and_relays_die_after_an_upload() -> None:
    plain = fault_schedule(7, 90.0, 6.0)
    both = fault_schedule(7, 90.0, 6.0, ("sim", "sepa"))
    assert [f for f in both if f.target != "banksim"] == plain  # the rest as it was
    bank = [f for f in both if f.target == "banksim"]
    assert [(f.action, f.detail) for f in bank if f.action == "bank_faults"] == [
        ("bank_faults", "chaos"),
        ("bank_faults", "none"),
    ]
    assert sum(f.action == "kill" for f in bank) == kills_per_service(90.0)
    pauses = self_pauses(7, 1000, ("sim", "sepa"))
    assert self_pauses(7, 1000) == {
        relay: spec.split(",files.")[0] for relay, spec in pauses.items()
    }
    assert all("files.after_upload=kill@" in spec for spec in pauses.values())
