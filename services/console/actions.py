"""The console's operator actions, dispatched in one place: `perform`; and the second
operator's decisions on proposals (maker-checker): `decide`.

Each selected item goes through the console's `OperationsDesk`, the front door the commands
and the operator HTTP routes go through as well: with two-person mode off the action is done
at once and refused exactly as they refuse it (a resolution the rail contradicts, a closed break, a
webhook that is not dead or parked); on, it becomes a proposal awaiting a second operator.
Each item is its own audited action (or proposal) in its own transaction
(`services.operations.bulk.each`), and its outcome is returned to be shown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import suppress
from typing import Any

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.break_work import BreakAction
from services.domain.proposal import Move, ProposedAction
from services.inbox.errors import InboxError
from services.operations.actions import ACTIONS, ActionName
from services.operations.approvals import Submitted
from services.operations.bulk import ItemOutcome, each
from services.operations.desk import OperationsDesk
from services.operations.errors import BadRequest, ReasonMissing, Refused

MAX_TARGETS = 500
# The form fields each action reads as its payload (the others read none).
FIELDS: Mapping[ActionName, tuple[str, ...]] = {
    ProposedAction.REVIEW_RESOLVE: ("as",),
    BreakAction.ADJUST: ("account", "direction", "amount", "currency"),
    BreakAction.CORRECT: ("as",),
    BreakAction.MATCH: ("settlement_id",),
    BreakAction.ASSIGN: ("assignee",),
    BreakAction.COMMENT: ("text",),
}


async def _targets(ids: Sequence[str]) -> AsyncIterator[str]:
    for item in ids:
        yield item


async def perform(
    desk: OperationsDesk,
    action: ActionName,
    targets: Sequence[str],
    form: Mapping[str, str],
    operator: str,
) -> list[ItemOutcome]:
    """Do (or, in two-person mode, propose) `action` on each of `targets` as `operator` with
    the form's fields (`FIELDS`) and `reason`; each item done, proposed or refused (with its
    code), in order. BadRequest when nothing is selected or the action itself cannot be read;
    StoreUnavailable (PostgreSQL down) stops the run."""
    _selected(targets, "ids")
    reason = form.get("reason") or None
    payload = payload_of(action, form)
    # A request that cannot be read is the page's error; a missing reason each item's, as
    # every surface refuses it.
    with suppress(ReasonMissing):
        ACTIONS[action].check(payload, reason)

    async def act(item: str) -> Submitted:
        # The inbox's refusals answered as the other actions' are: a code and a message.
        try:
            with unavailable_when_down("PostgreSQL is unreachable; nothing was done"):
                return await desk.act(action, item, payload, reason=reason, operator=operator)
        except InboxError as e:
            raise Refused(e.message, code=e.code) from e

    return await each(_targets(targets), act)


async def decide(
    desk: OperationsDesk,
    move: Move,
    proposals: Sequence[str],
    reason: str | None,
    operator: str,
) -> list[ItemOutcome]:
    """Approve, reject (with `reason`, if given) or withdraw each of `proposals` as `operator`;
    each done or refused with its code (same_operator, not_proposer, proposal_decided,
    proposal_expired, or an approved action's own refusal such as rail_disagrees), in order.
    BadRequest when nothing is selected; StoreUnavailable stops the run."""
    _selected(proposals, "withdraw" if move is Move.WITHDRAW else "ids")

    async def act(item: str) -> object:
        # Each decision in its own transaction: one refused leaves the others standing.
        with unavailable_when_down("PostgreSQL is unreachable; no proposal was decided"):
            return await desk.decide(move, item, operator=operator, reason=reason)

    return await each(_targets(proposals), act)


def _selected(items: Sequence[str], field: str) -> None:
    if not items:
        raise BadRequest("select at least one item", code="nothing_selected", field=field)
    if len(items) > MAX_TARGETS:
        raise BadRequest(f"select at most {MAX_TARGETS} items", code="too_many", field=field)


def payload_of(action: ActionName, form: Mapping[str, str]) -> dict[str, Any]:
    """The payload `action` reads, from the form's text fields: an amount as a whole number
    (when it is one), a blank assignee as nobody."""
    payload: dict[str, Any] = {name: form.get(name, "") for name in FIELDS.get(action, ())}
    amount = payload.get("amount")
    if isinstance(amount, str) and amount.strip().isascii() and amount.strip().isdigit():
        payload["amount"] = int(amount.strip())
    if action is BreakAction.ASSIGN and not payload["assignee"].strip():
        payload["assignee"] = None
    return payload
