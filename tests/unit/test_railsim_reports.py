"""Stripe's Reporting API at the simulator: report types whose data ends where Stripe's does,
runs checked as Stripe checks them and succeeding a little later, and their CSV: default
and explicit columns, amounts in exact major units, payouts in a report of their own."""

from __future__ import annotations

import csv
import json
from typing import Any

import pytest

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.faults import Faults
from railsim.habits import account_habits
from railsim.objects import Payout, Transfer
from railsim.params import Kind
from railsim.replies import Reply
from railsim.statement import Line, major_units, render
from services.adapters.stripe.report_types import (
    BALANCE_DEFAULT_COLUMNS,
    BALANCE_REPORT,
    PAYOUTS_DEFAULT_COLUMNS,
    PAYOUTS_REPORT,
)

START = 1_700_000_000  # 2023-11-14 22:13:20 UTC, a Tuesday
SID = "5b0c1d9e-0000-4000-8000-000000000001"
FILES = "http://files.test"


def body(reply: Reply) -> Any:
    return json.loads(reply.body)


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(text.splitlines()))


def sim(clock: ManualClock, **habits: float) -> RailSim:
    settings = {"report_data_interval": 1, **habits}
    return RailSim(
        clock=clock,
        faults=Faults(reversal_delay_ms=1000, payout_delay_ms=1000),
        habits=account_habits("none", **settings),
    )


def transfer(
    rail: RailSim, amount: int, destination: str = "acct_ok", currency: str = "eur"
) -> Any:
    pairs = [
        ("amount", str(amount)),
        ("currency", currency),
        ("destination", destination),
        ("metadata[settlement_id]", SID),
        ("transfer_group", SID),
    ]
    return body(rail.create(Kind.TRANSFER, pairs))


def run(rail: RailSim, clock: ManualClock, *pairs: tuple[str, str]) -> str:
    """Create a run of `pairs`, let it finish, and answer its file's contents."""
    created = rail.create_report_run(pairs, FILES)
    assert created.status == 200, body(created)
    assert body(created)["status"] == "pending" and body(created)["result"] is None
    clock.advance(1)
    done = body(rail.retrieve_report_run(body(created)["id"], FILES))
    assert done["status"] == "succeeded" and done["succeeded_at"] is not None
    result = done["result"]
    assert result["object"] == "file" and result["id"].startswith("file_")
    assert result["url"] == f"{FILES}/v1/files/{result['id']}/contents"
    contents = rail.file_contents(result["id"])
    assert contents is not None and result["size"] == len(contents)
    return contents.decode()


def window(start: int, end: int) -> list[tuple[str, str]]:
    return [("parameters[interval_start]", str(start)), ("parameters[interval_end]", str(end))]


@pytest.mark.parametrize(
    ("amount", "currency", "text"),
    [(-1250, "usd", "-12.50"), (5, "eur", "0.05"), (-1000, "jpy", "-1000"), (-1, "kwd", "-0.001")],
)
def test_amounts_are_exact_major_units(amount: int, currency: str, text: str) -> None:
    assert major_units(amount, currency) == text


def test_a_run_of_the_balance_report_has_its_default_columns_and_no_payout_line() -> None:
    clock = ManualClock(START)
    rail = sim(clock)
    made = transfer(rail, 1050)
    rail.create(Kind.PAYOUT, [("amount", "300"), ("currency", "eur")])
    clock.advance(5)

    text = run(rail, clock, ("report_type", BALANCE_REPORT), *window(START, START + 5))
    assert text.splitlines()[0] == ",".join(BALANCE_DEFAULT_COLUMNS)
    (line,) = rows(text)
    assert (line["source_id"], line["gross"], line["fee"], line["net"]) == (
        made["id"],
        "-10.50",
        "0.00",
        "-10.50",
    )
    assert line["created_utc"] == line["created"] == "2023-11-14 22:13:20"
    assert line["reporting_category"] == "transfer" and line["customer_facing_amount"] == ""


def test_explicit_columns_come_in_the_order_asked_and_reversals_carry_the_transfer() -> None:
    clock = ManualClock(START)
    rail = sim(clock)
    made = transfer(rail, 1051, "acct_partial_1")
    clock.advance(5)
    columns = ["reporting_category", "gross", "connected_account_id"]
    columns += ["transfer_metadata[settlement_id]", "automatic_payout_id"]
    pairs = [(f"parameters[columns][{i}]", c) for i, c in enumerate(columns)]

    text = run(rail, clock, ("report_type", BALANCE_REPORT), *window(START, START + 5), *pairs)
    assert text.splitlines()[0] == ",".join(columns)
    assert [list(r.values()) for r in rows(text)] == [
        ["transfer", "-10.51", made["destination"], SID, ""],
        ["transfer_reversal", "5.25", made["destination"], SID, ""],
    ]


def test_the_payouts_report_has_the_payout_and_its_money_back() -> None:
    clock = ManualClock(START)
    rail = sim(clock)
    pairs = [("amount", "700"), ("currency", "gbp"), ("destination", "acct_fail_1")]
    payout = body(rail.create(Kind.PAYOUT, [*pairs, ("description", "weekly")]))
    transfer(rail, 5)
    clock.advance(5)

    text = run(rail, clock, ("report_type", PAYOUTS_REPORT), *window(START, START + 5))
    assert text.splitlines()[0] == ",".join(PAYOUTS_DEFAULT_COLUMNS)
    paid, back = rows(text)
    assert [paid["reporting_category"], back["reporting_category"]] == ["payout", "payout_reversal"]
    assert (paid["gross"], back["gross"]) == ("-7.00", "7.00")
    assert paid["payout_id"] == back["payout_id"] == payout["id"]
    assert paid["payout_status"] == "failed" and paid["payout_destination_id"] == "acct_fail_1"
    assert paid["effective_at_utc"] == "2023-11-14 22:13:20"
    assert paid["payout_reversed_at_utc"] == back["effective_at_utc"] == "2023-11-14 22:13:21"
    assert paid["payout_expected_arrival_date"] == "2023-11-14"
    assert (paid["payout_type"], paid["payout_description"]) == ("bank_account", "weekly")


def test_the_time_zone_and_filters_are_honoured() -> None:
    clock = ManualClock(START)
    rail = sim(clock)
    transfer(rail, 100, currency="eur")
    transfer(rail, 200, currency="usd")
    clock.advance(5)
    asked = [("parameters[timezone]", "America/New_York"), ("parameters[currency]", "USD")]

    text = run(rail, clock, ("report_type", BALANCE_REPORT), *window(START, START + 5), *asked)
    (line,) = rows(text)
    assert line["currency"] == "usd" and line["gross"] == "-2.00"
    assert (line["created_utc"], line["created"]) == ("2023-11-14 22:13:20", "2023-11-14 17:13:20")


def test_a_report_type_holds_data_up_to_the_start_of_the_current_period() -> None:
    clock = ManualClock(START)  # 22:13:20
    rail = sim(clock, report_data_interval=3600)
    answer = body(rail.report_type(BALANCE_REPORT))
    assert answer["object"] == "reporting.report_type" and answer["id"] == BALANCE_REPORT
    assert answer["data_available_end"] == START - 13 * 60 - 20  # 22:00:00
    assert answer["data_available_start"] == 1_699_920_000  # the day's midnight
    assert answer["default_columns"] == list(BALANCE_DEFAULT_COLUMNS)
    assert rail.report_type("balance.summary.1").status == 404


@pytest.mark.parametrize(
    ("pairs", "param"),
    [
        (
            [("report_type", BALANCE_REPORT), ("parameters[interval_end]", str(START))],
            "interval_end",
        ),
        ([("report_type", "balance.summary.1")], "report_type"),
        ([("report_type", PAYOUTS_REPORT), ("parameters[columns][]", "nope")], "columns"),
        ([("report_type", PAYOUTS_REPORT), ("parameters[timezone]", "Mars/Base")], "timezone"),
        ([("report_type", BALANCE_REPORT), *window(START - 20, START - 20)], "interval_start"),
        ([("report_type", BALANCE_REPORT), ("parameters[colour]", "red")], "colour"),
    ],
)
def test_runs_stripe_refuses_are_refused_as_stripe_does(
    pairs: list[tuple[str, str]], param: str
) -> None:
    clock = ManualClock(START)
    rail = sim(clock, report_data_interval=3600)
    refused = rail.create_report_run(pairs, FILES)
    assert refused.status == 400
    error = body(refused)["error"]
    assert error["type"] == "invalid_request_error" and param in error["param"]


def test_columns_sent_as_a_plain_list_are_read_too() -> None:
    clock = ManualClock(START)
    rail = sim(clock)
    transfer(rail, 100)
    clock.advance(5)
    pairs = [("parameters[columns][]", "gross"), ("parameters[columns][]", "currency")]
    text = run(rail, clock, ("report_type", BALANCE_REPORT), *window(START, START + 5), *pairs)
    assert text.splitlines() == ["gross,currency", "-1.00,eur"]


def test_a_run_is_pending_until_it_is_due() -> None:
    clock = ManualClock(START)
    rail = sim(clock, report_run_seconds=30)
    created = body(rail.create_report_run([("report_type", PAYOUTS_REPORT)], FILES))
    assert created["parameters"]["interval_end"] == START
    clock.advance(29)
    assert body(rail.retrieve_report_run(created["id"], FILES))["status"] == "pending"
    clock.advance(1)
    done = body(rail.retrieve_report_run(created["id"], FILES))
    assert done["status"] == "succeeded" and done["succeeded_at"] == START + 30
    assert body(rail.retrieve_file(done["result"]["id"], FILES)) == done["result"]
    listed = body(rail.list_report_runs([], FILES))["data"]
    assert [r["id"] for r in listed] == [created["id"]]


def test_rendering_a_line_by_hand() -> None:
    transfer_ = Transfer("tr_1", 500, "jpy", "acct_1", START, metadata={"settlement_id": SID})
    txn = {
        "id": "txn_1",
        "created": START,
        "available_on": START + 60,
        "currency": "jpy",
        "amount": -500,
        "fee": 0,
        "net": -500,
        "reporting_category": "transfer",
        "source": "tr_1",
        "description": None,
        "type": "transfer",
    }
    text = render(
        ["gross", "available_on_utc", "transfer_metadata[settlement_id]", "connected_account_id"],
        [Line(txn, transfer_)],
    )
    assert text.splitlines()[1] == f"-500,2023-11-14 22:14:20,{SID},acct_1"
    automatic = Payout("po_1", 9, "usd", None, START, arrival_date=START + 86_400, automatic=True)
    assert Line({**txn, "type": "payout"}, payout=automatic).effective_at == START + 86_400
