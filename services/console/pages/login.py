"""GET /login, POST /login, POST /logout, GET /healthz.

Signing in trades an operator token, typed into a form, for a session cookie; the answer to
a refused sign-in is the same whatever was wrong, and the token is never shown back. The form
is three short fields: a body over `MAX_LOGIN_BODY` is refused with 413 `body_too_large`
before it is read (nobody signed in needs to send one).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from services.console.auth import Caller
from services.console.errors import CsrfRefused, SignInFailed
from services.console.web import HEADERS, Console, error_page, guarded, posted, render, text
from services.domain.errors import ApiError
from services.platform.edge import BodyTooLarge, read_capped_body

MAX_TOKEN = 512
MAX_LOGIN_BODY = 4096  # the form's fields (token, next path, form token) with room to spare
LOGIN_FIELDS = 4


def local_path(target: str) -> str:
    """`target` when it is a path on this console, "/" otherwise (no open redirect)."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


async def login_form(request: Request) -> FormData:
    """The sign-in form's fields, read from a body of at most `MAX_LOGIN_BODY` bytes
    (BodyTooLarge past it); a body that is not such a form reads as no fields."""
    body = await read_capped_body(request, MAX_LOGIN_BODY)
    try:
        pairs = parse_qsl(body.decode(), keep_blank_values=True, max_num_fields=LOGIN_FIELDS)
    except ValueError:  # not UTF-8, or more fields than the form has: signs nobody in
        return FormData()
    fields: list[tuple[str, str | UploadFile]] = list(pairs)
    return FormData(fields)


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
        try:
            fields = await login_form(request)
        except BodyTooLarge as e:
            return error_page(console, e, None)
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
