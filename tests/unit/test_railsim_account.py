"""A live platform account at the simulator: fees and net as Stripe books them, the account's
own charges, fees, transfers and automatic payouts on the simulator's clock (never announced
to settle), payouts that go in transit and arrive on bank days, reversals in parts, and a
journal that brings every object back after a restart."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from railsim.clock import ManualClock
from railsim.core import RailSim
from railsim.errors import JournalError
from railsim.faults import Faults
from railsim.fees import card_fee, connect_fee, fee_detail, instant_payout_fee
from railsim.habits import HabitsError, account_habits, arrival_date
from railsim.journal import JOURNAL_NAME
from railsim.params import Kind
from railsim.replies import Delivery, Reply

START = 1_700_000_000  # 2023-11-14 22:13:20 UTC, a Tuesday
SID = "5b0c1d9e-0000-4000-8000-000000000001"
FAST = Faults(reversal_delay_ms=1000, payout_delay_ms=1000)


def body(reply: Reply) -> Any:
    return json.loads(reply.body)


def events(deliveries: list[Delivery]) -> list[Any]:
    return [json.loads(d.payload) for d in deliveries]


def realistic(clock: ManualClock, data_dir: Path | None = None, **settings: Any) -> RailSim:
    habits = account_habits("realistic", report_data_interval=1, **settings)
    return RailSim(clock=clock, faults=FAST, habits=habits, data_dir=data_dir)


def listed(call: Reply) -> list[Any]:
    return list(body(call)["data"])


def every_txn(rail: RailSim) -> list[Any]:
    return listed(rail.list_balance_transactions([("limit", "100")]))


def form(amount: int = 1050, destination: str = "acct_ok", **extra: str) -> list[tuple[str, str]]:
    return [
        ("amount", str(amount)),
        ("currency", "eur"),
        ("destination", destination),
        ("metadata[settlement_id]", SID),
        *extra.items(),
    ]


def test_fees_are_whole_minor_units_and_net_is_gross_less_fee() -> None:
    assert card_fee(10_000) == 320  # 2.9% + 30
    assert card_fee(50) == 31  # 1.45 rounds down
    assert card_fee(70) == 32  # 2.03, 2.9% of 70 rounded half up is 2
    assert instant_payout_fee(100_000) == 1_000 and instant_payout_fee(100) == 50
    assert connect_fee(100_000, 4) == 250 + 100
    with pytest.raises(ValueError, match="stripe_fee"):
        fee_detail(1, "usd", "x", "made_up")


def test_without_habits_nothing_moves_by_itself_and_no_fee_is_charged() -> None:
    clock = ManualClock(START)
    rail = RailSim(clock=clock, faults=FAST)
    rail.create(Kind.PAYOUT, form(500, method="instant"))
    clock.advance(600)
    (only,) = every_txn(rail)
    assert (only["amount"], only["fee"], only["net"], only["fee_details"]) == (-500, 0, -500, [])
    assert (
        listed(rail.list_charges([])) == [] and len(listed(rail.list_objects(Kind.PAYOUT, []))) == 1
    )


def test_an_instant_payout_carries_stripes_fee_on_its_balance_transaction() -> None:
    clock = ManualClock(START)
    rail = realistic(clock, charge_every=0, automatic_payout_every=0)
    payout = body(rail.create(Kind.PAYOUT, form(20_000, method="instant")))
    txn = body(rail.retrieve_balance_transaction(payout["balance_transaction"]))
    assert (txn["amount"], txn["fee"], txn["net"]) == (-20_000, 200, -20_200)
    (detail,) = txn["fee_details"]
    assert (detail["amount"], detail["type"], detail["currency"]) == (200, "stripe_fee", "eur")


def test_the_account_makes_charges_fees_transfers_and_automatic_payouts_of_its_own() -> None:
    clock = ManualClock(START)
    rail = realistic(clock)
    rail.create(Kind.TRANSFER, form(), "k1")
    seen: list[Delivery] = []
    for _ in range(90):
        clock.advance(1)
        seen += rail.take_webhooks()
    txns = every_txn(rail)

    charges = [t for t in txns if t["type"] == "charge"]
    assert charges and all(t["source"].startswith("ch_") and t["amount"] > 0 for t in charges)
    assert all(t["fee"] == card_fee(t["amount"]) for t in charges)
    assert all(t["net"] == t["amount"] - t["fee"] for t in txns)
    assert all(t["fee_details"][0]["type"] == "stripe_fee" for t in charges)
    fees = [t for t in txns if t["type"] == "stripe_fee"]
    assert fees and all(t["amount"] < 0 and t["reporting_category"] == "fee" for t in fees)
    charge = body(rail.retrieve_charge(charges[0]["source"]))
    assert charge["object"] == "charge" and charge["balance_transaction"] == charges[0]["id"]

    transfers = listed(rail.list_objects(Kind.TRANSFER, [("limit", "100")]))
    others = [t for t in transfers if t["metadata"].get("settlement_id") != SID]
    assert others and not any(_is_uuid(t["transfer_group"]) for t in others)
    sourced = [t for t in others if t["source_transaction"]]
    assert sourced and body(rail.retrieve_charge(sourced[0]["source_transaction"]))["transfer"]

    payouts = listed(rail.list_objects(Kind.PAYOUT, [("limit", "100")]))
    assert payouts and all(p["automatic"] and p["metadata"] == {} for p in payouts)
    paid_in = listed(rail.list_balance_transactions([("payout", payouts[-1]["id"])]))
    assert payouts[-1]["balance_transaction"] in {t["id"] for t in paid_in}
    # settle hears of its own objects only, and only they count as its effects
    assert {e["data"]["object"]["id"] for e in events(seen)} <= {transfers[-1]["id"]}
    assert rail.effects()["total"] == 1


def test_charges_stay_pending_until_available_on() -> None:
    clock = ManualClock(START)
    rail = realistic(clock, charge_every=1, automatic_payout_every=0, charge_pending_seconds=10)
    clock.advance(2)
    (first, *_) = [t for t in every_txn(rail) if t["type"] == "charge"][::-1]
    assert first["status"] == "pending" and first["available_on"] == first["created"] + 10
    assert body(rail.balance())["pending"][0]["amount"] > 0
    clock.advance(10)
    assert body(rail.retrieve_balance_transaction(first["id"]))["status"] == "available"


def test_settles_payout_goes_in_transit_then_pays_by_its_bank_day() -> None:
    clock = ManualClock(START)
    rail = realistic(clock, charge_every=0, automatic_payout_every=0)
    created = body(rail.create(Kind.PAYOUT, form(700), "k1"))
    assert (
        created["status"] == "pending" and created["arrival_date"] == 1_700_006_400
    )  # next midnight
    clock.advance(1)
    (moved,) = events(rail.take_webhooks())
    assert moved["type"] == "payout.updated"
    assert moved["data"]["object"]["status"] == "in_transit"
    clock.advance(3)
    (paid,) = events(rail.take_webhooks())
    assert paid["type"] == "payout.paid" and paid["created"] <= created["arrival_date"]


def test_a_failing_payout_fails_before_its_arrival_date() -> None:
    clock = ManualClock(START)
    rail = realistic(clock, charge_every=0, automatic_payout_every=0)
    created = body(rail.create(Kind.PAYOUT, form(700, "acct_fail_1")))
    clock.advance(5)
    *_, failed = events(rail.take_webhooks())
    assert failed["type"] == "payout.failed" and failed["created"] <= created["arrival_date"]


def test_arrival_dates_skip_the_weekend() -> None:
    friday_noon = 1_700_827_200  # 2023-11-24 12:00 UTC
    assert arrival_date(friday_noon, instant=False, bank_days=True) == 1_701_043_200  # Monday
    assert arrival_date(friday_noon + 0.5, instant=True, bank_days=True) == friday_noon + 1


def test_a_transfer_to_acct_partial3_is_reversed_in_three_parts() -> None:
    clock = ManualClock(START)
    rail = RailSim(clock=clock, faults=FAST)
    created = body(rail.create(Kind.TRANSFER, form(1000, "acct_partial3", transfer_group=SID)))
    assert created["transfer_group"] == SID
    clock.advance(5)
    reversed_ = events(rail.take_webhooks())
    assert [e["type"] for e in reversed_] == ["transfer.reversed"] * 3
    assert [e["data"]["object"]["amount_reversed"] for e in reversed_] == [333, 666, 1000]
    final = body(rail.retrieve(Kind.TRANSFER, created["id"]))
    assert [r["amount"] for r in final["reversals"]["data"]] == [333, 333, 334]
    refunds = listed(rail.list_balance_transactions([("type", "transfer_refund")]))
    assert sorted(t["source"] for t in refunds) == sorted(
        r["id"] for r in final["reversals"]["data"]
    )


def test_sources_expand_into_the_objects_that_moved_the_money() -> None:
    clock = ManualClock(START)
    rail = realistic(clock, automatic_payout_every=0)
    made = body(rail.create(Kind.TRANSFER, form(1000, "acct_partial2")))
    clock.advance(3)
    txns = listed(rail.list_balance_transactions([("limit", "100"), ("expand[0]", "data.source")]))
    sources = {t["source"]["object"]: t["source"] for t in txns}
    assert sources["transfer"]["id"] == made["id"] and sources["charge"]["id"].startswith("ch_")
    assert sources["transfer_reversal"]["transfer"] == made["id"]
    one = rail.retrieve_balance_transaction(made["balance_transaction"], [("expand[]", "source")])
    assert body(one)["source"]["metadata"] == {"settlement_id": SID}
    plain = body(rail.retrieve_balance_transaction(made["balance_transaction"]))
    assert plain["source"] == made["id"]


def test_an_unknown_activity_or_setting_is_refused() -> None:
    with pytest.raises(HabitsError, match="realistic"):
        account_habits("busy")
    with pytest.raises(HabitsError, match="report_data_interval"):
        account_habits("none", report_data_interval=0)


def test_the_journal_brings_every_object_back(tmp_path: Path) -> None:
    clock = ManualClock(START)
    first = realistic(clock, tmp_path)
    made = body(first.create(Kind.TRANSFER, form(1000, "acct_partial3"), "key-1"))
    first.create(Kind.PAYOUT, form(700, method="instant"), "key-2")
    clock.advance(40)
    run = body(
        first.create_report_run([("report_type", "balance_change_from_activity.itemized.3")])
    )
    clock.advance(3)
    before = _everything(first, run["id"])
    pending = body(first.create(Kind.PAYOUT, form(300), "key-3"))
    first.close()

    again = realistic(clock, tmp_path)
    assert _everything(again, run["id"]) == {**_everything(first, run["id"])}
    assert before["runs"] == _everything(again, run["id"])["runs"]
    replayed = again.create(Kind.TRANSFER, form(1000, "acct_partial3"), "key-1")
    assert replayed.replayed and body(replayed)["id"] == made["id"]
    assert again.effects()["by_settlement"][SID] == {"transfers": 1, "payouts": 2}
    clock.advance(10)  # what was due when the first stopped still happens
    assert body(again.retrieve(Kind.PAYOUT, pending["id"]))["status"] == "paid"


def test_a_line_cut_short_by_a_kill_is_dropped(tmp_path: Path) -> None:
    clock = ManualClock(START)
    first = RailSim(clock=clock, data_dir=tmp_path)
    made = body(first.create(Kind.TRANSFER, form(), "key-1"))
    first.close()
    with (tmp_path / JOURNAL_NAME).open("ab") as journal:
        journal.write(b'{"k": "obj", "type": "tra')
    again = RailSim(clock=clock, data_dir=tmp_path)
    assert body(again.retrieve(Kind.TRANSFER, made["id"]))["amount"] == 1050
    assert (tmp_path / JOURNAL_NAME).read_bytes().endswith(b"}\n")


def test_a_journal_broken_before_its_end_is_refused_and_a_reset_forgets_it(
    tmp_path: Path,
) -> None:
    clock = ManualClock(START)
    first = RailSim(clock=clock, data_dir=tmp_path)
    first.create(Kind.TRANSFER, form(), "key-1")
    first.reset()
    first.create(Kind.TRANSFER, form(77), "key-2")
    first.close()
    again = RailSim(clock=clock, data_dir=tmp_path)
    assert [t["amount"] for t in listed(again.list_objects(Kind.TRANSFER, []))] == [77]
    again.close()
    journal = tmp_path / JOURNAL_NAME
    journal.write_bytes(b"{not json\n" + journal.read_bytes())
    with pytest.raises(JournalError, match="line 1"):
        RailSim(clock=clock, data_dir=tmp_path)


def _everything(rail: RailSim, run_id: str) -> dict[str, Any]:
    """What the rail shows: every list, the balance, a run and its file."""
    every = [("limit", "100")]
    run = body(rail.retrieve_report_run(run_id))
    return {
        "transfers": listed(rail.list_objects(Kind.TRANSFER, every)),
        "payouts": listed(rail.list_objects(Kind.PAYOUT, every)),
        "charges": listed(rail.list_charges(every)),
        "txns": every_txn(rail),
        "balance": body(rail.balance()),
        "runs": run,
        "file": rail.file_contents(run["result"]["id"]),
    }


def _is_uuid(text: str | None) -> bool:
    try:
        return text is not None and str(uuid.UUID(text)) == text
    except ValueError:
        return False
