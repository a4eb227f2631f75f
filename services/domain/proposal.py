"""Maker-checker: an operator action proposed by one operator and decided by another; pure.

    from      to         by
    pending   approved   a different operator approving, the action done
    pending   failed     a different operator approving, the action refused (the rail
                         contradicts it, or its item changed)
    pending   rejected   a different operator refusing it
    pending   withdrawn  its proposer taking it back
    pending   expired    nobody, once it is older than the configured age: a decision that
                         comes later finds it expired, whoever makes it
    any other (final)

The proposer never approves or rejects their own proposal, and nobody but the proposer
withdraws it. Whether an approval ends `approved` or `failed` is the action's answer, known
only once it was tried; `decide` says only that the approval may go ahead.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from enum import StrEnum
from typing import NamedTuple

from services.domain.settlement import DomainError

DEFAULT_MAX_AGE_SECONDS = 86_400


class ProposedAction(StrEnum):
    """What a proposal would do; the names are the audit rows' `action`."""

    REVIEW_RESOLVE = "review.resolve"
    BREAK_RESOLVE = "break.resolve"
    INBOX_REPLAY = "inbox.replay"
    POLICY_TWO_PERSON = "policy.two_person"


class ProposalStatus(StrEnum):
    """Where a proposal stands."""

    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"
    FAILED = "failed"
    EXPIRED = "expired"


class Move(StrEnum):
    """What an operator does with a pending proposal."""

    APPROVE = "approve"
    REJECT = "reject"
    WITHDRAW = "withdraw"


_P = ProposalStatus
TRANSITIONS: Mapping[ProposalStatus, frozenset[ProposalStatus]] = {
    _P.PENDING: frozenset({_P.APPROVED, _P.FAILED, _P.REJECTED, _P.WITHDRAWN, _P.EXPIRED}),
    **{final: frozenset() for final in _P if final is not _P.PENDING},
}
# Where each move goes; an approval's APPROVED becomes FAILED when the action is refused.
_TARGETS: Mapping[Move, ProposalStatus] = {
    Move.APPROVE: _P.APPROVED,
    Move.REJECT: _P.REJECTED,
    Move.WITHDRAW: _P.WITHDRAWN,
}


class ProposalRefused(DomainError):
    """The move is not allowed on this proposal by this operator; `code` names the rule."""

    code = "proposal_refused"


class AlreadyDecided(ProposalRefused):
    """The proposal is final: approved, rejected, withdrawn, failed or expired."""

    code = "proposal_decided"


class SameOperator(ProposalRefused):
    """The proposer tried to approve or reject their own proposal."""

    code = "same_operator"


class NotTheProposer(ProposalRefused):
    """Someone other than the proposer tried to withdraw it."""

    code = "not_proposer"


class Pending(NamedTuple):
    """A proposal as a decision finds it."""

    status: ProposalStatus
    proposed_by: str  # the maker: the operator who proposed it
    proposed_at: datetime  # when, timezone-aware


def is_transition_valid(source: ProposalStatus, target: ProposalStatus) -> bool:
    """Whether a proposal may go from `source` to `target`."""
    return target in TRANSITIONS[source]


def is_expired(proposed_at: datetime, now: datetime, max_age: timedelta) -> bool:
    """Whether a proposal made at `proposed_at` is too old to be decided at `now`."""
    return now - proposed_at >= max_age


def decide(
    proposal: Pending, move: Move, operator: str, now: datetime, max_age: timedelta
) -> ProposalStatus:
    """The status `operator`'s `move` takes `proposal` to at `now`: EXPIRED when it came too
    late (whoever moved), else the move's; ProposalRefused when the move is not theirs."""
    if proposal.status is not ProposalStatus.PENDING:
        raise AlreadyDecided(f"the proposal is {proposal.status} already")
    if is_expired(proposal.proposed_at, now, max_age):
        return ProposalStatus.EXPIRED
    if move is Move.WITHDRAW:
        if operator != proposal.proposed_by:
            raise NotTheProposer(f"only {proposal.proposed_by}, who proposed it, may withdraw it")
    elif operator == proposal.proposed_by:
        raise SameOperator(f"{operator} proposed it; a different operator must {move} it")
    return _TARGETS[move]


def after_action(done: bool) -> ProposalStatus:
    """An approved proposal's final status once its action was tried: done or refused."""
    return ProposalStatus.APPROVED if done else ProposalStatus.FAILED
