"""GET /login, POST /login, POST /logout, GET /healthz.

Signing in trades an operator token, typed into a form, for a session cookie; the answer to
a refused sign-in is the same whatever was wrong, and the token is never shown back.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from services.console.auth import Caller
from services.console.errors import CsrfRefused, SignInFailed
from services.console.web import HEADERS, Console, error_page, guarded, posted, render, text
from services.domain.errors import ApiError

MAX_TOKEN = 512


def local_path(target: str) -> str:
    """`target` when it is a path on this console, "/" otherwise (no open redirect)."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def routes(console: Console) -> list[Route]:
    """The sign-in, sign-out and health routes."""
    gate = console.gate

    def login_page(request: Request, next_path: str, error: ApiError | None) -> Response:
        token = gate.login_token(request)
        status = error.status if error is not None else 200
        response = render(
            console,
            "login.html",
            None,
            status,
            next_path=next_path,
            error=error,
            login_token=token,
        )
        gate.set_login_cookie(response, token)
        return response

    async def form(request: Request) -> Response:
        return login_page(request, local_path(request.query_params.get("next", "/")), None)

    async def sign_in(request: Request) -> Response:
        fields = await request.form(max_fields=4)
        next_path = local_path(text(fields, "next") or "/")
        token = text(fields, "token").strip()
        try:
            gate.check_login_form(request, text(fields, "csrf") or None)
            if len(token) > MAX_TOKEN:
                raise SignInFailed()
            session_id = await gate.sign_in(token)
        except (SignInFailed, CsrfRefused) as e:
            return login_page(request, next_path, e)
        except ApiError as e:
            return error_page(console, e, None)
        response = RedirectResponse(next_path, 303, headers=HEADERS)
        gate.set_cookie(response, session_id)
        return response

    async def sign_out(request: Request, caller: Caller) -> Response:
        await posted(console, request, caller)
        if caller.session_id is not None:
            await gate.sessions.close(caller.session_id)
        response = RedirectResponse("/login", 303, headers=HEADERS)
        gate.clear_cookie(response)
        return response

    async def healthz(_: Request) -> Response:
        return PlainTextResponse("ok")

    return [
        Route("/login", form, methods=["GET"]),
        Route("/login", sign_in, methods=["POST"]),
        Route("/logout", guarded(console, sign_out), methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
    ]
