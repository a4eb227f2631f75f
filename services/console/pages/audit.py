"""GET /audit: operator actions, filterable; an action done under two-person mode names its
approver beside its actor."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.console.audit_queries import PAGE, AuditFilter, actions
from services.console.auth import Caller
from services.console.web import Console, guarded, render
from services.domain.keyset import next_after, parse_id
from services.operations.errors import BadRequest

MAX_FILTER = 255


def _filter(request: Request) -> AuditFilter:
    values = []
    for name in AuditFilter._fields:
        value = request.query_params.get(name, "").strip()
        if len(value) > MAX_FILTER:
            raise BadRequest(f"{name} is longer than {MAX_FILTER} characters", field=name)
        values.append(value or None)
    return AuditFilter(*values)


def routes(console: Console) -> list[Route]:
    """The audit route."""

    async def audit(request: Request, caller: Caller) -> Response:
        after = request.query_params.get("after", "")
        cursor = parse_id(after) if after else None
        if after and cursor is None:
            raise BadRequest("after must be an action id", code="invalid_after", field="after")
        where = _filter(request)
        rows = await actions(console.pool, where, cursor)
        following = next_after([row["id"] for row in rows], PAGE)
        params = {name: value for name, value in where._asdict().items() if value}
        return render(
            console,
            "audit.html",
            caller,
            rows=rows,
            where=where,
            next_after=following,
            params=params,
        )

    return [
        Route("/audit", guarded(console, audit), methods=["GET"]),
    ]
