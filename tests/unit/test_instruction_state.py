"""The rail instruction's state machine: only what SPEC 4.2 allows, whatever the events, and the
dispatcher's SQL guards exactly what the table says."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.domain.instruction import (
    NEXT,
    SETTLEMENT_AFTER,
    TERMINAL,
    IllegalInstructionEvent,
    InstructionEvent,
    InstructionStatus,
    end_of_budget,
    is_transition_valid,
    next_status,
    sources_of,
    target_of,
)
from services.domain.instruction import InstructionEvent as E
from services.domain.instruction import InstructionStatus as I
from services.domain.settlement import DomainError, SettlementStatus
from services.domain.settlement import is_transition_valid as settlement_may
from services.relay import dispatch, dispatch_sql

SPEC = {
    (I.PENDING, E.CLAIM): I.PROCESSING,
    (I.PENDING, E.RECLAIM): I.PROCESSING,
    (I.PROCESSING, E.RECLAIM): I.PROCESSING,
    (I.PROCESSING, E.SCHEDULE_RETRY): I.PROCESSING,
    (I.PROCESSING, E.ACCEPT): I.TRANSFERRED,
    (I.PROCESSING, E.REFUSE): I.FAILED,
    (I.PROCESSING, E.GIVE_UP): I.FAILED,
    (I.PROCESSING, E.REFER): I.NEEDS_REVIEW,
}


def test_statuses_are_the_columns_values_and_the_table_is_spec_4_2() -> None:
    assert {str(s) for s in I} == {
        "pending",
        "processing",
        "transferred",
        "failed",
        "needs_review",
    }
    assert dict(NEXT) == SPEC
    assert {s for s in I if not any(src == s for src, _ in NEXT)} == TERMINAL


@pytest.mark.parametrize(("status", "event"), [(s, e) for s in I for e in E])
def test_every_event_outside_the_table_is_illegal_and_says_what_is_allowed(
    status: InstructionStatus, event: InstructionEvent
) -> None:
    if (status, event) in SPEC:
        assert next_status(status, event) is SPEC[(status, event)]
        return
    with pytest.raises(IllegalInstructionEvent) as raised:
        next_status(status, event)
    assert isinstance(raised.value, DomainError) and not raised.value.retriable
    assert str(status) in str(raised.value) and str(event) in str(raised.value)


@given(st.lists(st.sampled_from(list(E)), max_size=40))
def test_no_event_sequence_reaches_an_illegal_state_or_leaves_a_terminal_one(
    events: list[InstructionEvent],
) -> None:
    status, path = I.PENDING, [I.PENDING]
    settlement = SettlementStatus.ACCEPTED  # driven by the dispatcher alone here
    for event in events:
        try:
            after = next_status(status, event)
        except IllegalInstructionEvent:
            assert (status, event) not in SPEC
            continue  # nothing changes
        assert status not in TERMINAL
        assert is_transition_valid(status, after) and after is target_of(event)
        if after is I.TRANSFERRED:
            assert event is E.ACCEPT  # only the rail's acceptance records a transfer
        # The settlement move each event asks for is one the settlement's own table allows
        # (a reclaim in processing asks none: its settlement is dispatching already).
        move = SETTLEMENT_AFTER.get(event)
        if move is not None and not (event is E.RECLAIM and status is I.PROCESSING):
            assert settlement_may(settlement, move), (settlement, event, move)
            settlement = move
        status = after
        path.append(status)
    terminal_at = next((n for n, s in enumerate(path) if s in TERMINAL), None)
    if terminal_at is not None:
        assert set(path[terminal_at:]) == {path[terminal_at]}


def test_the_end_of_the_budget_refers_whatever_the_rail_may_have_done() -> None:
    assert target_of(end_of_budget(ambiguous=True)) is I.NEEDS_REVIEW
    assert target_of(end_of_budget(ambiguous=False)) is I.FAILED
    assert SETTLEMENT_AFTER[end_of_budget(True)] is SettlementStatus.NEEDS_REVIEW


# --- The SQL against the table --------------------------------------------------------------

STATUS_TEST = re.compile(r"\bstatus\s*(?:=\s*'(\w+)'|IN\s*\(([^)]*)\))", re.IGNORECASE)
SET_CLAUSE = re.compile(r"\bSET\b(.*?)(?=\bFROM\b|\bWHERE\b)", re.IGNORECASE | re.DOTALL)


def guarded_statuses(statement: str) -> set[str]:
    """The statuses a statement's conditions (everything but its SET list) compare with."""
    conditions = SET_CLAUSE.sub(" ", statement)
    found: set[str] = set()
    for single, listed in STATUS_TEST.findall(conditions):
        found |= {single} if single else set(re.findall(r"'(\w+)'", listed))
    return found


def set_status(statement: str) -> str | None:
    """The status literal a statement writes, "$n" for a parameter, or None if it keeps it."""
    for clause in SET_CLAUSE.findall(statement):
        written = re.search(r"\bstatus\s*=\s*('(\w+)'|\$\d+)", clause)
        if written:
            return written.group(2) or written.group(1)
    return None


@pytest.mark.parametrize("event", list(E))
def test_each_events_sql_expects_the_tables_sources_and_writes_its_target(
    event: InstructionEvent,
) -> None:
    statement = dispatch_sql.WRITES[event]
    assert guarded_statuses(statement) == {str(s) for s in sources_of(event)}
    written = set_status(statement)
    if written is None:  # the status stays: the event must lead back to where it started
        assert sources_of(event) == {target_of(event)}
    elif not written.startswith("$"):
        assert written == target_of(event)


def test_the_guard_reader_sees_a_status_added_by_hand() -> None:
    drifted = dispatch_sql.RECORD_FINAL.replace("status IN (", "status IN ('pending', ")
    assert guarded_statuses(drifted) == {"pending", "processing"}
    assert set_status(dispatch_sql.CLAIM_PENDING) == "processing"
    assert set_status(dispatch_sql.RECORD_FINAL) == "$3"


def test_the_dispatcher_names_statuses_and_events_only_through_the_enums() -> None:
    names = {str(v) for enum in (I, E, SettlementStatus) for v in enum}
    source = Path(dispatch.__file__).read_text(encoding="utf-8")
    literals = {
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    assert literals & names == set()
