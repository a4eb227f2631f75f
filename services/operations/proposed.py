"""The actions a proposal may hold, done through the very functions the CLI and the operator
HTTP routes call: `review.resolve`, `breaks.resolve_break` and the inbox's `replay`.

A proposal names its item by a canonical target (`settlement:<uuid>`, `break:<id>`,
`inbox:<row id>`), so two proposals for one item, however its id was written, are one
pending proposal. The item must exist when it is proposed, in a status its action takes: a
proposal the rows refuse already is refused at once, with the action's own code.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import asyncpg

from services.adapters.postgres.store_errors import unavailable_when_down
from services.domain.breaks import BreakStatus
from services.domain.instruction import Resolution
from services.domain.proposal import ProposedAction
from services.domain.rail_event import REPLAYABLE, InboxStatus
from services.domain.settlement import SettlementStatus
from services.inbox import errors as inbox_errors
from services.inbox.operator import replay
from services.operations import breaks, review
from services.operations.errors import (
    BadRequest,
    NotFound,
    OperationsError,
    ReasonMissing,
    Refused,
)
from services.operations.rail_lookup import RailLookup
from services.operations.verdict import NOT_IN_REVIEW

# What an approved action may answer instead of doing it: refusals, never "try again".
ACTION_REFUSALS = (OperationsError, inbox_errors.InboxError)
FIND_EVENT = """
SELECT id, status FROM inbox_events
 WHERE id = $1 OR (rail_event_id = $2 AND rail = 'stripe') LIMIT 1
"""


def checked(
    action: ProposedAction, payload: Mapping[str, Any], reason: str | None
) -> tuple[dict[str, Any], str | None]:
    """The payload and reason `action` keeps, read strictly; BadRequest or ReasonMissing."""
    if action is ProposedAction.INBOX_REPLAY:
        return {}, reason if reason and reason.strip() else None
    if not reason or not reason.strip():
        raise ReasonMissing()
    if action is ProposedAction.BREAK_RESOLVE:
        return {}, reason
    try:
        resolution = Resolution(str(payload.get("as")))
    except ValueError:
        raise BadRequest(
            'say how: "as": paid, failed or retry', code="invalid_as", field="as"
        ) from None
    return {"as": str(resolution)}, reason


async def target_of(conn: asyncpg.Connection, action: ProposedAction, item: str) -> str:
    """The canonical target of `action` on `item` (an id as an operator gives it); NotFound
    when there is no such settlement, break or inbox event, and the action's own refusal when
    its item's status already refuses it (the rail is asked only at approval)."""
    if action is ProposedAction.REVIEW_RESOLVE:
        settlement = await review.show(conn, item)
        if settlement["status"] != SettlementStatus.NEEDS_REVIEW:
            raise Refused(f"settlement {item} is {settlement['status']}", code=NOT_IN_REVIEW)
        return f"settlement:{settlement['id']}"
    if action is ProposedAction.BREAK_RESOLVE:
        found = await breaks.show_break(conn, item)
        if found.status is not BreakStatus.OPEN:
            raise Refused(f"break {item} is {found.status}", code=breaks.BREAK_CLOSED)
        return f"break:{found.id}"
    with unavailable_when_down("PostgreSQL is unreachable; nothing was proposed"):
        row = await conn.fetchrow(FIND_EVENT, int(item) if item.isdigit() else 0, item)
    if row is None:
        raise NotFound(f"no inbox event {item}")
    if row["status"] == InboxStatus.MISMATCH:
        raise inbox_errors.MismatchNotReplayable(f"inbox event {item} is a mismatch; never applied")
    if row["status"] not in REPLAYABLE:
        raise inbox_errors.NotReplayable(f"inbox event {item} is {row['status']}")
    return f"inbox:{row['id']}"


def item_of(target: str) -> str:
    """The id in a canonical target, as the action's own function takes it."""
    return target.partition(":")[2]


async def perform(
    conn: asyncpg.Connection,
    lookup: RailLookup,
    action: ProposedAction,
    item: str,
    payload: Mapping[str, Any],
    *,
    reason: str | None,
    operator: str,
    now: datetime,
    approver: str | None = None,
) -> dict[str, Any]:
    """Do `action` on `item` now, audited as `operator`'s (approved by `approver`, if any);
    its result as the HTTP routes answer it. Refuses exactly as the CLI refuses."""
    if action is ProposedAction.REVIEW_RESOLVE:
        done = await review.resolve(
            conn,
            lookup,
            item,
            Resolution(payload["as"]),
            reason=reason or "",
            operator=operator,
            now=now,
            approver=approver,
        )
        return done._asdict()
    if action is ProposedAction.BREAK_RESOLVE:
        closed = await breaks.resolve_break(
            conn, item, reason=reason or "", operator=operator, now=now, approver=approver
        )
        return breaks.break_document(closed)
    row_id = await replay(conn, item, operator, now, approver)
    return {"id": row_id, "status": "received"}
