"""GET /settlements?q=: search; GET /settlements/{id}: one settlement's whole story."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.console.auth import Caller
from services.console.errors import PageNotFound
from services.console.story_queries import PAGE, as_uuid, search, story
from services.console.web import Console, guarded, render
from services.domain.keyset import next_after
from services.operations.errors import BadRequest

MAX_QUERY = 255  # the longest reference, payee or destination a settlement may have


def routes(console: Console) -> list[Route]:
    """The search and story routes."""

    async def found(request: Request, caller: Caller) -> Response:
        q = request.query_params.get("q", "").strip()
        if len(q) > MAX_QUERY:
            raise BadRequest(f"search for at most {MAX_QUERY} characters", field="q")
        after_text = request.query_params.get("after")
        after = as_uuid(after_text) if after_text else None
        if after_text and after is None:
            raise BadRequest("after must be a settlement id", code="invalid_after", field="after")
        rows = await search(console.pool, q, after) if q else []
        following = next_after([str(row["id"]) for row in rows], PAGE)
        return render(console, "settlements.html", caller, q=q, rows=rows, next_after=following)

    async def one(request: Request, caller: Caller) -> Response:
        settlement_id = as_uuid(request.path_params["id"])
        told = await story(console.pool, settlement_id) if settlement_id else None
        if told is None:
            raise PageNotFound(f"no settlement {request.path_params['id']}")
        return render(console, "settlement.html", caller, story=told)

    return [
        Route("/settlements", guarded(console, found), methods=["GET"]),
        Route("/settlements/{id}", guarded(console, one), methods=["GET"]),
    ]
