"""The bank's host-to-host API over HTTP, as /work/notes/bank_api.md lays it down: files in,
reports out, each answer stamped with the bank's business date and time.

Before every request the books are caught up with the clock, so a reader never sees a day
the clock has left unclosed. An upload is read up to the size cap and no further; its answer
may be lost on purpose after the file was taken (the lost-answer fault): a 504, or the
connection dropped mid-answer.
"""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from banksim.bank import Bank
from banksim.errors import AnswerDropped, BadQuery, FileRefused, Refusal
from banksim.iso import timestamp
from banksim.outcomes import Loss
from banksim.pain001 import read_payment_file

MAX_FILE_BYTES = 16 * 1024 * 1024
DEFAULT_LIMIT, MAX_LIMIT = 100, 1000
XML = "application/xml"


class BankHeaders:
    """ASGI middleware: catch the books up, then stamp the answer with X-Bank-Business-Date
    and X-Bank-Time."""

    def __init__(self, app: ASGIApp, bank: Bank) -> None:
        self.app, self.bank = app, bank

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on; add the bank's headers to the answer's start."""
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        self.bank.catch_up()

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                now = self.bank.clock.read()
                headers = list(message.get("headers", []))
                headers.append((b"x-bank-business-date", now.business_date.isoformat().encode()))
                headers.append((b"x-bank-time", timestamp(now.time).encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, stamped)


class DroppedAnswer(JSONResponse):
    """An answer that starts, then breaks off: the server closes the connection mid-answer."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the status and headers, then raise so the server drops the connection."""
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        raise AnswerDropped("the file was taken; its answer was dropped (the lost_answer fault)")


def file_routes(bank: Bank, max_file_bytes: int = MAX_FILE_BYTES) -> list[BaseRoute]:
    """The /v1 routes of the bank's API."""

    async def upload(request: Request) -> Response:
        body = await _capped_body(request, max_file_bytes)
        # the XSD check is the slow part (a second per thousand transfers): off the event loop
        done = bank.take(body, await run_in_threadpool(read_payment_file, body))
        answer = done.taken._asdict()
        if done.loss is Loss.GATEWAY_TIMEOUT:
            lost = {"code": "GATEWAY_TIMEOUT", "message": "no answer from the bank in time"}
            return JSONResponse(lost, status_code=504)
        if done.loss is Loss.DROPPED:
            return DroppedAnswer(answer, status_code=201)
        return JSONResponse(answer, status_code=201)

    async def files(request: Request) -> Response:
        return JSONResponse(bank.files(*_page(request)))

    async def one_file(request: Request) -> Response:
        return Response(bank.file(request.path_params["file_id"]), media_type=XML)

    async def reports(request: Request) -> Response:
        return JSONResponse(bank.reports(*_page(request), request.query_params.get("kind")))

    async def one_report(request: Request) -> Response:
        return Response(bank.report(request.path_params["report_id"]), media_type=XML)

    async def effects(_: Request) -> Response:
        return JSONResponse(bank.effects())

    async def clock(_: Request) -> Response:
        return JSONResponse(clock_answer(bank))

    return [
        Route("/v1/files", upload, methods=["POST"]),
        Route("/v1/files", files, methods=["GET"]),
        Route("/v1/files/{file_id}", one_file, methods=["GET"]),
        Route("/v1/reports", reports, methods=["GET"]),
        Route("/v1/reports/{report_id}", one_report, methods=["GET"]),
        Route("/v1/effects", effects, methods=["GET"]),
        Route("/v1/clock", clock, methods=["GET"]),
    ]


def clock_answer(bank: Bank) -> dict[str, object]:
    """{"business_date", "time", "day_seconds"} now."""
    now = bank.clock.read()
    return {
        "business_date": now.business_date.isoformat(),
        "time": timestamp(now.time),
        "day_seconds": bank.clock.day_seconds,
    }


async def refused(_: Request, error: Exception) -> Response:
    """A Refusal as the bank's JSON error answer."""
    assert isinstance(error, Refusal)
    return JSONResponse(error.answer(), status_code=error.status)


async def unrouted(_: Request, error: Exception) -> Response:
    """Starlette's own refusals (no such route, method not allowed) in the bank's shape."""
    assert isinstance(error, HTTPException)
    code = "NOT_FOUND" if error.status_code == 404 else f"HTTP_{error.status_code}"
    return JSONResponse({"code": code, "message": error.detail}, status_code=error.status_code)


async def _capped_body(request: Request, cap: int) -> bytes:
    """The request's body; FileRefused (413) as soon as it is known to pass `cap` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise FileRefused(f"the file is larger than {cap} bytes", too_large=True)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise FileRefused(f"the file is larger than {cap} bytes", too_large=True)
        chunks.append(chunk)
    return b"".join(chunks)


def _page(request: Request) -> tuple[int, int]:
    """The `after` cursor and the `limit` of a listing; BadQuery if either is unusable."""
    after = request.query_params.get("after") or "0"
    limit = request.query_params.get("limit") or str(DEFAULT_LIMIT)
    if not after.isdigit() or not limit.isdigit() or not 1 <= int(limit) <= MAX_LIMIT:
        raise BadQuery(f"after must be a cursor from `next`; limit between 1 and {MAX_LIMIT}")
    return int(after), int(limit)
