"""What every operator action is (actions.py registers them, approvals.py proposes and does
them): how its request is read (`check`), which item it names (`target`), how it is done
(`perform`), and whether two-person mode holds it for a second operator (`checked`)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, NamedTuple, Protocol

import asyncpg

from services.operations.errors import ReasonMissing
from services.operations.rail_lookup import RailLookup


class Doing(NamedTuple):
    """One action being done: on which item, with what, by whom (approved by whom), when."""

    item: str  # the id as the action's own function takes it
    payload: Mapping[str, Any]  # as `check` kept it
    reason: str | None
    operator: str  # whose action it is: the proposer, when a proposal is approved
    now: datetime
    approver: str | None = None  # the second operator who approved it, if any


class Operator(NamedTuple):
    """Who does an action, why, when, and who approved it."""

    name: str
    reason: str
    now: datetime
    approver: str | None = None


def operator_of(doing: Doing) -> Operator:
    """Who does `doing`, its reason required; ReasonMissing without one."""
    return Operator(doing.operator, required(doing.reason), doing.now, doing.approver)


class Action(Protocol):
    """One kind of operator action."""

    @property
    def checked(self) -> bool:
        """Whether two-person mode holds the action for a second operator (False: it moves
        no money and closes nothing, so it is done at once)."""
        ...

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        """The payload and reason the action keeps, read strictly; BadRequest or
        ReasonMissing."""
        ...

    async def target(self, conn: asyncpg.Connection, item: str) -> str:
        """The canonical target of `item` (an id as an operator gives it); NotFound when there
        is no such item, the action's own refusal when its status refuses the action."""
        ...

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        """Do the action now, audited as its operator's (and its approver's, if any); its
        result as the HTTP routes answer it."""
        ...


def required(reason: str | None) -> str:
    """`reason` when it says something; ReasonMissing otherwise."""
    if not reason or not reason.strip():
        raise ReasonMissing()
    return reason
