"""The actions an operator takes on stuck money, each in one place: how its request is read
(`check`), which item it names (`target`, canonical, so that two proposals for one item are
one however its id was written) and how it is done (`perform`, audited). Every surface (the
HTTP routes, the console, the commands) and maker-checker reach them through `ACTIONS`.

A target names its item as `settlement:<uuid>`, `break:<id>` or `inbox:<row id>`. The item
must exist, in a status its action takes, when the action is asked for; the rail is asked
only when the action is done. The work on a break beyond resolving it (write off, adjust,
correct, match, assign, comment, reopen) is in break_actions.py, registered here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.break_work import BreakAction
from services.domain.breaks import BreakStatus
from services.domain.instruction import Resolution
from services.domain.proposal import ProposedAction
from services.domain.settlement import SettlementStatus
from services.inbox import errors as inbox_errors
from services.inbox.operator import replay, replayable_id
from services.operations import breaks, review
from services.operations.action_base import Action, Doing, required
from services.operations.break_actions import BREAK_ACTIONS
from services.operations.errors import BadRequest, NotFound, OperationsError, Refused
from services.operations.policy import SetTwoPerson
from services.operations.rail_lookup import RailLookup
from services.operations.verdict import NOT_IN_REVIEW

# What an approved action may answer instead of doing it: refusals, never "try again".
ACTION_REFUSALS = (OperationsError, inbox_errors.InboxError)
ActionName = ProposedAction | BreakAction
__all__ = [
    "ACTIONS",
    "ACTION_REFUSALS",
    "Action",
    "ActionName",
    "Doing",
    "action_named",
    "item_of",
]


class ResolveReview:
    """A settlement under review resolved as paid, failed or retry, if the rail agrees."""

    checked = True

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        why = required(reason)
        try:
            resolution = Resolution(str(payload.get("as")))
        except ValueError:
            raise BadRequest(
                'say how: "as": paid, failed or retry', code="invalid_as", field="as"
            ) from None
        return {"as": str(resolution)}, why

    async def target(self, conn: asyncpg.Connection, item: str) -> str:
        settlement = await review.show(conn, item)
        if settlement["status"] != SettlementStatus.NEEDS_REVIEW:
            raise Refused(f"settlement {item} is {settlement['status']}", code=NOT_IN_REVIEW)
        return f"settlement:{settlement['id']}"

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        done = await review.resolve(
            conn,
            lookup,
            doing.item,
            Resolution(doing.payload["as"]),
            reason=doing.reason or "",
            operator=doing.operator,
            now=doing.now,
            approver=doing.approver,
        )
        return done._asdict()


class ResolveBreak:
    """An open reconciliation break closed by an operator, with the reason."""

    checked = True

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        return {}, required(reason)

    async def target(self, conn: asyncpg.Connection, item: str) -> str:
        found = (await breaks.show_break(conn, item)).item
        if found.status is not BreakStatus.OPEN:
            raise Refused(f"break {item} is {found.status}", code=breaks.BREAK_CLOSED)
        return f"break:{found.id}"

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        d = doing
        closed = await breaks.resolve_break(
            conn, d.item, reason=d.reason or "", operator=d.operator, now=d.now, approver=d.approver
        )
        return breaks.view_document(closed, d.now)


class ReplayWebhook:
    """A dead or parked inbox event sent back to be applied (a reason is kept if given)."""

    checked = True

    def check(
        self, payload: Mapping[str, Any], reason: str | None
    ) -> tuple[dict[str, Any], str | None]:
        return {}, reason if reason and reason.strip() else None

    async def target(self, conn: asyncpg.Connection, item: str) -> str:
        with unavailable_when_down("PostgreSQL is unreachable; nothing was proposed"):
            return f"inbox:{await replayable_id(conn, item)}"

    async def perform(
        self, conn: asyncpg.Connection, lookup: RailLookup, doing: Doing
    ) -> dict[str, Any]:
        row_id = await replay(conn, doing.item, doing.operator, doing.now, doing.approver)
        return {"id": row_id, "status": "received"}


ACTIONS: dict[ActionName, Action] = {
    ProposedAction.REVIEW_RESOLVE: ResolveReview(),
    ProposedAction.BREAK_RESOLVE: ResolveBreak(),
    ProposedAction.INBOX_REPLAY: ReplayWebhook(),
    ProposedAction.POLICY_TWO_PERSON: SetTwoPerson(),
}
# Item by item: a dict keyed by BreakAction is not one keyed by ActionName to the type checker.
ACTIONS.update((name, action) for name, action in BREAK_ACTIONS.items())


def action_named(name: str) -> ActionName:
    """The action an audit row or a proposal names; NotFound for a name no action has."""
    for action in ACTIONS:
        if action.value == name:
            return action
    raise NotFound(f"no operator action {name!r}")


def item_of(target: str) -> str:
    """The id in a canonical target, as the action's own function takes it."""
    return target.partition(":")[2]
