"""How the bank's answer to an upload is classed: taken, held already (DU01), refused as a
file, or unknown; and the business day every answer states."""

from __future__ import annotations

from datetime import date

import orjson
import pytest
from multidict import CIMultiDict

from services.adapters.sepa.bank import bank_time, classify_upload
from services.domain.rail import RailOutcome, UnreadableRailObject
from services.platform.http1_wire import Answer


def answer(status: int, body: object = None, **headers: str) -> Answer:
    data = b"" if body is None else orjson.dumps(body)
    return Answer(status, CIMultiDict(headers), data)


@pytest.mark.parametrize(
    ("status", "body", "outcome", "file_id"),
    [
        (201, {"file_id": "f-1", "msg_id": "SETTLE-1"}, RailOutcome.ACCEPTED, "f-1"),
        (409, {"code": "DU01", "file_id": "f-1"}, RailOutcome.ACCEPTED, "f-1"),
        (409, {"code": "CONFLICT"}, RailOutcome.REFUSED, None),
        (400, {"code": "FF01", "message": "not pain.001"}, RailOutcome.REFUSED, None),
        (413, {"code": "FF01"}, RailOutcome.REFUSED, None),
        (429, None, RailOutcome.RETRYABLE, None),
        (503, {"code": "unavailable"}, RailOutcome.RETRYABLE, None),
        (500, None, RailOutcome.AMBIGUOUS, None),
        (504, b"<html>gateway</html>", RailOutcome.AMBIGUOUS, None),
    ],
)
def test_an_upload_answer_is_classed_by_what_it_proves(
    status: int, body: object, outcome: RailOutcome, file_id: str | None
) -> None:
    raw = Answer(status, CIMultiDict(), body) if isinstance(body, bytes) else answer(status, body)
    upload = classify_upload(raw)
    assert (upload.outcome, upload.bank_file_id, upload.status) == (outcome, file_id, status)


def test_a_refusal_keeps_the_banks_code_for_the_audit_trail() -> None:
    upload = classify_upload(answer(400, {"code": "FF01", "message": "CtrlSum differs"}))
    assert upload.detail == "FF01: CtrlSum differs"


def test_every_answer_states_the_business_day() -> None:
    stated = answer(
        200,
        {},
        **{"X-Bank-Business-Date": "2026-12-24", "X-Bank-Time": "2026-12-24T15:30:00+01:00"},
    )
    when = bank_time(stated)
    assert when.business_date == date(2026, 12, 24)
    assert when.time.hour == 15 and when.time.utcoffset() is not None
    with pytest.raises(UnreadableRailObject):
        bank_time(answer(200, {}))
