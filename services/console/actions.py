"""The console's operator actions, dispatched in one place: `perform`.

Each action goes through the function the CLI and the operator HTTP routes use, so it is
refused exactly as they refuse it (a resolution the rail contradicts, a closed break, a
webhook that is not dead or parked); each selected item is its own audited action in its own
transaction (`services.operations.bulk.each`), and its outcome is returned to be shown.
Maker-checker routes through here: with two-person mode on, `perform` is where an action
becomes a proposal instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from enum import StrEnum

import asyncpg

from services.console.web import Clock
from services.inbox.errors import InboxError
from services.inbox.operator import replay
from services.operations import breaks, review
from services.operations.bulk import ItemOutcome, each
from services.operations.errors import BadRequest, Refused
from services.operations.rail_lookup import RailLookup
from services.shared.domain.instruction import Resolution
from services.shared.store_errors import unavailable_when_down

MAX_TARGETS = 500


class Action(StrEnum):
    """What an operator may do from the console; the values name the audit rows' actions."""

    REVIEW_RESOLVE = "review.resolve"
    BREAK_RESOLVE = "break.resolve"
    WEBHOOK_REPLAY = "inbox.replay"


async def _targets(ids: Sequence[str]) -> AsyncIterator[str]:
    for item in ids:
        yield item


async def perform(
    pool: asyncpg.Pool, rail: RailLookup, clock: Clock,
    action: Action, targets: Sequence[str], form: Mapping[str, str], operator: str,
) -> list[ItemOutcome]:  # fmt: skip
    """Do `action` to each of `targets` as `operator` with the form's `as` and `reason`; each
    item done or refused (with its code), in order. BadRequest when nothing is selected or
    the action itself cannot be read; StoreUnavailable (PostgreSQL down) stops the run."""
    if not targets:
        raise BadRequest("select at least one item", code="nothing_selected", field="ids")
    if len(targets) > MAX_TARGETS:
        raise BadRequest(f"select at most {MAX_TARGETS} items", code="too_many", field="ids")
    reason = form.get("reason", "")
    async with pool.acquire() as conn:
        if action is Action.REVIEW_RESOLVE:
            resolution = _resolution(form.get("as", ""))

            async def act(item: str) -> object:
                return await review.resolve(
                    conn, rail, item, resolution, reason=reason, operator=operator, now=clock()
                )
        elif action is Action.BREAK_RESOLVE:

            async def act(item: str) -> object:
                return await breaks.resolve_break(
                    conn, item, reason=reason, operator=operator, now=clock()
                )
        else:

            async def act(item: str) -> object:
                return await _replay(conn, item, operator, clock)

        return await each(_targets(targets), act)


def _resolution(value: str) -> Resolution:
    try:
        return Resolution(value)
    except ValueError:
        raise BadRequest(
            "say how to resolve: paid, failed or retry", code="invalid_as", field="as"
        ) from None


async def _replay(conn: asyncpg.Connection, item: str, operator: str, clock: Clock) -> int:
    # The inbox's refusals answered as the other actions' are: a code and a message.
    try:
        with unavailable_when_down("PostgreSQL is unreachable; nothing was replayed"):
            return await replay(conn, item, operator, clock())
    except InboxError as e:
        raise Refused(e.message, code=e.code) from e
