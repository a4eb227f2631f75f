"""The bank's clock and its memory: business days pass every `day_seconds` on the TARGET2
calendar, each answer carries the bank's date and time, and a bank restarted over its state
directory knows every file, report and booking and continues the same calendar, catching up
the days it was down."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date
from pathlib import Path

import httpx
import pytest

from banksim.app import create_app
from banksim.bank import Bank
from banksim.clock import ManualClock
from banksim.faults import Faults
from banksim.payment_files import Transfer, one_transfer_file

MONDAY = date(2026, 1, 5)


@pytest.fixture
def wall() -> ManualClock:
    return ManualClock()


@asynccontextmanager
async def serving(bank: Bank) -> AsyncIterator[httpx.AsyncClient]:
    """A client of `bank`'s app, in process."""
    transport = httpx.ASGITransport(app=create_app(bank))
    async with httpx.AsyncClient(transport=transport, base_url="http://bank") as client:
        yield client


async def test_a_business_day_spans_day_seconds_and_every_answer_says_when_it_is(
    tmp_path: Path, wall: ManualClock
) -> None:
    bank = Bank.open(tmp_path / "bank", wall, 20.0, date(2026, 1, 2), Faults())
    async with serving(bank) as client:
        wall.advance(12.5)  # 15:00, the usual cut-off, of the first day
        for path in ("/v1/clock", "/v1/files", "/healthz", "/v1/reports/rpt_nothing"):
            answer = await client.get(path)
            assert answer.headers["x-bank-business-date"] == "2026-01-02"
            assert answer.headers["x-bank-time"] == "2026-01-02T15:00:00+01:00"
        clock = (await client.get("/v1/clock")).json()
        assert clock == {
            "business_date": "2026-01-02",
            "time": "2026-01-02T15:00:00+01:00",
            "day_seconds": 20.0,
        }
        wall.advance(7.5)  # Friday ends; the weekend is no business day
        assert (await client.get("/v1/clock")).json()["business_date"] == "2026-01-05"
        advanced = (await client.post("/_control/advance")).json()
        assert advanced["business_date"] == "2026-01-06"
        assert advanced["time"] == "2026-01-06T00:00:00+01:00"
    bank.close()


async def test_a_restarted_bank_keeps_its_files_effects_reports_and_calendar(
    tmp_path: Path, wall: ManualClock
) -> None:
    state = tmp_path / "bank"
    bank = Bank.open(state, wall, 20.0, MONDAY, Faults())
    body = one_transfer_file(
        "MSG-KEPT", Transfer("E2E-KEPT"), Transfer("E2E-BACK", remittance="return:AC04:2")
    )
    async with serving(bank) as client:
        assert (await client.post("/v1/files", content=body)).status_code == 201
        wall.advance(25)  # into Tuesday
        before = (await client.get("/v1/reports")).json()
    bank.close()

    wall.advance(40)  # down for two business days' worth: the bank's time stood still
    # another start date and day length on the command line change nothing of the calendar
    again = Bank.open(state, wall, 20.0, date(2030, 6, 3), Faults())
    async with serving(again) as client:
        # It resumes at the start of the day after Tuesday, the last day its books were in.
        assert (await client.get("/v1/clock")).json()["business_date"] == "2026-01-07"
        files = (await client.get("/v1/files")).json()["files"]
        assert [f["msg_id"] for f in files] == ["MSG-KEPT"]
        assert (await client.get(f"/v1/files/{files[0]['file_id']}")).content == body
        refused = await client.post("/v1/files", content=body)
        assert (refused.status_code, refused.json()["code"]) == (409, "DU01")
        effects = (await client.get("/v1/effects")).json()
        assert effects == {"debits": {"E2E-KEPT": 1, "E2E-BACK": 1}, "returns": {"E2E-BACK": 1}}
        after = (await client.get("/v1/reports", params={"after": before["next"]})).json()
        kinds = [(r["kind"], r["business_date"]) for r in after["reports"]]
        assert kinds == [
            ("camt.053", "2026-01-06"),
            ("camt.054", "2026-01-07"),  # the return, two business days after Monday
        ]
    again.close()


async def test_a_restart_with_another_day_length_keeps_today_and_the_time_of_day(
    tmp_path: Path, wall: ManualClock
) -> None:
    Bank.open(tmp_path / "bank", wall, 20.0, MONDAY, Faults()).close()
    wall.advance(30)  # Tuesday noon
    again = Bank.open(tmp_path / "bank", wall, 4.0, MONDAY, Faults())
    now = again.clock.read()
    assert (now.business_date, now.time.hour) == (date(2026, 1, 6), 12)
    wall.advance(2)  # half of a 4-second day
    assert again.clock.today() == date(2026, 1, 7)
    again.close()


async def test_the_report_listing_pages_by_cursor_and_filters_by_kind(
    tmp_path: Path, wall: ManualClock
) -> None:
    bank = Bank.open(tmp_path / "bank", wall, 20.0, MONDAY, Faults())
    async with serving(bank) as client:
        for n in range(3):
            body = one_transfer_file(f"MSG-PAGE-{n}", Transfer(f"E2E-PAGE-{n}"))
            assert (await client.post("/v1/files", content=body)).status_code == 201
        first = (await client.get("/v1/reports", params={"limit": 4})).json()
        rest = (await client.get("/v1/reports", params={"after": first["next"]})).json()
        listed = first["reports"] + rest["reports"]
        assert [r["kind"] for r in listed] == ["pain.002", "camt.054", "pain.002"] * 3
        assert len({r["report_id"] for r in listed}) == 9
        end = (await client.get("/v1/reports", params={"after": rest["next"]})).json()
        assert end == {"reports": [], "next": None}
        notices = (await client.get("/v1/reports", params={"kind": "camt.054"})).json()
        assert [r["kind"] for r in notices["reports"]] == ["camt.054"] * 3
        for query in ({"limit": "0"}, {"after": "x"}, {"kind": "camt.052"}):
            refused = await client.get("/v1/reports", params=query)
            assert (refused.status_code, refused.json()["code"]) == (400, "BAD_QUERY")
        files = (await client.get("/v1/files", params={"limit": 2})).json()
        more = (await client.get("/v1/files", params={"after": files["next"]})).json()
        assert [f["msg_id"] for f in files["files"] + more["files"]] == [
            "MSG-PAGE-0",
            "MSG-PAGE-1",
            "MSG-PAGE-2",
        ]
    bank.close()
