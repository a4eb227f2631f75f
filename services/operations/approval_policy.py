"""How operator actions are approved: by one operator, or proposed by one and approved by
another (two-person mode), and how long a proposal waits for its decision."""

from __future__ import annotations

from datetime import timedelta
from typing import NamedTuple

from services.domain.proposal import DEFAULT_MAX_AGE_SECONDS
from services.platform.authority import OperatorSection

DEFAULT_MAX_AGE = timedelta(seconds=DEFAULT_MAX_AGE_SECONDS)


class Policy(NamedTuple):
    """How operator actions are approved (SETTLE_TWO_PERSON, SETTLE_PROPOSAL_MAX_AGE_SECONDS)."""

    two_person: bool  # True: a second operator must approve each action
    max_age: timedelta  # how long a proposal waits for its decision before it expires


ONE_PERSON = Policy(False, DEFAULT_MAX_AGE)


def policy_of(settings: OperatorSection) -> Policy:
    """The approval policy the settings ask for."""
    return Policy(
        settings.two_person_required, timedelta(seconds=settings.proposal_max_age_seconds)
    )
