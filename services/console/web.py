"""What every console page shares: its dependencies, rendering, the caller check, errors
shown on the page with their code, and POST forms checked for their form token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import asyncpg
import jinja2
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from services.console.auth import Caller, Gate
from services.console.errors import SignInNeeded
from services.domain.errors import ApiError
from services.domain.money import major_text
from services.operations.approval_policy import ONE_PERSON, Policy
from services.operations.desk import OperationsDesk
from services.operations.rail_lookup import RailLookup
from services.platform.clock import Clock

Handler = Callable[[Request, Caller], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]
MAX_FORM_FIELDS = 1000  # a bulk selection: one field per checked row
# No script runs on any page; styles are inline in the one layout; nothing may frame a page.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def templates() -> jinja2.Environment:
    """The console's templates, every value escaped unless marked safe."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("services.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals["money_text"] = major_text
    return env


@dataclass(frozen=True)
class Console:
    """What the pages are built from (see `services.apps.console.compose`)."""

    pool: asyncpg.Pool
    rail: RailLookup
    gate: Gate
    templates: jinja2.Environment
    clock: Clock
    policy: Policy = ONE_PERSON  # two-person mode: actions become proposals

    @property
    def desk(self) -> OperationsDesk:
        """The front door every operator action of the console goes through."""
        return OperationsDesk(self.pool, self.rail, self.policy, self.clock)


def render(
    console: Console, template: str, caller: Caller | None, status: int = 200, **context: Any
) -> HTMLResponse:
    """`template` rendered for `caller` (None: not signed in), with the shared headers."""
    html = console.templates.get_template(template).render(who=caller, **context)
    return HTMLResponse(html, status, headers=HEADERS)


def error_page(console: Console, error: ApiError, caller: Caller | None) -> HTMLResponse:
    """The error page: its status, machine-readable code and message."""
    response = render(console, "error.html", caller, error.status, error=error)
    if error.retry_after_seconds is not None:
        response.headers["Retry-After"] = str(error.retry_after_seconds)
    return response


def guarded(console: Console, handler: Handler) -> Endpoint:
    """`handler` for signed-in operators only; a browser without a session is sent to sign in,
    and every ApiError is shown on the page, never swallowed."""

    async def endpoint(request: Request) -> Response:
        caller = None
        try:
            caller = await console.gate.caller(request)
            return await handler(request, caller)
        except SignInNeeded as e:
            if request.method == "GET" and "authorization" not in request.headers:
                target = quote(request.url.path + _query(request), safe="/")
                return RedirectResponse(f"/login?next={target}", 303, headers=HEADERS)
            return error_page(console, e, None)
        except ApiError as e:
            return error_page(console, e, caller)

    return endpoint


def _query(request: Request) -> str:
    return f"?{request.url.query}" if request.url.query else ""


async def posted(console: Console, request: Request, caller: Caller) -> FormData:
    """The POSTed form, once its form token is the caller's session's (CsrfRefused if not)."""
    form = await request.form(max_fields=MAX_FORM_FIELDS)
    token = form.get("csrf")
    console.gate.check_form(caller, token if isinstance(token, str) else None)
    return form


def texts(form: FormData, name: str) -> list[str]:
    """Every text value of field `name`, stripped, blanks left out."""
    return [v.strip() for v in form.getlist(name) if isinstance(v, str) and v.strip()]


def text(form: FormData, name: str) -> str:
    """The text of field `name`, or "" when absent."""
    value = form.get(name)
    return value if isinstance(value, str) else ""
