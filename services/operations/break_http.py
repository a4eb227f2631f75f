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
two-person mode, proposed (202); assign, comment and reopen are always done at once. Each
action is a route of its own, documented with its own body; another name is 404.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import asyncpg
from fastapi import APIRouter, Request, Response
from starlette.responses import StreamingResponse

from services.domain.break_work import AgingBucket, BreakAction, Correction, Direction
from services.domain.breaks import BreakStatus, BreakType
from services.domain.money import MAX_SETTLEMENT_AMOUNT
from services.domain.postings import PlatformAccount
from services.domain.proposal import ProposedAction
from services.operations import breaks
from services.operations import operator_docs as doc
from services.operations.actions import ActionName
from services.operations.break_actions import MAX_NAME
from services.operations.break_notes import MAX_COMMENT, comments_of
from services.operations.desk import OperationsDesk
from services.operations.export import ExportFormat, export_open
from services.operations.query import choice, json_body, json_response, optional_text, whole_number

# The action each POST /v1/breaks/{id}/{name} does.
PATH_ACTIONS: dict[str, ActionName] = {
    "resolve": ProposedAction.BREAK_RESOLVE,
    **{a.value.removeprefix("break."): a for a in BreakAction},
}
_TEXT = {"type": "string", "pattern": doc.NON_BLANK}
# Each action's body (break_actions.py `check`), and what it answers when done.
_BODIES: dict[str, tuple[dict[str, Any], str]] = {
    "resolve": (doc.body({"reason": doc.REASON}, "reason"), "Resolved: the break."),
    "write_off": (
        doc.body({"reason": doc.REASON}, "reason", closed=True),
        "Written off: the break and the entry booked (its amount is the break's).",
    ),
    "adjust": (
        doc.body(
            {
                "account": doc.choices(*PlatformAccount),
                "direction": doc.choices(*Direction),
                "amount": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_SETTLEMENT_AMOUNT,
                    "description": "Minor units; 100 and 100.0 are equal, 100.5 invalid.",
                },
                "currency": doc.CURRENCY,
                "reason": doc.REASON,
            },
            *("account", "direction", "amount", "currency", "reason"),
        ),
        "Adjusted: the break and the entry booked.",
    ),
    "correct": (
        doc.body({"as": doc.choices(*Correction), "reason": doc.REASON}, "as", "reason"),
        "Corrected: the break and its settlement.",
    ),
    "match": (
        doc.body(
            {"settlement_id": {"type": "string", "format": "uuid"}, "reason": doc.REASON},
            *("settlement_id", "reason"),
        ),
        "Matched: the break and its settlement.",
    ),
    "assign": (
        doc.body(
            {
                "assignee": {"anyOf": [{**_TEXT, "maxLength": MAX_NAME}, {"type": "null"}]},
                "reason": doc.ANY_REASON,
            },
            "assignee",
        ),
        "Assigned (null: nobody): the break.",
    ),
    "comment": (
        doc.body({"text": {**_TEXT, "maxLength": MAX_COMMENT}, "reason": doc.ANY_REASON}, "text"),
        "The comment.",
    ),
    "reopen": (doc.body({"reason": doc.REASON}, "reason"), "Reopened: the break."),
}
ACTION_FAILURES = doc.failures(400, 401, 403, 404, 409, 413, 503)
_DONE_SHAPES = {"resolve": doc.Break, "assign": doc.Break, "reopen": doc.Break}
_LISTING = doc.with_parameters(
    doc.query("status", doc.choices(*BreakStatus, blank=True), "Only breaks in this status."),
    doc.query("type", doc.choices(*BreakType, blank=True), "Only breaks of this type."),
    doc.query("bucket", doc.choices(*AgingBucket, blank=True), "First seen this long ago."),
    doc.query("currency", {**doc.CURRENCY, "enum": [*doc.CURRENCY["enum"], ""]}, "In it."),
    doc.query("min_amount", doc.BLANK_OR_WHOLE, "Least absolute difference, minor units."),
    doc.query("max_amount", doc.BLANK_OR_WHOLE, "Most absolute difference (not below min)."),
    doc.query("after", doc.WHOLE, "`next_after` of the last page."),
    doc.query("limit", doc.WHOLE, "How many, at most (default 100, capped at 1000)."),
)
_EXPORT = doc.with_parameters(
    doc.query("format", doc.choices(*ExportFormat), "jsonl (the default) or csv."),
    doc.query("type", doc.choices(*BreakType), "Only open breaks of this type."),
)
_EXPORTED = {
    "description": "The open breaks, one line each.",
    "content": {
        "application/x-ndjson": {"schema": {"type": "string"}},
        "text/csv": {"schema": {"type": "string"}},
    },
}
_FIRST = {"path.id": "$response.body#/data/0/id"}
_LIST_LINKS = {
    "NextPage": doc.link(
        "breaks_list",
        **{f"query.{name}": f"$request.query.{name}" for name in ("status", "type", "limit")},
        **{"query.after": "$response.body#/next_after"},
    ),
    "ShowFirst": doc.link("breaks_show", **_FIRST),
    **{
        f"{name.title().replace('_', '')}First": doc.link(f"breaks_{name}", **_FIRST)
        for name in _BODIES
    },
}
_SHOW_LINKS = {
    name.title().replace("_", ""): doc.link(f"breaks_{name}", **{"path.id": "$request.path.id"})
    for name in _BODIES
}


def break_routes(desk: OperationsDesk, operator: Any) -> APIRouter:
    """The break routes, the export before `{id}` (routes match in order)."""
    pool, router, the_break = desk.pool, APIRouter(), doc.whole_id("A break")

    @router.get(
        "/v1/breaks",
        operation_id="breaks_list",
        summary="Breaks, by id, under the filters given",
        openapi_extra=_LISTING,
        responses={
            200: {"model": doc.BreakPage, **doc.answer("A page.", **_LIST_LINKS)},
            **doc.failures(400, 401, 403, 503, s400="A filter cannot be read, or min above max."),
        },
    )
    async def breaks_list(request: Request, _: str = operator) -> Response:
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

    @router.get(
        "/v1/breaks/export",
        operation_id="breaks_export",
        summary="The open breaks, streamed as JSON lines or CSV",
        openapi_extra=_EXPORT,
        responses={200: _EXPORTED, **doc.failures(400, 401, 403, 503)},
        response_class=StreamingResponse,
    )
    async def breaks_export(request: Request, _: str = operator) -> Response:
        q = request.query_params
        fmt = choice(ExportFormat, q.get("format", "jsonl"), "format") or ExportFormat.JSONL
        break_type = choice(BreakType, q.get("type"), "type")
        media = "text/csv" if fmt is ExportFormat.CSV else "application/x-ndjson"
        return StreamingResponse(_streamed(pool, fmt, break_type), media_type=media)

    @router.get(
        "/v1/breaks/{id}",
        operation_id="breaks_show",
        summary="One break, with its comments",
        responses={
            200: {"model": doc.BreakShown, **doc.answer("The break.", **_SHOW_LINKS)},
            **doc.failures(401, 403, 404, 503),
        },
    )
    async def breaks_show(id: str = the_break, _: str = operator) -> Response:
        found = await breaks.show_break(pool, id)
        document = breaks.view_document(found, desk.clock())
        document["comments"] = await comments_of(pool, str(found.item.id))
        return json_response(document)

    _add_actions(router, desk, operator)
    return router


def _add_actions(router: APIRouter, desk: OperationsDesk, operator: Any) -> None:
    """POST /v1/breaks/{id}/<action>: a route each, with its own body."""
    for name, (extra, done) in _BODIES.items():
        router.add_api_route(
            f"/v1/breaks/{{id}}/{name}",
            _acting_on_a_break(desk, PATH_ACTIONS[name], operator),
            methods=["POST"],
            operation_id=f"breaks_{name}",
            summary=f"{name.replace('_', ' ').capitalize()} a break",
            openapi_extra=extra,
            responses={**doc.proposed(_DONE_SHAPES.get(name), done), **ACTION_FAILURES},
        )


def _acting_on_a_break(desk: OperationsDesk, action: ActionName, operator: Any) -> Any:
    the_break = doc.whole_id("A break")

    async def act(request: Request, id: str = the_break, acting: str = operator) -> Response:
        body = await json_body(request)
        given = optional_text(body, "reason")
        body.pop("reason", None)
        done = await desk.act(action, id, body, reason=given, operator=acting)
        return json_response(done.document, 202 if done.proposed else 200)

    return act


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
