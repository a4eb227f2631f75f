"""Reading a request body without ever holding more of it than the limit allows."""

from __future__ import annotations

from starlette.requests import Request

from services.ledger.errors import InvalidRequest


def _too_large(limit: int) -> InvalidRequest:
    return InvalidRequest(
        f"the body is larger than {limit} bytes", code="body_too_large", status=413
    )


async def read_capped_body(request: Request, limit: int) -> bytes:
    """The raw body of `request`; InvalidRequest 413 `body_too_large` past `limit` bytes."""
    declared = request.headers.get("content-length")
    # A declared length over the limit is refused before a byte is read.
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    body = bytearray()
    # Chunked or lying senders: the cap is checked before each chunk is kept.
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise _too_large(limit)
        body += chunk
    return bytes(body)
