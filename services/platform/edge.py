"""The HTTP edge every settle service shares: bearer-token auth, the error shape, the body cap.

Every error leaves as `{"error": {"code", "message", "field"}}` (canonical JSON, ASCII) with
the status its `ApiError` carries:

    ApiError (domain.errors)    `status`, `code`, `message`, `field`; Retry-After when set
    ├── StoreUnavailable        503 `store_unavailable` with Retry-After (domain.errors)
    ├── Unauthorized            401 with `WWW-Authenticate: Bearer`: no token, or an unknown one
    └── BodyTooLarge            413 `body_too_large`: more bytes than the route's cap

Each service's own error base (LedgerError, InboxError) is an ApiError, so one handler answers
them all; FastAPI's own failures (bad parameters, unknown routes, crashes) get the same shape.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Mapping,
)
from typing import Annotated

from fastapi import FastAPI, Request, Response, Security
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from services.domain.errors import ApiError

JSON = "application/json"
INTERNAL_ERROR = "the ledger failed to answer; try again"
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}


class Unauthorized(ApiError):
    """No bearer token, or one that names no tenant: 401 with `WWW-Authenticate: Bearer`."""

    status = 401
    code = "unauthorized"


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


# --- bearer tokens ----------------------------------------------------------------------


def token_digest(token: str) -> bytes:
    """The SHA-256 of a bearer token: what is compared, and kept where the token may not be."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class BearerAuth:
    """Maps a bearer token to its tenant in time independent of which token, if any, matches."""

    def __init__(self, tenant_by_token: Mapping[str, str]) -> None:
        if not all(tenant_by_token):
            raise ValueError("tenant_by_token: an empty token would let anyone in; remove it")
        # Comparing fixed-length digests hides the known tokens' lengths as well as contents.
        self._tenants = [(token_digest(token), tenant) for token, tenant in tenant_by_token.items()]
        self.names = frozenset(tenant_by_token.values())  # who holds a token now

    def tenant_for(self, token: str | None) -> str:
        """The tenant `token` belongs to; raise Unauthorized when it is missing or unknown."""
        if not token:
            raise Unauthorized("send Authorization: Bearer <token>")
        given = token_digest(token)
        found: str | None = None
        # No early exit: every known token is compared, so timing does not say which matched.
        for known, tenant in self._tenants:
            if hmac.compare_digest(given, known):
                found = tenant
        if found is None:
            raise Unauthorized("the bearer token is not one this ledger knows")
        return found

    def holds(self, tenant: str, digest: bytes | None) -> bool:
        """Whether `digest` (`token_digest`) is of a token `tenant` holds now."""
        held = False
        # No early exit, as in `tenant_for`.
        for known, name in self._tenants:
            if digest is not None and hmac.compare_digest(digest, known) and name == tenant:
                held = True
        return held


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the scheme in any case): None
    when the header is absent or names another scheme, "" when Bearer comes with no token."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="tenantToken",
    description="`Authorization: Bearer <token>`; the token names the tenant.",
)

Credentials = Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)]


def token_of(credentials: HTTPAuthorizationCredentials | None) -> str | None:
    """The bearer token sent, or None when there is none (or another scheme was used)."""
    return None if credentials is None else credentials.credentials


def tenant_dependency(auth: BearerAuth) -> Callable[..., Awaitable[str]]:
    """A FastAPI dependency giving the caller's tenant, raising Unauthorized (401) otherwise."""

    async def tenant(credentials: Credentials) -> str:
        return auth.tenant_for(token_of(credentials))

    return tenant


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
