"""A publisher's promise to writers (services/relay/outbox_wake.py), on a clock of the test's:
stamped only while wake-ups keep finding rows and half the promise has run, and kept looked
after on the publisher's own clock until the promise and as long again have passed."""

from __future__ import annotations

from services.relay.outbox_wake import Wakeups


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def wakeups(clock: Clock) -> Wakeups:
    return Wakeups(
        poll_seconds=1.0, promise_seconds=0.05, look_seconds=0.01, busy_rows=20, clock=clock
    )


def test_an_idle_publisher_promises_nothing_and_waits_for_notifications_or_the_poll() -> None:
    clock = Clock()
    w = wakeups(clock)
    assert not w.stamp_due(0) and not w.stamp_due(19)
    assert w.timeout() == 1.0


def test_a_busy_publisher_stamps_again_only_once_half_the_promise_has_run() -> None:
    clock = Clock()
    w = wakeups(clock)
    assert w.stamp_due(20)
    w.stamped()
    clock.now += 0.02
    assert not w.stamp_due(500)  # 20 ms of 50: the promise stands long enough
    clock.now += 0.006
    assert w.stamp_due(500)


def test_it_looks_on_its_own_clock_until_the_promise_and_as_long_again_have_passed() -> None:
    clock = Clock()
    w = wakeups(clock)
    w.stamped()
    for elapsed in (0.0, 0.049, 0.099):
        clock.now = 100.0 + elapsed
        assert w.timeout() == 0.01, elapsed  # a writer that saw the promise may commit late
    clock.now = 100.0 + 0.1
    assert w.timeout() == 1.0
