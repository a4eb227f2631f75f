"""`settle check` on a trail holding a step that recorded a late rail reference: the step
keeps the status, publishes `rail_reference_recorded`, and is neither a disagreement nor a
terminal status reached twice; a second real `paid` still is."""

from __future__ import annotations

from dataclasses import replace

from services.domain.settlement import RAIL_REFERENCE_RECORDED
from tests.unit.test_check_invariants import world
from tools.check.facts import DatabaseFacts, EventFact, EventLogFacts, SettlementFact
from tools.check.invariants import books_balance, events_complete, webhooks_once

# Paid by a webhook that carried no reference, then the relay's record of the rail's answer.
HISTORY = ("accepted", "dispatching", "paid", "paid")
SOURCES = (None, "accepted", "dispatching", "paid")
TYPES = ("created", "dispatching", "paid", RAIL_REFERENCE_RECORDED)


def late_reference(
    history: tuple[str, ...] = HISTORY, types: tuple[str, ...] = TYPES
) -> tuple[SettlementFact, dict[str, EventFact]]:
    seqs = tuple(range(1, len(history) + 1))
    fact = SettlementFact("s-late", "acme", 500, "EUR", "paid", None, history, seqs, SOURCES)
    events = {  # the move to dispatching publishes nothing
        f"e{n}": EventFact(n, kind, status)
        for n, kind, status in zip(seqs, types, history, strict=True)
        if kind != "dispatching"
    }
    return fact, events


def with_settlement(
    fact: SettlementFact, events: dict[str, EventFact]
) -> tuple[DatabaseFacts, EventLogFacts]:
    db, log, _ = world()
    nets = {"acme:funding:EUR": -500, "acme:paid_out:EUR": 500}
    db = replace(db, settlements={**db.settlements, fact.id: fact}, nets={**db.nets, fact.id: nets})
    log = EventLogFacts(log.topic, {**log.by_settlement, fact.id: events}, log.messages)
    return db, log


def test_a_recorded_reference_agrees_with_the_trail_and_repeats_nothing() -> None:
    db, log = with_settlement(*late_reference())
    assert events_complete(db, log).ok
    assert webhooks_once(db).ok
    assert books_balance(db).ok


def test_a_reference_step_published_as_a_second_paid_disagrees() -> None:
    db, log = with_settlement(*late_reference(types=("created", "dispatching", "paid", "paid")))
    result = events_complete(db, log)
    assert not result.ok and result.offenders == ("s-late",)


def test_paid_reached_twice_by_moves_still_breaks_webhooks_once() -> None:
    fact, events = late_reference()
    twice = fact._replace(sources=(None, "accepted", "dispatching", "dispatching"))
    db, _ = with_settlement(twice, events)
    result = webhooks_once(db)
    assert not result.ok and result.offenders == ("s-late",)
