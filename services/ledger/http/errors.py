"""Every error leaves as `{"error": {"code", "message", "field"}}` with the right status."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from services.ledger.auth import Unauthorized
from services.ledger.errors import LedgerError
from services.ledger.responses import error_body
from services.shared.errors import StoreUnavailable

JSON = "application/json"
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A JSON error response in the API's one error shape."""
    return Response(error_body(code, message, field), status, headers, media_type=JSON)


def ledger_error_response(error: LedgerError | StoreUnavailable) -> Response:
    """The response a LedgerError (or StoreUnavailable) maps to, with the headers its status
    requires."""
    headers: dict[str, str] = {}
    if isinstance(error, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(error, StoreUnavailable):
        headers["Retry-After"] = str(error.retry_after_seconds)
    return error_response(error.status, error.code, error.message, error.field, headers)


async def _ledger_error(_: Request, error: Exception) -> Response:
    assert isinstance(error, LedgerError | StoreUnavailable)
    return ledger_error_response(error)


async def _validation_error(_: Request, error: Exception) -> Response:
    # Query and path parameters FastAPI checks itself: 400 naming the parameter, like
    # every other bad input, rather than FastAPI's own 422 shape.
    assert isinstance(error, RequestValidationError)
    first = error.errors()[0]
    field = str(first["loc"][-1]) if first.get("loc") else None
    code = f"invalid_{field}" if field else "invalid_request"
    return error_response(400, code, str(first.get("msg", "invalid parameter")), field)


async def _http_error(_: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    code = _HTTP_CODES.get(error.status_code, "http_error")
    return error_response(error.status_code, code, str(error.detail), None, error.headers)


async def _unexpected(_: Request, error: Exception) -> Response:
    # Starlette re-raises after this handler, so the failure is still logged; the caller
    # gets the API's error shape instead of a bare text 500.
    return error_response(500, "internal_error", "the ledger failed to answer; try again")


def install_error_handlers(app: FastAPI) -> None:
    """Make `app` answer every failure in the API's error shape."""
    app.add_exception_handler(LedgerError, _ledger_error)
    app.add_exception_handler(StoreUnavailable, _ledger_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
