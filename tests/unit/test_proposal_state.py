"""The maker-checker state machine: only a different operator approves or rejects, only the
proposer withdraws, a decision is final, and a proposal past its age expires whoever moves;
two-person mode is on in production mode (refused off) and off locally unless set."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.domain.errors import ConfigError
from services.domain.proposal import (
    TRANSITIONS,
    AlreadyDecided,
    Move,
    NotTheProposer,
    Pending,
    ProposalRefused,
    ProposalStatus,
    SameOperator,
    after_action,
    decide,
    is_transition_valid,
)
from services.operations.approval_policy import Policy, policy_of
from services.platform.settings import load_settings
from tests.production_env import production as production_env

P = ProposalStatus
T0 = datetime(2026, 11, 26, 12, tzinfo=UTC)
AGE = timedelta(hours=24)
PENDING = Pending(P.PENDING, "alice", T0)


def test_a_different_operator_approves_or_rejects() -> None:
    assert decide(PENDING, Move.APPROVE, "bob", T0, AGE) is P.APPROVED
    assert decide(PENDING, Move.REJECT, "bob", T0 + timedelta(hours=23), AGE) is P.REJECTED


@pytest.mark.parametrize("move", [Move.APPROVE, Move.REJECT])
def test_the_proposer_never_approves_or_rejects_their_own(move: Move) -> None:
    with pytest.raises(SameOperator) as refused:
        decide(PENDING, move, "alice", T0, AGE)
    assert refused.value.code == "same_operator"


def test_only_the_proposer_withdraws() -> None:
    assert decide(PENDING, Move.WITHDRAW, "alice", T0, AGE) is P.WITHDRAWN
    with pytest.raises(NotTheProposer) as refused:
        decide(PENDING, Move.WITHDRAW, "bob", T0, AGE)
    assert refused.value.code == "not_proposer"


@pytest.mark.parametrize("move", list(Move))
@pytest.mark.parametrize("operator", ["alice", "bob"])
def test_a_proposal_past_its_age_expires_whoever_moves(move: Move, operator: str) -> None:
    assert decide(PENDING, move, operator, T0 + AGE, AGE) is P.EXPIRED
    # Just inside its age, the rules of the move apply again.
    inside = T0 + AGE - timedelta(microseconds=1)
    assert decide(Pending(P.PENDING, "alice", T0), Move.APPROVE, "bob", inside, AGE) is P.APPROVED


@pytest.mark.parametrize("status", [s for s in P if s is not P.PENDING])
@pytest.mark.parametrize("move", list(Move))
def test_a_decided_proposal_is_final(status: ProposalStatus, move: Move) -> None:
    with pytest.raises(AlreadyDecided) as refused:
        decide(Pending(status, "alice", T0), move, "bob", T0, AGE)
    assert refused.value.code == "proposal_decided"
    assert TRANSITIONS[status] == frozenset()


def test_an_approval_ends_approved_when_done_and_failed_when_refused() -> None:
    assert (after_action(True), after_action(False)) == (P.APPROVED, P.FAILED)


@given(
    status=st.sampled_from(list(P)),
    move=st.sampled_from(list(Move)),
    operator=st.sampled_from(["alice", "bob", "carol"]),
    age_seconds=st.integers(min_value=0, max_value=3 * 86_400),
)
def test_no_move_reaches_a_status_the_table_forbids(
    status: ProposalStatus, move: Move, operator: str, age_seconds: int
) -> None:
    proposal = Pending(status, "alice", T0)
    try:
        target = decide(proposal, move, operator, T0 + timedelta(seconds=age_seconds), AGE)
    except ProposalRefused:
        return
    assert is_transition_valid(status, target)
    assert is_transition_valid(status, after_action(False)) or target is not P.APPROVED
    if target in (P.APPROVED, P.REJECTED):
        assert operator != proposal.proposed_by
    if target is P.WITHDRAWN:
        assert operator == proposal.proposed_by


def test_two_person_mode_is_on_in_production_and_off_locally_unless_set() -> None:
    assert not load_settings({}).two_person_required
    production = production_env()
    assert load_settings(production).two_person_required
    with pytest.raises(ConfigError, match=r"^SETTLE_TWO_PERSON: is false"):
        load_settings({**production, "SETTLE_TWO_PERSON": "false"})
    assert load_settings({"SETTLE_TWO_PERSON": "true"}).two_person_required
    policy = policy_of(load_settings({"SETTLE_PROPOSAL_MAX_AGE_SECONDS": "3600"}))
    assert policy == Policy(False, timedelta(hours=1))
    with pytest.raises(ConfigError, match="SETTLE_PROPOSAL_MAX_AGE_SECONDS"):
        load_settings({"SETTLE_PROPOSAL_MAX_AGE_SECONDS": "0"})
