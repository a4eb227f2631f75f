"""The guarantees of SPEC section 2 as pure functions from facts to a verdict.

Each check returns a CheckResult: whether it holds, how many things break it, the first few
offending ids, and one Finding per way it can break. Nothing here does I/O.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

from services.domain.postings import AccountKind, expected_net, holding_account
from services.domain.settlement import (
    TERMINAL,
    SettlementStatus,
    publishes_event,
    step_event_type,
)
from services.platform.config import RailKind
from tools.check.facts import (
    DatabaseFacts,
    EventFact,
    EventLogFacts,
    Offenders,
    RailFacts,
    SettlementFact,
)

FIRST = 10  # offending ids reported per finding and per check

NO_DOUBLE_EFFECT = "no_double_effect"
NOTHING_LOST = "nothing_lost"
BOOKS_BALANCE = "books_balance"
EVENTS_COMPLETE = "events_complete"
WEBHOOKS_ONCE = "webhooks_once"


class Finding(NamedTuple):
    """One way a check can break, with what broke it."""

    what: str  # e.g. "effects_over_one"
    total: int  # how many offenders
    first: tuple[str, ...]  # the first FIRST offending ids


@dataclass(frozen=True)
class CheckResult:
    """The verdict on one guarantee."""

    name: str
    ok: bool
    count: int  # offenders over all findings
    offenders: tuple[str, ...]  # the first FIRST distinct offending ids
    detail: tuple[Finding, ...]


def finding(what: str, ids: Iterable[str]) -> Finding:
    """A finding over every offending id in `ids` (listed in full, kept sorted)."""
    every = sorted(set(ids))
    return Finding(what, len(every), tuple(every[:FIRST]))


def found(what: str, offenders: Offenders) -> Finding:
    """A finding from offenders a query already counted."""
    return Finding(what, offenders.total, offenders.first[:FIRST])


def verdict(name: str, findings: Iterable[Finding]) -> CheckResult:
    """The check `name` holds when none of `findings` has an offender."""
    detail = tuple(findings)
    offenders: list[str] = []
    for f in detail:
        offenders.extend(i for i in f.first if i not in offenders)
    count = sum(f.total for f in detail)
    return CheckResult(name, count == 0, count, tuple(offenders[:FIRST]), detail)


def no_double_effect(db: DatabaseFacts, rail: RailFacts) -> CheckResult:
    """At most one effect at the rail per settlement; none where the instruction `failed` (the
    books were reversed, so money moved there would be paid without a record: the
    fail-closed rule); exactly one per `transferred` instruction when the rail's count is
    complete, but for a SEPA transfer the bank took in a file and then rejected (its
    settlement `failed`): a bank debits nothing for a rejected transfer, so none is right
    there too. (A Stripe transfer or payout the rail accepted exists there, whatever
    became of its money.)"""
    findings = [
        finding("effects_over_one", (s for s, n in rail.effects.items() if n > 1)),
        finding(
            "effects_behind_failed_instructions",
            (s for s in db.instruction_failed if rail.effects.get(s, 0) > 0),
        ),
    ]
    if rail.exhaustive:
        unmatched = (
            s
            for s in db.transferred
            if rail.effects.get(s, 0) != 1 and not (rail.effects.get(s, 0) == 0 and _failed(db, s))
        )
        findings.append(finding("transferred_without_one_effect", unmatched))
    return verdict(NO_DOUBLE_EFFECT, findings)


def _failed(db: DatabaseFacts, settlement_id: str) -> bool:
    """A SEPA settlement the bank rejected after taking its file."""
    settlement = db.settlements.get(settlement_id)
    return (
        settlement is not None
        and settlement.rail == RailKind.SEPA
        and settlement.status == SettlementStatus.FAILED
    )


def is_settled(settlement: SettlementFact) -> bool:
    """Terminal, or waiting for an operator with a reason to read."""
    if settlement.status == SettlementStatus.NEEDS_REVIEW:
        return bool(settlement.reason and settlement.reason.strip())
    return settlement.status in TERMINAL


def nothing_lost(db: DatabaseFacts) -> CheckResult:
    """Every settlement settled or under review with a reason; every outbox row published and
    every stored webhook applied or set aside with a reason, within the bound."""
    unsettled = (s.id for s in db.settlements.values() if not is_settled(s))
    return verdict(
        NOTHING_LOST,
        [
            finding("settlements_not_settled", unsettled),
            found("outbox_unpublished_beyond_bound", db.stale_outbox),
            found("webhooks_unapplied_beyond_bound", db.unapplied_webhooks),
            found("webhooks_set_aside_without_reason", db.unexplained_webhooks),
        ],
    )


def held_after(history: Iterable[str]) -> AccountKind:
    """Where the shared posting rules leave a settlement's money after `history`."""
    held = AccountKind.FUNDING
    for status in history:
        held = holding_account(SettlementStatus(status), held)
    return held


def expected_net_of(settlement: SettlementFact) -> dict[str, int]:
    """The net postings per account that the settlement's status and history imply."""
    return expected_net(
        settlement.amount,
        settlement.currency,
        settlement.tenant,
        SettlementStatus(settlement.status),
        held_in=held_after(settlement.history),
        amount_reversed=settlement.amount_reversed,
    )


def books_balance(db: DatabaseFacts) -> CheckResult:
    """Postings sum to zero per currency and per entry; balances equal their postings; each
    settlement's postings net to what its final state implies."""
    wrong_net = (
        s.id for s in db.settlements.values() if dict(db.nets.get(s.id, {})) != expected_net_of(s)
    )
    return verdict(
        BOOKS_BALANCE,
        [
            found("currencies_not_summing_to_zero", db.unbalanced_currencies),
            found("entries_not_summing_to_zero", db.unbalanced_entries),
            found("balances_differing_from_postings", db.balance_mismatches),
            finding("settlements_netting_wrong", wrong_net),
        ],
    )


def steps_of(settlement: SettlementFact) -> list[tuple[str | None, str]]:
    """The audit trail as (from, to) steps; a trail read without sources counts as moves."""
    sources = settlement.sources or (None,) * len(settlement.history)
    return list(zip(sources, settlement.history, strict=True))


def published_steps(settlement: SettlementFact) -> list[tuple[int, str | None, str]]:
    """The audit trail's steps that publish an event, as (sequence, from, to)."""
    return [
        (sequence, source, to_status)
        for sequence, (source, to_status) in zip(
            settlement.sequences, steps_of(settlement), strict=True
        )
        if publishes_event(
            SettlementStatus(source) if source is not None else None, SettlementStatus(to_status)
        )
    ]


def _events_agree(
    steps: list[tuple[int, str | None, str]], events: list[EventFact], published: int
) -> bool:
    if not published <= len(events) <= len(steps):
        return False
    for event, (sequence, source, to_status) in zip(events, steps, strict=False):
        origin = SettlementStatus(source) if source is not None else None
        expected_type = step_event_type(origin, SettlementStatus(to_status))
        if event.sequence != sequence or event.type != expected_type:
            return False
        if event.status not in (None, to_status):
            return False
    return True


def events_complete(db: DatabaseFacts, log: EventLogFacts) -> CheckResult:
    """Per settlement, the deduplicated events carry the sequences of its published steps (every
    step but a move to dispatching), in order, none left out or repeated, and tell its audit
    trail; events whose outbox row is still unpublished may be missing (nothing_lost bounds
    them), and events newer than the database snapshot are not compared."""
    gaps: list[str] = []
    disagree: list[str] = []
    for sid, settlement in db.settlements.items():
        events = sorted(log.by_settlement.get(sid, {}).values(), key=lambda e: e.sequence)
        steps = published_steps(settlement)
        sequences = [e.sequence for e in events]
        expected = [sequence for sequence, _, _ in steps]
        known = events[: len(steps)]
        # PostgreSQL is read before Kafka: events of moves made since (a late webhook) are
        # newer than the snapshot and have nothing to be compared with; their sequences must
        # still go on rising without a repeat.
        if sequences[: len(known)] != expected[: len(known)] or any(
            later <= earlier for earlier, later in pairwise(sequences)
        ):
            gaps.append(sid)
            continue
        first_unpublished = db.first_unpublished.get(sid)
        published = sum(1 for s in expected if first_unpublished is None or s < first_unpublished)
        if not _events_agree(steps, known, published):
            disagree.append(sid)
    unknown = (sid for sid in log.by_settlement if sid not in db.settlements)
    return verdict(
        EVENTS_COMPLETE,
        [
            finding("sequence_gaps_or_repeats", gaps),
            finding("events_differing_from_transitions", disagree),
            finding("events_of_unknown_settlements", unknown),
            finding("undecodable_messages", log.undecodable),
        ],
    )


def webhooks_once(db: DatabaseFacts) -> CheckResult:
    """No rail change applied twice, and no settlement reaching a terminal status twice (a step
    recording a rail reference keeps the status: it reaches nothing)."""
    twice = (
        s.id
        for s in db.settlements.values()
        if any(
            n > 1
            for status, n in Counter(to for src, to in steps_of(s) if src != to).items()
            if status in TERMINAL
        )
    )
    return verdict(
        WEBHOOKS_ONCE,
        [
            found("rail_changes_applied_twice", db.webhooks_applied_twice),
            finding("terminal_transitions_repeated", twice),
        ],
    )


def run_all(db: DatabaseFacts, log: EventLogFacts, rail: RailFacts) -> list[CheckResult]:
    """Every check, in the order of SPEC section 2."""
    return [
        no_double_effect(db, rail),
        nothing_lost(db),
        books_balance(db),
        events_complete(db, log),
        webhooks_once(db),
    ]


def all_hold(results: Iterable[CheckResult]) -> bool:
    """True when every check holds."""
    return all(r.ok for r in results)


def by_name(results: Iterable[CheckResult]) -> Mapping[str, CheckResult]:
    """The results keyed by check name."""
    return {r.name: r for r in results}
