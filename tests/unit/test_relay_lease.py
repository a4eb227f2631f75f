"""A claim's lease as the claiming process reads it from its own clock."""

from __future__ import annotations

from services.relay.lease import LeaseClock


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_call_may_start_only_while_it_would_end_inside_the_lease() -> None:
    clock = Clock()
    lease = LeaseClock(lease_seconds=30.0, call_seconds=10.0, clock=clock)
    clock.now += 19.9
    assert lease.time_for_a_call()
    clock.now += 0.1  # a call started now could outlive the lease
    assert not lease.time_for_a_call()


def test_a_lease_no_longer_than_a_call_never_allows_one() -> None:
    assert not LeaseClock(lease_seconds=5.0, call_seconds=5.0, clock=Clock()).time_for_a_call()
