"""Errors of the console; each carries the status and machine-readable code its page shows.

ApiError (domain.errors)
├── SignInFailed        401 `sign_in_failed`: the same answer whatever was wrong
├── SignInNeeded        401 `unauthorized`: no session and no operator bearer token
├── CsrfRefused         403 `csrf_missing` | `csrf_invalid`: a POST without its form token
├── PageNotFound        404 `not_found`
├── MethodNotAllowed    405 `method_not_allowed`
└── PageFailed          500 `internal_error`: anything unforeseen, logged with its traceback
"""

from __future__ import annotations

from services.domain.errors import ApiError

CSRF_MISSING = "csrf_missing"
CSRF_INVALID = "csrf_invalid"


class SignInFailed(ApiError):
    """A sign-in was refused; never says whether the token was unknown or a tenant's."""

    status = 401
    code = "sign_in_failed"

    def __init__(self) -> None:
        super().__init__("sign-in failed: check the operator token and try again")


class SignInNeeded(ApiError):
    """The request carries neither a live session nor an operator bearer token."""

    status = 401
    code = "unauthorized"


class CsrfRefused(ApiError):
    """A POST from a session without the session's form token; nothing was done."""

    status = 403
    code = CSRF_INVALID


class PageNotFound(ApiError):
    """No page, or no settlement, at that address."""

    status = 404
    code = "not_found"


class MethodNotAllowed(ApiError):
    """A page asked for with a method it does not answer (a GET of an action's address)."""

    status = 405
    code = "method_not_allowed"


class PageFailed(ApiError):
    """Something unforeseen failed; the page says so rather than answering blank."""

    status = 500
    code = "internal_error"
