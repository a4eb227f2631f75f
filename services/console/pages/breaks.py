"""The breaks queue: a keyset page of reconciliation breaks with checkboxes, and the work on
the selected ones.

    GET  /breaks?status=&type=&bucket=&currency=&min_amount=&max_amount=
                               open breaks unless told; each with its assignee and age
    POST /breaks/{action}      resolve, write_off, adjust, correct, match, assign, comment or
                               reopen each selected break (form: ids, csrf, and what the
                               action reads: reason, as, settlement_id, account, direction,
                               amount, currency, assignee, text)

A POST does its action through `services.console.actions.perform`, the operations desk's
one front door, and shows the queue again with each selected break's outcome (done;
proposed, in two-person mode; or refused with its code and reason).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.console.actions import perform
from services.console.auth import Caller
from services.console.web import Console, guarded, posted, render, text, texts
from services.domain.break_work import AgingBucket, Correction, Direction, aging_bucket
from services.domain.breaks import BreakStatus, BreakType
from services.domain.keyset import next_after
from services.domain.postings import PlatformAccount
from services.operations import breaks
from services.operations.break_http import PATH_ACTIONS, listing_filter
from services.operations.bulk import ItemOutcome
from services.operations.errors import NotFound
from services.operations.query import whole_number

PAGE = 50
FILTERS = ("status", "type", "bucket", "currency", "min_amount", "max_amount")
# The form fields any break action may read; each action takes its own (console/actions.py).
FORM = (
    "reason",
    "as",
    "settlement_id",
    "account",
    "direction",
    "amount",
    "currency",
    "assignee",
    "text",
)


async def breaks_page(
    console: Console, request: Request, caller: Caller, outcomes: list[ItemOutcome] | None
) -> Response:
    """Breaks by the query's filters (open unless told), with a bulk action's outcomes if
    given."""
    q = request.query_params
    asked = {name: q.get(name, "") for name in FILTERS} | {"status": q.get("status", "open")}
    now = console.clock()
    found = await breaks.list_breaks(
        console.pool,
        listing_filter(asked),
        now=now,
        after=whole_number(q.get("after") or None, "after"),
        limit=PAGE,
    )
    return render(
        console,
        "breaks.html",
        caller,
        items=[(view, aging_bucket(view.item.first_seen, now).value) for view in found],
        outcomes=outcomes,
        next_after=next_after([view.item.id for view in found], PAGE),
        asked=asked,
        statuses=list(BreakStatus),
        types=list(BreakType),
        buckets=list(AgingBucket),
        corrections=list(Correction),
        accounts=list(PlatformAccount),
        directions=list(Direction),
    )


def routes(console: Console) -> list[Route]:
    """The queue's GET, and one POST per break action."""

    async def listing(request: Request, caller: Caller) -> Response:
        return await breaks_page(console, request, caller, None)

    async def act(request: Request, caller: Caller) -> Response:
        action = PATH_ACTIONS.get(request.path_params["action"])
        if action is None:
            raise NotFound(f"no break action {request.path_params['action']!r}")
        form = await posted(console, request, caller)
        fields = {name: text(form, name) for name in FORM}
        chosen = texts(form, "ids")
        outcomes = await perform(console.desk, action, chosen, fields, caller.operator)
        return await breaks_page(console, request, caller, outcomes)

    return [
        Route("/breaks", guarded(console, listing), methods=["GET"]),
        Route("/breaks/{action}", guarded(console, act), methods=["POST"]),
    ]
