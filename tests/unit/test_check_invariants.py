"""The invariant checks as pure functions: a healthy world holds, each planted fault is named."""

from __future__ import annotations

from dataclasses import replace

from services.domain.settlement import SettlementStatus as S
from services.domain.settlement import event_type
from tools.check.facts import (
    NONE,
    DatabaseFacts,
    EventFact,
    EventLogFacts,
    Offenders,
    RailFacts,
    SettlementFact,
)
from tools.check.invariants import (
    FIRST,
    CheckResult,
    books_balance,
    events_complete,
    expected_net_of,
    no_double_effect,
    nothing_lost,
    run_all,
    webhooks_once,
)

PAID = ("accepted", "dispatching", "submitted", "paid")
FAILED = ("accepted", "dispatching", "failed")
REVIEW = ("accepted", "dispatching", "submitted", "needs_review")


def settlement(sid: str, history: tuple[str, ...], reason: str | None = None) -> SettlementFact:
    seqs = tuple(range(1, len(history) + 1))
    return SettlementFact(sid, "acme", 500, "EUR", history[-1], reason, history, seqs)


def events_of(s: SettlementFact) -> dict[str, EventFact]:
    """The events the relay publishes for `s`'s trail: every step but the move to dispatching."""
    return {
        f"{s.id}-e{n}": EventFact(n, event_type(S(status)), status)
        for n, status in zip(s.sequences, s.history, strict=True)
        if status != "dispatching"
    }


def finding_of(result: CheckResult, what: str) -> tuple[int, tuple[str, ...]]:
    """How many offenders the finding `what` counts, and the first of them."""
    return next((f.total, f.first) for f in result.detail if f.what == what)


def world() -> tuple[DatabaseFacts, EventLogFacts, RailFacts]:
    settlements = [
        settlement("s-paid", PAID),
        settlement("s-failed", FAILED, reason="account_closed"),
        settlement("s-review", REVIEW, reason="rail unclear"),
    ]
    db = DatabaseFacts(
        settlements={s.id: s for s in settlements},
        nets={s.id: expected_net_of(s) for s in settlements if expected_net_of(s)},
        transferred=frozenset({"s-paid", "s-review"}),
        first_unpublished={},
        stale_outbox=NONE,
        unapplied_webhooks=NONE,
        unexplained_webhooks=NONE,
        unbalanced_currencies=NONE,
        unbalanced_entries=NONE,
        balance_mismatches=NONE,
        webhooks_applied_twice=NONE,
    )
    log = EventLogFacts("settlement.events", {s.id: events_of(s) for s in settlements}, 10)
    rail = RailFacts({"s-paid": 1, "s-review": 1}, exhaustive=True, source="simulator")
    return db, log, rail


def test_a_healthy_world_holds_every_guarantee() -> None:
    results = run_all(*world())
    assert [r.name for r in results] == [
        "no_double_effect",
        "nothing_lost",
        "books_balance",
        "events_complete",
        "webhooks_once",
    ]
    assert all(r.ok and r.count == 0 and r.offenders == () for r in results)


def test_expected_nets_follow_the_shared_posting_rules() -> None:
    db, _, _ = world()
    assert expected_net_of(db.settlements["s-paid"]) == {
        "acme:funding:EUR": -500,
        "acme:paid_out:EUR": 500,
    }
    assert expected_net_of(db.settlements["s-failed"]) == {}
    assert expected_net_of(db.settlements["s-review"]) == {
        "acme:funding:EUR": -500,
        "acme:in_transit:EUR": 500,
    }


def test_two_effects_for_one_settlement_break_no_double_effect() -> None:
    db, _, rail = world()
    result = no_double_effect(db, replace(rail, effects={"s-paid": 2, "s-review": 1}))
    assert not result.ok and result.offenders == ("s-paid",)


def test_money_moved_for_an_instruction_that_failed_breaks_no_double_effect() -> None:
    db, _, rail = world()
    failed = replace(db, instruction_failed=frozenset({"s-failed"}))
    assert no_double_effect(failed, rail).ok
    moved = replace(rail, effects={**rail.effects, "s-failed": 1}, exhaustive=False)
    assert no_double_effect(failed, moved).offenders == ("s-failed",)


def test_a_transferred_instruction_without_an_effect_is_caught_only_on_a_complete_count() -> None:
    db, _, rail = world()
    missing = replace(rail, effects={"s-paid": 1})
    assert no_double_effect(db, missing).offenders == ("s-review",)
    assert no_double_effect(db, replace(missing, exhaustive=False)).ok


def test_a_sepa_transfer_the_bank_took_then_rejected_may_have_no_effect_never_two() -> None:
    # A bank that rejects a transfer of a file it took debits nothing: its settlement failed.
    db, _, rail = world()
    on_stripe = replace(db, transferred=db.transferred | {"s-failed"})
    assert no_double_effect(on_stripe, rail).offenders == ("s-failed",)  # Stripe has one
    by_sepa = db.settlements["s-failed"]._replace(rail="sepa")
    rejected = replace(on_stripe, settlements={**db.settlements, "s-failed": by_sepa})
    assert no_double_effect(rejected, rail).ok
    assert no_double_effect(rejected, replace(rail, effects={**rail.effects, "s-failed": 1})).ok
    twice = replace(rail, effects={**rail.effects, "s-failed": 2})
    assert no_double_effect(rejected, twice).offenders == ("s-failed",)


def test_unsettled_settlements_and_lost_rows_break_nothing_lost() -> None:
    db, _, _ = world()
    stuck = settlement("s-stuck", ("accepted", "dispatching"))
    silent = settlement("s-silent", REVIEW, reason=" ")
    settlements = {**db.settlements, stuck.id: stuck, silent.id: silent}
    assert nothing_lost(replace(db, settlements=settlements)).offenders == ("s-silent", "s-stuck")
    lost = replace(db, stale_outbox=Offenders(3, ("e1", "e2", "e3")))
    result = nothing_lost(lost)
    assert (result.ok, result.count, result.offenders) == (False, 3, ("e1", "e2", "e3"))


def test_webhooks_lost_or_set_aside_without_a_reason_break_nothing_lost() -> None:
    db, _, _ = world()
    lost = replace(db, unapplied_webhooks=Offenders(2, ("evt_1", "evt_2")))
    unexplained = replace(db, unexplained_webhooks=Offenders(1, ("evt_3",)))
    assert finding_of(nothing_lost(lost), "webhooks_unapplied_beyond_bound") == (
        2,
        ("evt_1", "evt_2"),
    )
    assert finding_of(nothing_lost(unexplained), "webhooks_set_aside_without_reason") == (
        1,
        ("evt_3",),
    )
    assert not nothing_lost(lost).ok and not nothing_lost(unexplained).ok


def test_events_of_unknown_settlements_or_undecodable_break_events_complete() -> None:
    db, log, _ = world()
    stray = settlement("s-stray", PAID)
    strays = replace(log, by_settlement={**log.by_settlement, stray.id: events_of(stray)})
    garbled = replace(log, undecodable=("0:7", "2:1"))
    assert finding_of(events_complete(db, strays), "events_of_unknown_settlements") == (
        1,
        ("s-stray",),
    )
    assert finding_of(events_complete(db, garbled), "undecodable_messages") == (
        2,
        ("0:7", "2:1"),
    )
    assert events_complete(db, garbled).offenders == ("0:7", "2:1")


def test_postings_netting_wrong_for_the_final_state_break_books_balance() -> None:
    db, _, _ = world()
    nets = {**db.nets, "s-paid": {"acme:funding:EUR": -500, "acme:in_transit:EUR": 500}}
    assert books_balance(replace(db, nets=nets)).offenders == ("s-paid",)
    failed_with_money = {**db.nets, "s-failed": {"acme:funding:EUR": -1, "acme:payable:EUR": 1}}
    assert books_balance(replace(db, nets=failed_with_money)).offenders == ("s-failed",)
    unbalanced = replace(db, unbalanced_entries=Offenders(1, ("entry-1",)))
    assert books_balance(unbalanced).offenders == ("entry-1",)


def test_a_gap_a_missing_event_or_a_wrong_type_break_events_complete() -> None:
    db, log, _ = world()
    events = dict(log.by_settlement)
    events["s-paid"] = {
        k: e for k, e in events_of(db.settlements["s-paid"]).items() if e.sequence != 3
    }
    events["s-failed"] = {
        k: e for k, e in events_of(db.settlements["s-failed"]).items() if e.sequence != 3
    }
    wrong = events_of(db.settlements["s-review"])
    wrong["s-review-e4"] = EventFact(4, "paid", "paid")
    events["s-review"] = wrong
    result = events_complete(db, replace(log, by_settlement=events))
    detail = {f.what: f.first for f in result.detail}
    assert detail["sequence_gaps_or_repeats"] == ("s-paid",)
    assert detail["events_differing_from_transitions"] == ("s-failed", "s-review")


def test_events_still_in_the_outbox_may_be_missing_from_kafka() -> None:
    db, log, _ = world()
    events = dict(log.by_settlement)
    events["s-paid"] = {
        k: e for k, e in events_of(db.settlements["s-paid"]).items() if e.sequence < 4
    }
    trimmed = replace(log, by_settlement=events)
    assert not events_complete(db, trimmed).ok
    assert events_complete(replace(db, first_unpublished={"s-paid": 4}), trimmed).ok


def test_events_of_moves_made_after_the_database_was_read_are_not_a_disagreement() -> None:
    db, log, _ = world()
    later = settlement("s-paid", (*PAID, "reversed"))
    events = {**log.by_settlement, "s-paid": events_of(later)}
    assert events_complete(db, replace(log, by_settlement=events)).ok
    gap = {k: e for k, e in events_of(later).items() if e.sequence != 4}
    gapped = replace(log, by_settlement={**log.by_settlement, "s-paid": gap})
    assert events_complete(db, gapped).offenders == ("s-paid",)


def test_a_sequence_twice_under_two_event_ids_is_a_repeat() -> None:
    db, log, _ = world()
    events = dict(log.by_settlement)
    events["s-paid"] = {**events["s-paid"], "other-id": EventFact(3, "submitted", "submitted")}
    assert events_complete(db, replace(log, by_settlement=events)).offenders == ("s-paid",)
    assert events_complete(db, log).ok


def test_a_second_paid_transition_or_twice_applied_change_break_webhooks_once() -> None:
    db, _, _ = world()
    twice = settlement("s-twice", (*PAID, "paid"))
    assert webhooks_once(
        replace(db, settlements={**db.settlements, twice.id: twice})
    ).offenders == ("s-twice",)
    applied = replace(db, webhooks_applied_twice=Offenders(1, ("s-review",)))
    assert webhooks_once(applied).offenders == ("s-review",)


def test_offenders_are_cut_to_the_first_few_but_counted_in_full() -> None:
    db, _, rail = world()
    many = {f"s-{n:03}": 2 for n in range(25)}
    result = no_double_effect(db, replace(rail, effects={**rail.effects, **many}))
    assert result.count == 25 and len(result.offenders) == FIRST
    assert result.offenders[0] == "s-000"


def partly_reversed(sid: str, amount_reversed: int) -> SettlementFact:
    history = (*PAID, "partly_reversed", "partly_reversed")
    s = settlement(sid, history)
    return s._replace(sources=(None, *history[:-1]), amount_reversed=amount_reversed)


def test_a_partly_reversed_settlement_is_final_and_nets_to_what_did_not_come_back() -> None:
    db, log, rail = world()
    s = partly_reversed("s-part", 200)
    assert expected_net_of(s) == {"acme:funding:EUR": -300, "acme:paid_out:EUR": 300}
    db = replace(
        db,
        settlements={**db.settlements, s.id: s},
        nets={**db.nets, s.id: expected_net_of(s)},
    )
    log = replace(log, by_settlement={**log.by_settlement, s.id: events_of(s)})
    assert all(r.ok for r in run_all(db, log, replace(rail, effects={**rail.effects, s.id: 1})))
    # Booked as a full reversal, or as no reversal at all: the books do not net to its state.
    for wrong in ({}, {"acme:funding:EUR": -500, "acme:paid_out:EUR": 500}):
        assert books_balance(replace(db, nets={**db.nets, s.id: wrong})).offenders == ("s-part",)
