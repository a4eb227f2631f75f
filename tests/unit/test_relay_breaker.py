"""A rail's circuit breaker: a run of unanswered calls stops claims for a cool-down, an answer
closes it, and a failure while half-open opens it again for longer."""

from __future__ import annotations

from services.domain.rail import RailOutcome
from services.relay.breaker import BreakerPolicy, CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def breaker() -> tuple[CircuitBreaker, Clock]:
    clock = Clock()
    policy = BreakerPolicy(threshold=3, cooldown=2.0, max_cooldown=5.0)
    return CircuitBreaker(policy, clock), clock


def test_a_run_of_failures_opens_it_and_an_answer_in_between_does_not() -> None:
    b, _ = breaker()
    for outcome in (RailOutcome.RETRYABLE, RailOutcome.AMBIGUOUS, RailOutcome.REFUSED):
        b.record(outcome, b.generation)
    b.record(RailOutcome.RETRYABLE, b.generation)
    b.record(RailOutcome.RETRYABLE, b.generation)
    assert not b.is_open  # a refusal is an answer: the run started again after it
    b.record(RailOutcome.AMBIGUOUS, b.generation)
    assert b.is_open


def test_it_half_opens_after_the_cooldown_and_backs_off_while_the_rail_stays_down() -> None:
    b, clock = breaker()
    for _ in range(3):
        b.record(RailOutcome.RETRYABLE, b.generation)
    clock.now = 1.9
    assert b.is_open
    clock.now = 2.0
    assert not b.is_open  # half-open: one round goes out
    b.record(RailOutcome.RETRYABLE, b.generation)  # one failure is enough now
    clock.now = 5.9
    assert b.is_open  # open for 4 s this time
    clock.now = 6.0
    b.record(RailOutcome.AMBIGUOUS, b.generation)
    clock.now = 10.9
    assert b.is_open  # 8 s would pass the cap of 5 s
    clock.now = 11.0
    b.record(RailOutcome.ACCEPTED, b.generation)
    assert not b.is_open
    for _ in range(2):
        b.record(RailOutcome.RETRYABLE, b.generation)
    assert not b.is_open  # closed again: a fresh run of three is needed


def test_outcomes_of_calls_sent_before_it_opened_count_for_nothing() -> None:
    b, clock = breaker()
    sent_before = b.generation
    for _ in range(3):  # seven calls in flight at once; three failures open it
        b.record(RailOutcome.AMBIGUOUS, sent_before)
    clock.now = 2.0  # half-open: the late failures of the other four come back now
    for _ in range(4):
        b.record(RailOutcome.AMBIGUOUS, sent_before)
    assert not b.is_open  # the first cool-down, not doubled once per late failure
    b.record(RailOutcome.ACCEPTED, sent_before)  # nor does a late answer close it
    b.record(RailOutcome.RETRYABLE, b.generation)  # the half-open round fails: it doubles
    clock.now = 5.9
    assert b.is_open
