"""Reconciliation breaks: stable names, only the allowed steps, and when an item is merely early."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.domain.breaks import (
    DEFAULT_RECHECK_AGES,
    TERMINAL,
    BreakNotHealable,
    BreakStatus,
    BreakType,
    IllegalBreakTransition,
    age_bucket,
    is_pending,
    is_transition_valid,
    next_recheck,
    parse_ages,
    transition,
)
from services.domain.errors import SettleError
from services.domain.settlement import ReasonRequired

B = BreakStatus
T = BreakType
ALLOWED = {(B.OPEN, B.HEALED), (B.OPEN, B.RESOLVED)}


def test_break_types_keep_their_stored_names() -> None:
    assert {t.value for t in T} == {
        "missing_at_rail",
        "unknown_at_rail",
        "duplicate_at_rail",
        "amount_mismatch",
        "currency_mismatch",
        "destination_mismatch",
        "status_drift",
        "balance_mismatch",
        "statement_gap",
        "duplicate_in_ledger",
        "overdue",
    }
    assert {s.value for s in B} == {"open", "healed", "resolved"}
    assert {B.HEALED, B.RESOLVED} == TERMINAL


@pytest.mark.parametrize(("source", "target"), [(a, b) for a in B for b in B])
def test_the_table_allows_exactly_heal_and_resolve_from_open(
    source: BreakStatus, target: BreakStatus
) -> None:
    assert is_transition_valid(source, target) == ((source, target) in ALLOWED)
    if (source, target) not in ALLOWED:
        with pytest.raises(IllegalBreakTransition) as caught:
            transition(T.STATUS_DRIFT, source, target, reason="checked at the bank")
        assert isinstance(caught.value, SettleError) and caught.value.retriable is False


def test_only_what_the_evidence_can_resolve_heals() -> None:
    evidence = {
        T.STATUS_DRIFT,
        T.STATEMENT_GAP,
        T.MISSING_AT_RAIL,
        T.UNKNOWN_AT_RAIL,
        T.AMOUNT_MISMATCH,
        T.OVERDUE,
    }
    for kind in evidence:
        assert transition(kind, B.OPEN, B.HEALED) == (B.OPEN, B.HEALED, None)
    for kind in set(T) - evidence:
        with pytest.raises(BreakNotHealable):
            transition(kind, B.OPEN, B.HEALED)


@pytest.mark.parametrize("reason", [None, "", "   "])
def test_an_operator_resolves_only_with_a_reason(reason: str | None) -> None:
    with pytest.raises(ReasonRequired):
        transition(T.AMOUNT_MISMATCH, B.OPEN, B.RESOLVED, reason)
    change = transition(T.AMOUNT_MISMATCH, B.OPEN, B.RESOLVED, "refunded by hand, ticket 42")
    assert change.target is B.RESOLVED and change.reason == "refunded by hand, ticket 42"


@given(st.lists(st.sampled_from(list(B)), max_size=6))
def test_a_break_leaves_open_once_and_keeps_where_it_ended(steps: list[BreakStatus]) -> None:
    history = [B.OPEN]
    for target in steps:
        try:
            history.append(transition(T.STATUS_DRIFT, history[-1], target, "why").target)
        except IllegalBreakTransition:
            history.append(history[-1])
    ended = [s for s in history if s is not B.OPEN]
    assert len(set(ended)) <= 1
    assert history == [B.OPEN] * (len(history) - len(ended)) + ended


def test_the_default_recheck_ages_are_seed_001s() -> None:
    assert parse_ages("1h,1d,7d,30d") == DEFAULT_RECHECK_AGES
    assert parse_ages("5s, 30s ,2m") == (5, 30, 120)


@pytest.mark.parametrize("text", ["", "1h,1h", "1d,1h", "0s", "1.5h", "-1h", "1w", "h"])
def test_recheck_ages_that_cannot_be_read_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"e\.g\. 1h"):
        parse_ages(text)


@pytest.mark.parametrize(
    ("age", "bucket", "after"),
    [
        (0, "T+0s", 3600),
        (3599, "T+0s", 3600),
        (3600, "T+1h", 86400),
        (86399, "T+1h", 86400),
        (86400, "T+1d", 7 * 86400),
        (30 * 86400, "T+30d", None),
        (400 * 86400, "T+30d", None),
    ],
)
def test_an_age_falls_in_the_bucket_of_the_last_recheck_it_reached(
    age: int, bucket: str, after: int | None
) -> None:
    assert age_bucket(age) == bucket
    assert next_recheck(age) == after


def test_an_item_is_pending_until_the_grace_period_ends() -> None:
    assert is_pending(0, grace=60) and is_pending(59, grace=60)
    assert not is_pending(60, grace=60) and not is_pending(61, grace=60)
