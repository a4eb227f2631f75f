"""The work queues, each a keyset page with checkboxes for a bulk action:

    GET /review                     settlements under review;  POST /review/resolve
    GET /breaks?status=&type=...    reconciliation breaks;     POST /breaks/{action}
                                    (pages/breaks.py)
    GET /webhooks?status=           parked, dead, mismatch;    POST /webhooks/replay

A POST does its action through `services.console.actions.perform` and shows the queue again
with each selected item's outcome (done; proposed, in two-person mode, with the proposal's
id; or refused with its code and reason).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.adapters.postgres.store_errors import unavailable_when_down
from services.console.actions import perform
from services.console.auth import Caller
from services.console.pages.breaks import routes as break_routes
from services.console.web import (
    Console,
    Handler,
    guarded,
    posted,
    render,
    text,
    texts,
)
from services.domain.instruction import Resolution
from services.domain.keyset import next_after
from services.domain.proposal import ProposedAction
from services.domain.rail_event import InboxStatus
from services.inbox.operator import list_events
from services.operations import review
from services.operations.bulk import ItemOutcome
from services.operations.query import choice, whole_number

PAGE = 50
WEBHOOK_QUEUES = (InboxStatus.DEAD, InboxStatus.PARKED, InboxStatus.MISMATCH)


Page = Callable[[Console, Request, Caller, list[ItemOutcome] | None], Awaitable[Response]]


async def review_page(
    console: Console, request: Request, caller: Caller, outcomes: list[ItemOutcome] | None
) -> Response:
    """The review queue, a page after `?after=`, with a bulk action's outcomes if given."""
    after_text = request.query_params.get("after")
    after = review.parse_id(after_text) if after_text else None
    items = await review.list_review(console.pool, after, PAGE)
    return render(
        console,
        "review.html",
        caller,
        items=items,
        next_after=next_after([item["id"] for item in items], PAGE),
        outcomes=outcomes,
        resolutions=list(Resolution),
    )


async def webhooks_page(
    console: Console, request: Request, caller: Caller, outcomes: list[ItemOutcome] | None
) -> Response:
    """Webhooks dead (unless told parked or mismatch), with a bulk action's outcomes if given."""
    q = request.query_params
    status = choice(WEBHOOK_QUEUES, q.get("status", "dead") or None, "status") or InboxStatus.DEAD
    with unavailable_when_down("PostgreSQL is unreachable; no webhook was read"):
        page = await list_events(
            console.pool, status, whole_number(q.get("after") or None, "after"), PAGE
        )
    return render(
        console,
        "webhooks.html",
        caller,
        items=page["data"],
        next_after=page["next_cursor"],
        shown_status=status.value,
        queues=WEBHOOK_QUEUES,
        outcomes=outcomes,
    )


def routes(console: Console) -> list[Route]:
    """The queues' routes: each queue's GET, and its action's POST."""

    def listing(page: Page) -> Handler:
        async def get(request: Request, caller: Caller) -> Response:
            return await page(console, request, caller, None)

        return get

    def action(kind: ProposedAction, page: Page) -> Handler:
        async def post(request: Request, caller: Caller) -> Response:
            form = await posted(console, request, caller)
            fields = {"as": text(form, "as"), "reason": text(form, "reason")}
            outcomes = await perform(
                console.desk,
                kind,
                texts(form, "ids"),
                fields,
                caller.operator,
            )
            return await page(console, request, caller, outcomes)

        return post

    resolve, replay = ProposedAction.REVIEW_RESOLVE, ProposedAction.INBOX_REPLAY
    return [
        Route("/review", guarded(console, listing(review_page)), methods=["GET"]),
        Route("/review/resolve", guarded(console, action(resolve, review_page)), methods=["POST"]),
        *break_routes(console),
        Route("/webhooks", guarded(console, listing(webhooks_page)), methods=["GET"]),
        Route(
            "/webhooks/replay", guarded(console, action(replay, webhooks_page)), methods=["POST"]
        ),
    ]
