"""The bank's host-to-host interface, as settle's SEPA rail calls it: upload a payment file,
list and fetch the files and reports the bank holds (a page at a time, or a whole listing with
`listed`), read its business day.

An upload's answer is classed as the rail port classes a call (services/domain/rail.py):

    201                      ACCEPTED   the bank took the file
    409 DU01                 ACCEPTED   the bank has a file under this MsgId already: an
                                        earlier upload whose answer was lost did reach it
    400 / 413 (FF01, ...)    REFUSED    the bank refused the file as a file: it took nothing
    429, 503, not sent       RETRYABLE  the bank did nothing; upload the same bytes later
    other 5xx, answer lost   AMBIGUOUS  the bank may have taken it; upload the same bytes later

The bank deduplicates by MsgId and by nothing else, so the one safe way to resolve a lost
answer is to upload the identical file again: DU01 proves the bank has it, an acceptance
proves it had not. The upload goes through settle's HTTP client, which asks the send gate
(services/platform/send_gate.py) before its first byte leaves. Reads that fail raise
RailUnreadable: the bank's silence is never "no reports".

Every answer states the bank's business date and time of day (`X-Bank-Business-Date`,
`X-Bank-Time`); `clock()` reads them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import date, datetime
from typing import Literal, NamedTuple
from urllib.parse import urlencode

import orjson

from services.domain.rail import RailOutcome, RailUnreadable, UnreadableRailObject
from services.platform.http1 import AnswerLost, HTTP1Client, NotSent
from services.platform.http1_wire import Answer

XML = {"content-type": "application/xml"}
OK, TAKEN, HELD = 200, 201, 409
SERVER_ERRORS = 500
RETRY_LATER = frozenset({429, 503})
DUPLICATE_MESSAGE = "DU01"
Listing = Literal["files", "reports"]


class Upload(NamedTuple):
    """What one upload of a file came to."""

    outcome: RailOutcome
    bank_file_id: str | None = None  # the bank's id of the file, once it holds it
    detail: str = ""  # the bank's code and message, for the audit trail
    status: int | None = None  # the HTTP status, when an answer came


class BankTime(NamedTuple):
    """The bank's business date and its time of day (Central European time)."""

    business_date: date
    time: datetime


class Listed(NamedTuple):
    """One page of a listing (files or reports): its items and where the next page starts."""

    items: list[dict[str, object]]
    next: str | None


class Bank:
    """The bank at `base_url`; see the module docstring."""

    def __init__(self, base_url: str, *, timeout: float, connections: int = 4) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = HTTP1Client(
            timeout=timeout, connect_timeout=timeout / 2, connections=connections
        )

    async def upload(self, content: bytes) -> Upload:
        """Upload one pain.001 file; the answer classed as in the module docstring."""
        try:
            answer = await self._http.request("POST", f"{self.base_url}/v1/files", XML, content)
        except NotSent as e:
            return Upload(RailOutcome.RETRYABLE, detail=f"not sent: {e}")
        except AnswerLost as e:
            return Upload(RailOutcome.AMBIGUOUS, detail=f"answer lost: {e}")
        return classify_upload(answer)

    async def clock(self) -> BankTime:
        """The bank's business date and time of day."""
        answer = await self._get("/v1/clock")
        return bank_time(answer)

    async def files(self, after: str | None = None, limit: int = 500) -> Listed:
        """The files the bank received, in the order received, after cursor `after`."""
        return await self._listing("/v1/files", "files", after, limit)

    async def file(self, file_id: str) -> bytes:
        """A received file's bytes, as uploaded."""
        return (await self._get(f"/v1/files/{file_id}")).body

    async def reports(
        self, after: str | None = None, limit: int = 500, kind: str | None = None
    ) -> Listed:
        """The reports the bank delivered, in delivery order, after cursor `after`."""
        query = {"kind": kind} if kind else {}
        return await self._listing("/v1/reports", "reports", after, limit, query)

    async def report(self, report_id: str) -> bytes:
        """A report's XML bytes."""
        return (await self._get(f"/v1/reports/{report_id}")).body

    async def listing_pages(self, what: Listing, kind: str | None = None) -> AsyncIterator[Listed]:
        """Every page of the bank's listing of `what` (the files it received, or the reports
        it delivered, of one `kind` only if given), from the first: each page's `next` is
        followed until a page comes back empty (not yielded) or names no next one."""
        after: str | None = None
        while True:
            page = await (self.files(after) if what == "files" else self.reports(after, kind=kind))
            if not page.items:
                return
            yield page
            if page.next is None:
                return  # the last page says so itself
            after = page.next

    async def listed(
        self, what: Listing, kind: str | None = None
    ) -> AsyncIterator[dict[str, object]]:
        """Every item of the bank's listing of `what` (files, or reports of one `kind` only if
        given), in the bank's order, read page by page to the listing's end (see
        `listing_pages`). Nothing is kept between calls: each starts from the first page."""
        async for page in self.listing_pages(what, kind):
            for item in page.items:
                yield item

    async def effects(self) -> dict[str, object]:
        """The bank's own count of debits (and returns) per EndToEndId."""
        return _json_object(await self._get("/v1/effects"), "/v1/effects")

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _listing(
        self,
        path: str,
        field: str,
        after: str | None,
        limit: int,
        query: dict[str, str] | None = None,
    ) -> Listed:
        params = {**(query or {}), "limit": str(limit), **({"after": after} if after else {})}
        body = _json_object(await self._get(f"{path}?{urlencode(params)}"), path)
        items, following = body.get(field), body.get("next")
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise UnreadableRailObject(path, f"`{field}` is not a list of objects")
        if following is not None and not isinstance(following, str):
            raise UnreadableRailObject(path, "`next` is neither a cursor nor null")
        return Listed(items, following)

    async def _get(self, path: str) -> Answer:
        try:
            answer = await self._http.request("GET", f"{self.base_url}{path}", {})
        except (NotSent, AnswerLost) as e:
            raise RailUnreadable(f"GET {path}: {e}") from e
        if answer.status != OK:
            raise RailUnreadable(f"GET {path}: HTTP {answer.status}")
        return answer


def classify_upload(answer: Answer) -> Upload:
    """An upload's answer, classed as in the module docstring."""
    status = answer.status
    body = _maybe_json(answer.body)
    code = str(body.get("code", "")) if body else ""
    detail = f"{code}: {body.get('message', '')}".strip(": ") if body else f"HTTP {status}"
    if status == TAKEN:
        return Upload(RailOutcome.ACCEPTED, _text(body, "file_id"), detail="taken", status=status)
    if status == HELD and code == DUPLICATE_MESSAGE:
        held = _text(body, "file_id")
        return Upload(RailOutcome.ACCEPTED, held, detail=f"{code}: the bank has it", status=status)
    if status in RETRY_LATER:
        return Upload(RailOutcome.RETRYABLE, detail=detail, status=status)
    if status >= SERVER_ERRORS:
        return Upload(RailOutcome.AMBIGUOUS, detail=detail, status=status)
    return Upload(RailOutcome.REFUSED, detail=detail or f"HTTP {status}", status=status)


def bank_time(answer: Answer) -> BankTime:
    """The business date and time of day an answer of the bank states."""
    day, moment = answer.headers.get("x-bank-business-date"), answer.headers.get("x-bank-time")
    try:
        return BankTime(date.fromisoformat(day or ""), datetime.fromisoformat(moment or ""))
    except ValueError as e:
        raise UnreadableRailObject("clock", f"no business date and time in the answer: {e}") from e


def _maybe_json(body: bytes) -> dict[str, object] | None:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _json_object(answer: Answer, what: str) -> dict[str, object]:
    data = _maybe_json(answer.body)
    if data is None:
        raise UnreadableRailObject(what, "the answer is not a JSON object")
    return data


def _text(body: dict[str, object] | None, field: str) -> str | None:
    value = body.get(field) if body else None
    return value if isinstance(value, str) else None
