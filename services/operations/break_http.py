"""The operator routes of reconciliation breaks (http.py mounts them with the others):

    GET  /v1/breaks            ?status=&type=&bucket=0-1d|1-7d|7-30d|30d+&currency=
                               &min_amount=&max_amount=&after=&limit=
    GET  /v1/breaks/export     open breaks streamed (?format=csv|jsonl&type=)
    GET  /v1/breaks/{id}       one break, with its comments
    POST /v1/breaks/{id}/{action}
         resolve    {"reason"}
         write_off  {"reason"}
         adjust     {"account", "direction", "amount", "currency", "reason"}
         correct    {"as": "reversed|failed|paid", "reason"}
         match      {"settlement_id", "reason"}
         assign     {"assignee": "<operator>" | null}
         comment    {"text"}
         reopen     {"reason"}

A POST is the action of that name (services/operations/break_actions.py), done (200) or, in
two-person mode, proposed (202); assign, comment and reopen are always done at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import asyncpg
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from services.domain.break_work import AgingBucket, BreakAction
from services.domain.breaks import BreakStatus, BreakType
from services.domain.proposal import ProposedAction
from services.operations import breaks
from services.operations.actions import ActionName
from services.operations.break_notes import comments_of
from services.operations.desk import OperationsDesk
from services.operations.errors import NotFound
from services.operations.export import ExportFormat, export_open
from services.operations.query import choice, json_body, json_response, whole_number

Handler = Callable[[Request, str], Awaitable[Response]]  # request, operator -> response
# The action each POST /v1/breaks/{id}/{name} does.
PATH_ACTIONS: dict[str, ActionName] = {
    "resolve": ProposedAction.BREAK_RESOLVE,
    **{a.value.removeprefix("break."): a for a in BreakAction},
}


def break_routes(desk: OperationsDesk) -> list[tuple[str, str, Handler]]:
    """The break routes: (path, method, handler), the export before `{id}` (Starlette matches
    routes in order)."""
    pool = desk.pool

    async def breaks_list(request: Request, _: str) -> Response:
        q = request.query_params
        found = await breaks.list_breaks(
            pool,
            listing_filter(q),
            now=desk.clock(),
            after=whole_number(q.get("after"), "after", 0),
            limit=whole_number(q.get("limit"), "limit", 100),
        )
        data = [breaks.view_document(b, desk.clock()) for b in found]
        return json_response({"data": data, "next_after": found[-1].item.id if found else None})

    async def breaks_show(request: Request, _: str) -> Response:
        found = await breaks.show_break(pool, request.path_params["id"])
        document = breaks.view_document(found, desk.clock())
        document["comments"] = await comments_of(pool, str(found.item.id))
        return json_response(document)

    async def breaks_act(request: Request, operator: str) -> Response:
        action = PATH_ACTIONS.get(request.path_params["action"])
        if action is None:
            raise NotFound(f"no break action {request.path_params['action']!r}")
        body = await json_body(request)
        given = body.pop("reason", None)
        done = await desk.act(
            action,
            request.path_params["id"],
            body,
            reason=given if isinstance(given, str) else None,
            operator=operator,
        )
        return json_response(done.document, 202 if done.proposed else 200)

    async def breaks_export(request: Request, _: str) -> Response:
        q = request.query_params
        fmt = choice(ExportFormat, q.get("format", "jsonl"), "format") or ExportFormat.JSONL
        break_type = choice(BreakType, q.get("type"), "type")
        media = "text/csv" if fmt is ExportFormat.CSV else "application/x-ndjson"
        return StreamingResponse(_streamed(pool, fmt, break_type), media_type=media)

    return [
        ("/v1/breaks", "GET", breaks_list),
        ("/v1/breaks/export", "GET", breaks_export),
        ("/v1/breaks/{id}", "GET", breaks_show),
        ("/v1/breaks/{id}/{action}", "POST", breaks_act),
    ]


def listing_filter(q: Mapping[str, str]) -> breaks.BreakFilter:
    """The filter a break listing's query asks for (status, type, bucket, currency, amounts;
    a blank one is not asked for); BadRequest naming the parameter that cannot be read."""
    minimum, maximum = q.get("min_amount") or None, q.get("max_amount") or None
    return breaks.break_filter(
        choice(BreakStatus, q.get("status") or None, "status"),
        choice(BreakType, q.get("type") or None, "type"),
        choice(AgingBucket, q.get("bucket") or None, "bucket"),
        q.get("currency") or None,
        None if minimum is None else whole_number(minimum, "min_amount"),
        None if maximum is None else whole_number(maximum, "max_amount"),
    )


async def _streamed(
    pool: asyncpg.Pool, fmt: ExportFormat, break_type: BreakType | None
) -> AsyncIterator[str]:
    async with pool.acquire() as conn:
        async for line in export_open(conn, fmt, break_type=break_type):
            yield line
