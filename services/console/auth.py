"""Who is asking: an operator's session cookie, or `Authorization: Bearer <operator token>`.

A bearer request needs no cookie and no form token (a script holds the token itself, and a
browser never sends it on its own). A tenant's API token is known but is not an operator's:
403. A sign-in answers the same whatever was wrong, and no token is echoed or logged.
"""

from __future__ import annotations

from typing import NamedTuple

from starlette.requests import Request
from starlette.responses import Response

from services.console.errors import SignInFailed, SignInNeeded
from services.console.sessions import SessionStore, check_csrf, csrf_token
from services.operations.errors import Forbidden
from services.shared.edge import BearerAuth, Unauthorized

LOCAL_COOKIE = "settle_console"
# `__Host-`: a browser keeps it only when Secure, from the host itself, with Path=/.
SECURE_COOKIE = "__Host-settle_console"
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
        self, operators: BearerAuth, tenants: BearerAuth, sessions: SessionStore, *,
        secure: bool,
    ) -> None:  # fmt: skip
        self._operators, self._tenants, self.sessions = operators, tenants, sessions
        self.secure = secure
        self.cookie = SECURE_COOKIE if secure else LOCAL_COOKIE

    async def caller(self, request: Request) -> Caller:
        """The operator behind `request`; SignInNeeded, Unauthorized or Forbidden if none."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            return Caller(self._bearer(token.strip()), None)
        session_id = request.cookies.get(self.cookie)
        if session_id:
            operator = await self.sessions.operator_of(session_id)
            if operator is not None:
                return Caller(operator, session_id)
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

    async def sign_in(self, token: str) -> str:
        """A new session for the operator whose token this is; SignInFailed otherwise (the
        same refusal for an unknown token, a tenant's or none)."""
        try:
            operator = self._operators.tenant_for(token)
        except Unauthorized:
            raise SignInFailed() from None
        return await self.sessions.open(operator)

    def set_cookie(self, response: Response, session_id: str) -> None:
        """Hand the session to the browser: HttpOnly, SameSite=Strict, Secure in production."""
        response.set_cookie(
            self.cookie, session_id, httponly=True, samesite="strict", secure=self.secure,
            path="/",
        )  # fmt: skip

    def clear_cookie(self, response: Response) -> None:
        """Tell the browser to forget the session."""
        response.delete_cookie(
            self.cookie, httponly=True, samesite="strict", secure=self.secure, path="/"
        )
