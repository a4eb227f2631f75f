"""Who is asking: an operator's session cookie, or `Authorization: Bearer <operator token>`.

A bearer request needs no cookie and no form token (a script holds the token itself, and a
browser never sends it on its own). A tenant's API token is known but is not an operator's:
403. A sign-in answers the same whatever was wrong, and no token is echoed or logged.
"""

from __future__ import annotations

import secrets
from string import hexdigits
from typing import NamedTuple

from starlette.requests import Request
from starlette.responses import Response

from services.console.errors import CSRF_MISSING, CsrfRefused, SignInFailed, SignInNeeded
from services.console.sessions import SessionStore, check_csrf, check_same, csrf_token
from services.operations.errors import Forbidden
from services.platform.bearer import BearerAuth, Unauthorized, bearer_token, token_digest

LOCAL_COOKIE = "settle_console"
# `__Host-`: a browser keeps it only when Secure, from the host itself, with Path=/.
SECURE_COOKIE = "__Host-settle_console"
# The sign-in form's own token, before there is a session: the same value in a cookie and in
# the form (another site can make a browser post the form, but can neither read nor set this
# SameSite=Strict cookie), so no other site can sign a browser in as someone else.
LOGIN_COOKIE = "settle_console_login"
LOGIN_TOKEN_BYTES = 32
FORBIDDEN = "a tenant's API token; the console needs an operator token (SETTLE_OPERATOR_TOKENS)"


class Caller(NamedTuple):
    """The operator behind a request."""

    operator: str  # the token's name: who the audit rows name
    session_id: str | None  # the cookie's session; None for a bearer request

    @property
    def csrf(self) -> str | None:
        """The form token each of this caller's forms carries; None for a bearer caller."""
        return None if self.session_id is None else csrf_token(self.session_id)


class Gate:
    """Resolves callers, signs operators in and out."""

    def __init__(
        self,
        operators: BearerAuth,
        tenants: BearerAuth,
        sessions: SessionStore,
        *,
        secure: bool,
    ) -> None:
        self._operators, self._tenants, self.sessions = operators, tenants, sessions
        self.secure = secure
        self.cookie = SECURE_COOKIE if secure else LOCAL_COOKIE
        self.login_cookie = f"__Host-{LOGIN_COOKIE}" if secure else LOGIN_COOKIE

    async def caller(self, request: Request) -> Caller:
        """The operator behind `request`; SignInNeeded, Unauthorized or Forbidden if none."""
        token = bearer_token(request.headers.get("authorization"))
        if token is not None:
            return Caller(self._bearer(token), None)
        session_id = request.cookies.get(self.cookie)
        if session_id:
            found = await self.sessions.session_of(session_id)
            # A session lasts only while the token it was opened with is still its operator's:
            # a token rotated or taken out of SETTLE_OPERATOR_TOKENS ends the sessions it opened
            # as soon as the console runs without it.
            if found is not None and self._operators.holds(found.operator, found.token_digest):
                return Caller(found.operator, session_id)
        raise SignInNeeded("sign in with an operator token")

    def _bearer(self, token: str) -> str:
        try:
            return self._operators.tenant_for(token)
        except Unauthorized:
            if token:
                try:
                    self._tenants.tenant_for(token)
                except Unauthorized:
                    pass
                else:
                    raise Forbidden(FORBIDDEN) from None
            raise Unauthorized("the bearer token is not an operator's") from None

    @staticmethod
    def check_form(caller: Caller, form_token: str | None) -> None:
        """Refuse a session's POST without the session's form token (bearer callers pass)."""
        if caller.session_id is not None:
            check_csrf(caller.session_id, form_token)

    def login_token(self, request: Request) -> str:
        """The sign-in form's token: the browser's, if it holds a well-formed one, else new."""
        held = request.cookies.get(self.login_cookie, "")
        well_formed = len(held) == 2 * LOGIN_TOKEN_BYTES and all(c in hexdigits for c in held)
        return held if well_formed else secrets.token_hex(LOGIN_TOKEN_BYTES)

    def check_login_form(self, request: Request, form_token: str | None) -> None:
        """Refuse (CsrfRefused) a sign-in whose form token is not the one its cookie holds."""
        held = request.cookies.get(self.login_cookie)
        if not held:
            raise CsrfRefused("sign-in needs the form's cookie: reload the page", code=CSRF_MISSING)
        check_same(held, form_token)

    async def sign_in(self, token: str) -> str:
        """A new session for the operator whose token this is; SignInFailed otherwise (the
        same refusal for an unknown token, a tenant's or none)."""
        try:
            operator = self._operators.tenant_for(token)
        except Unauthorized:
            raise SignInFailed() from None
        return await self.sessions.open(operator, token_digest(token))

    def set_cookie(self, response: Response, session_id: str) -> None:
        """Hand the session to the browser: HttpOnly, SameSite=Strict, Secure in production."""
        response.set_cookie(
            self.cookie,
            session_id,
            httponly=True,
            samesite="strict",
            secure=self.secure,
            path="/",
        )

    def set_login_cookie(self, response: Response, token: str) -> None:
        """Hand the sign-in form's token to the browser, as its session cookie is handed."""
        response.set_cookie(
            self.login_cookie,
            token,
            httponly=True,
            samesite="strict",
            secure=self.secure,
            path="/",
        )

    def clear_cookie(self, response: Response) -> None:
        """Tell the browser to forget the session."""
        response.delete_cookie(
            self.cookie, httponly=True, samesite="strict", secure=self.secure, path="/"
        )
