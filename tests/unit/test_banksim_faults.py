"""The bank's fault settings and its dice, without I/O: profiles and run-time changes checked
as railsim's are, each transaction's fate decided by its remittance first and seeded dice
after, the same for the same seed and EndToEndId, and the TARGET2 calendar the clock runs on."""

from __future__ import annotations

import dataclasses
from datetime import date

import pytest

from banksim import dice
from banksim.clock import BankClock, ManualClock
from banksim.errors import FaultsError
from banksim.faults import PROFILES, Faults, as_json, profile, updated
from banksim.outcomes import Fate, Loss, answer_loss, fate, statement_delay
from banksim.pain001 import Instruction

IBAN = "DE89370400440532013000"


TRANSFER = Instruction(
    end_to_end_id="E2E",
    instr_id=None,
    amount="12.50",
    currency="EUR",
    creditor_name="A creditor",
    creditor_iban="FR1420041010050500013M02606",
    remittance="",
)


def instruction(e2e: str, remittance: str = "", **changes: str) -> Instruction:
    return dataclasses.replace(TRANSFER, end_to_end_id=e2e, remittance=remittance, **changes)


def test_the_named_profiles_exist_and_none_is_harmless() -> None:
    assert {"none", "demo", "chaos"} <= PROFILES.keys()
    assert profile("none") == Faults()
    with pytest.raises(FaultsError, match="use one of"):
        profile("mayhem")


def test_a_change_applies_over_a_profile_and_shows_as_json() -> None:
    faults = updated(Faults(), {"profile": "chaos", "seed": 9, "rejects": {"AC04": 0.5}})
    assert faults.seed == 9 and faults.rejects == {"AC04": 0.5}
    assert faults.lost_answer == PROFILES["chaos"].lost_answer
    assert as_json(faults)["rejects"] == {"AC04": 0.5}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"lost_answer": 1.5}, "between 0 and 1"),
        ({"charge": True}, "between 0 and 1"),
        ({"seed": 1.5}, "integer"),
        ({"statement_missing_days": -1}, ">= 0"),
        ({"rejects": ["AC04"]}, "reason codes and rates"),
        ({"rejects": {"ac04": 0.1}}, "not an ISO reason code"),
        ({"returns": {"AC04": 0.7, "AC06": 0.7}}, "sum to at most 1"),
        ({"return_days_min": 4, "return_days_max": 2}, "must not exceed"),
        ({"webhook_drop": 0.1}, "unknown fault"),
    ],
)
def test_a_bad_change_is_refused_with_what_to_send_instead(
    change: dict[str, object], message: str
) -> None:
    with pytest.raises(FaultsError, match=message):
        updated(Faults(), change)


def test_the_remittance_decides_before_the_dice() -> None:
    always = Faults(rejects={"AM04": 1.0}, returns={"AC06": 1.0})
    assert fate(instruction("E1", "x reject:BE04 y"), IBAN, always) == Fate("BE04", None, 0, False)
    assert fate(instruction("E2", "return:MD07:3"), IBAN, always) == Fate(None, "MD07", 3, False)
    assert fate(instruction("E3"), IBAN, always).reject == "AM04"
    returned = fate(instruction("E4"), IBAN, Faults(returns={"AC06": 1.0}, return_days_max=2))
    assert returned.return_reason == "AC06" and 1 <= returned.return_days <= 2


def test_the_banks_own_checks_come_first() -> None:
    asked = "return:MD07:3"
    assert fate(instruction("E", asked, amount="0.001"), IBAN, Faults()).reject == "AM12"
    assert fate(instruction("E", asked, amount="0"), IBAN, Faults()).reject == "AM01"
    assert fate(instruction("E", asked), "DE00370400440532013000", Faults()).reject == "AC02"


def test_the_dice_decide_the_same_for_the_same_seed_and_e2e_and_hit_their_rates() -> None:
    faults = Faults(rejects={"AC04": 0.1, "AM04": 0.1}, seed=42)
    fates = [fate(instruction(f"E2E-{n}"), IBAN, faults).reject for n in range(2000)]
    again = [fate(instruction(f"E2E-{n}"), IBAN, faults).reject for n in range(2000)]
    assert fates == again
    assert 140 < fates.count("AC04") < 260 and 140 < fates.count("AM04") < 260
    reseeded = Faults(rejects=faults.rejects, seed=43)
    assert [fate(instruction(f"E2E-{n}"), IBAN, reseeded).reject for n in range(2000)] != fates
    assert dice.pick(1, "x", "s", {}) is None


def test_a_lost_answer_is_dropped_or_a_504_by_its_share() -> None:
    assert answer_loss("M", Faults()) is None
    assert answer_loss("M", Faults(lost_answer=1, lost_answer_dropped=1)) is Loss.DROPPED
    assert answer_loss("M", Faults(lost_answer=1, lost_answer_dropped=0)) is Loss.GATEWAY_TIMEOUT


def test_a_missing_statement_is_held_back_and_a_late_one_is_not() -> None:
    day = date(2026, 1, 5)
    assert statement_delay(IBAN, day, Faults()) == (0, False)
    assert statement_delay(IBAN, day, Faults(statement_late=1)) == (1, False)
    missing = Faults(statement_missing=1, statement_missing_days=3)
    assert statement_delay(IBAN, day, missing) == (3, True)


def test_the_clock_runs_on_target2_business_days() -> None:
    wall = ManualClock(1000.0)
    clock = BankClock(wall, 1000.0, date(2026, 4, 2), 10.0)  # the Thursday before Easter
    days = []
    for _ in range(3):
        days.append(clock.today())
        wall.advance(10)
    # Good Friday and Easter Monday are TARGET2 closing days
    assert days == [date(2026, 4, 2), date(2026, 4, 7), date(2026, 4, 8)]
    assert BankClock(wall, 0.0, date(2026, 1, 3), 10.0).start == date(2026, 1, 5)
    with pytest.raises(ValueError, match="day_seconds"):
        BankClock(wall, 0.0, date(2026, 1, 5), 0)
