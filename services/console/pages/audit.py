"""GET /audit: operator actions, filterable; GET /approvals: proposals awaiting a second
operator (maker-checker), shown once two-person mode exists."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from services.console.audit_queries import PAGE, AuditFilter, actions
from services.console.auth import Caller
from services.console.web import Console, guarded, render
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
    """The audit and approvals routes."""

    async def audit(request: Request, caller: Caller) -> Response:
        after = request.query_params.get("after", "")
        if after and (not after.isdigit() or len(after) > 18):
            raise BadRequest("after must be an action id", code="invalid_after", field="after")
        where = _filter(request)
        rows = await actions(console.pool, where, int(after) if after else None)
        next_after = rows[-1]["id"] if len(rows) == PAGE else None
        params = {name: value for name, value in where._asdict().items() if value}
        return render(
            console, "audit.html", caller, rows=rows, where=where, next_after=next_after,
            params=params,
        )  # fmt: skip

    async def approvals(request: Request, caller: Caller) -> Response:
        return render(console, "approvals.html", caller)

    return [
        Route("/audit", guarded(console, audit), methods=["GET"]),
        Route("/approvals", guarded(console, approvals), methods=["GET"]),
    ]
