"""The HTTP edge every settle service shares: the error shape and the body cap (bearer tokens:
bearer.py).

Every error leaves as `{"error": {"code", "message", "field"}}` (canonical JSON, ASCII) with
the status its `ApiError` carries:

    ApiError (domain.errors)    `status`, `code`, `message`, `field`; Retry-After when set
    ├── StoreUnavailable        503 `store_unavailable` with Retry-After (domain.errors)
    ├── Unauthorized            401 with `WWW-Authenticate: Bearer`: no token, or an unknown one
    │                           (bearer.py, with the tokens themselves)
    └── BodyTooLarge            413 `body_too_large`: more bytes than the route's cap

Each service's own error base (LedgerError, InboxError) is an ApiError, so one handler answers
them all; FastAPI's own failures (bad parameters, unknown routes, crashes) get the same shape.
"""

from __future__ import annotations

import json
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Collection,
    Mapping,
)

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from services.domain.errors import ApiError
from services.platform.bearer import Unauthorized

JSON = "application/json"
INTERNAL_ERROR = "the ledger failed to answer; try again"
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


class BodyTooLarge(ApiError):
    """The request body is over the route's limit; nothing of it was acted on."""

    status = 413
    code = "body_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"the body is larger than {limit} bytes")


# --- the error shape --------------------------------------------------------------------


def error_body(code: str, message: str, field: str | None = None, **extra: object) -> bytes:
    """`{"error": {"code", "message", "field", **extra}}` as canonical JSON bytes.

    ASCII-escaped: a message may echo a field name the client sent, which need not be valid
    UTF-8 text."""
    error = {"code": code, "message": message, "field": field, **extra}
    return json.dumps({"error": error}, sort_keys=True, separators=(",", ":")).encode("ascii")


def error_response(
    status: int,
    code: str,
    message: str,
    field: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """A JSON error response in the one error shape."""
    return Response(error_body(code, message, field), status, headers, media_type=JSON)


def error_headers(error: ApiError) -> dict[str, str]:
    """The headers the status of `error` requires (WWW-Authenticate, Retry-After)."""
    headers: dict[str, str] = {}
    if isinstance(error, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    if error.retry_after_seconds is not None:
        headers["Retry-After"] = str(error.retry_after_seconds)
    return headers


def api_error_response(error: ApiError) -> Response:
    """The response `error` maps to, with the headers its status requires."""
    return error_response(
        error.status, error.code, error.message, error.field, error_headers(error)
    )


async def _api_error(_: Request, error: Exception) -> Response:
    if not isinstance(error, ApiError):  # registered for ApiError only
        raise error
    return api_error_response(error)


async def _validation_error(_: Request, error: Exception) -> Response:
    # Query and path parameters FastAPI checks itself: 400 naming the parameter, like
    # every other bad input, rather than FastAPI's own 422 shape.
    if not isinstance(error, RequestValidationError):
        raise error
    first = error.errors()[0]
    field = str(first["loc"][-1]) if first.get("loc") else None
    code = f"invalid_{field}" if field else "invalid_request"
    return error_response(400, code, str(first.get("msg", "invalid parameter")), field)


async def _http_error(_: Request, error: Exception) -> Response:
    if not isinstance(error, HTTPException):
        raise error
    code = _HTTP_CODES.get(error.status_code, "http_error")
    return error_response(error.status_code, code, str(error.detail), None, error.headers)


async def _unexpected(_: Request, error: Exception) -> Response:
    # Starlette re-raises after this handler, so the failure is still logged; the caller
    # gets the API's error shape instead of a bare text 500.
    return error_response(500, "internal_error", INTERNAL_ERROR)


def install_error_handlers(app: FastAPI) -> None:
    """Make `app` answer every failure in the one error shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)


# --- the body cap -----------------------------------------------------------------------


async def read_capped(
    chunks: AsyncIterable[bytes], content_length: str | bytes | None, limit: int
) -> bytes:
    """The whole body from `chunks`; BodyTooLarge (413) as soon as it would pass `limit` bytes.

    A declared Content-Length over the limit is refused before a byte is read; chunked or
    lying senders are refused before the chunk that crosses the limit is kept."""
    if content_length is not None and content_length.isdigit() and int(content_length) > limit:
        raise BodyTooLarge(limit)
    body = bytearray()
    async for chunk in chunks:
        if len(body) + len(chunk) > limit:
            raise BodyTooLarge(limit)
        body += chunk
    return bytes(body)


async def read_capped_body(request: Request, limit: int) -> bytes:
    """The raw body of `request`; BodyTooLarge (413) past `limit` bytes."""
    return await read_capped(request.stream(), request.headers.get("content-length"), limit)


async def asgi_body_chunks(receive: Receive) -> AsyncIterator[bytes]:
    """The body of a plain ASGI request, chunk by chunk; ClientDisconnect if the client left."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


# --- plain ASGI, for the hot routes served in front of FastAPI -----------------------------

# What a fast path's handler gives: status, JSON body, and the headers beyond the JSON ones.
JsonAnswer = tuple[int, bytes, Mapping[str, str]]


def first_headers(scope: Scope, names: Collection[bytes]) -> dict[bytes, str]:
    """The first value of each header in `names` (lower case, as ASGI sends names) that the
    request carries, Latin-1 decoded: what Starlette's `request.headers.get` gives."""
    found: dict[bytes, str] = {}
    for name, value in scope["headers"]:
        if name in names and name not in found:
            found[name] = value.decode("latin-1")
    return found


async def send_json(
    send: Send, status: int, body: bytes, headers: Mapping[str, str] | None = None
) -> None:
    """Send a whole JSON response with the headers, in the order, that Starlette's
    `Response(body, status, headers, media_type=JSON)` sends."""
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    raw.append((b"content-length", str(len(body)).encode("latin-1")))
    raw.append((b"content-type", b"application/json"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def answer_json(send: Send, answer: Awaitable[JsonAnswer]) -> None:
    """Send what `answer` gives, or the response `install_error_handlers` gives for what it
    raised: an ApiError in the error shape, any other failure as 500 (then re-raised so it
    is logged). A client gone before its body came gets nothing."""
    try:
        status, body, headers = await answer
    except ClientDisconnect:
        return
    except ApiError as e:
        status, body, headers = e.status, error_body(e.code, e.message, e.field), error_headers(e)
    except Exception:
        await send_json(send, 500, error_body("internal_error", INTERNAL_ERROR))
        raise
    await send_json(send, status, body, headers)
