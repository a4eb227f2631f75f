"""The front door of operator actions. The HTTP routes, the console and the commands each
hold an `OperationsDesk` and go through it, so an action is read, proposed or done, and
refused, the same way whichever surface asked: with two-person mode off it is done at once,
on it is proposed for a second operator, whose approval does it (approvals.py); the actions
themselves are in actions.py."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from services.domain.proposal import Move, ProposalStatus
from services.operations import approvals
from services.operations.actions import ActionName
from services.operations.approval_policy import Policy
from services.operations.approvals import Submitted
from services.operations.rail_lookup import RailLookup
from services.platform.clock import Clock, utc_now


class OperationsDesk:
    """Operator actions and the decisions on proposals, over one pool and one rail lookup."""

    def __init__(
        self, pool: asyncpg.Pool, rail: RailLookup, policy: Policy, clock: Clock = utc_now
    ) -> None:
        self.pool, self.rail, self.policy, self.clock = pool, rail, policy, clock

    async def act(
        self,
        action: ActionName,
        item: str,
        payload: Mapping[str, Any],
        *,
        reason: str | None,
        operator: str,
    ) -> Submitted:
        """`action` on `item` as `operator`: done now, or proposed in two-person mode (an
        action that needs no second operator is done now all the same)."""
        return await approvals.submit(
            self.pool,
            self.rail,
            action,
            item,
            payload,
            reason=reason,
            operator=operator,
            now=self.clock(),
            two_person=self.policy.two_person,
            max_age=self.policy.max_age,
        )

    async def decide(
        self, move: Move, proposal: str, *, operator: str, reason: str | None = None
    ) -> dict[str, Any]:
        """Approve (its action done now), reject (with `reason`, if given) or withdraw a
        proposal as `operator`; the proposal after."""
        now, max_age = self.clock(), self.policy.max_age
        async with self.pool.acquire() as conn:
            if move is Move.APPROVE:
                return await approvals.approve(
                    conn, self.rail, proposal, operator=operator, now=now, max_age=max_age
                )
            if move is Move.REJECT:
                return await approvals.reject(
                    conn, proposal, operator=operator, now=now, reason=reason, max_age=max_age
                )
            return await approvals.withdraw(
                conn, proposal, operator=operator, now=now, max_age=max_age
            )

    async def proposals(
        self, *, status: ProposalStatus | None, after: int = 0, limit: int = approvals.MAX_PAGE
    ) -> list[dict[str, Any]]:
        """Proposals with id above `after` in `status` (None: any), by id."""
        return await approvals.list_proposals(
            self.pool,
            now=self.clock(),
            status=status,
            after=after,
            limit=limit,
            max_age=self.policy.max_age,
        )
