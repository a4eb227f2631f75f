"""Fault settings and dice: validated, reproducible by seed, whatever the interleaving; the
in-process rail classifies the simulator's answers as the Stripe adapter does."""

from __future__ import annotations

import time
from dataclasses import replace

import httpx
import pytest
import stripe

from railsim.core import RailSim
from railsim.errors import FaultsError
from railsim.fake_rail import SimRail
from railsim.faults import PROFILES, Dice, Faults, updated
from railsim.http import create_app
from railsim.params import Kind
from railsim.webhooks import signature_header
from services.domain.payout import PayoutMethod
from services.domain.rail import RailInstruction, RailOutcome


def outcomes(seed: int, subjects: list[str]) -> list[int]:
    return outcomes_of(RailSim(faults=Faults(fail_before=0.5, seed=seed)), subjects)


def outcomes_of(sim: RailSim, subjects: list[str]) -> list[int]:
    form = [("amount", "1"), ("currency", "usd"), ("destination", "acct_x")]
    return [
        sim.create(Kind.TRANSFER, [*form, ("metadata[settlement_id]", s)], s).status
        for s in subjects
    ]


def test_fault_decisions_repeat_with_the_seed_and_change_with_it() -> None:
    subjects = [f"s-{n}" for n in range(40)]
    assert outcomes(7, subjects) == outcomes(7, subjects)
    assert outcomes(7, subjects) != outcomes(8, subjects)
    assert set(outcomes(7, subjects)) == {200, 500}


def test_decisions_do_not_depend_on_how_subjects_interleave() -> None:
    one, other = Dice(3), Dice(3)
    first = [one.chance("x", "a", 0.5) for _ in range(20)]
    for _ in range(20):
        other.chance("x", "b", 0.5)
    assert [other.chance("x", "a", 0.5) for _ in range(20)] == first


def test_fault_settings_are_validated() -> None:
    assert updated(Faults(), {"fail_after": 0.5}).fail_after == 0.5
    assert updated(Faults(), {"profile": "chaos", "seed": 4}) == replace(PROFILES["chaos"], seed=4)
    for bad in ({"fail_after": 1.5}, {"latency_ms": -1}, {"refuse": True}, {"nonsense": 1}):
        with pytest.raises(FaultsError):
            updated(Faults(), bad)


def test_the_signature_verifies_with_stripes_own_library() -> None:
    payload = b'{"id":"evt_1","object":"event","type":"transfer.created","data":{"object":{}}}'
    header = signature_header(payload, "whsec_test", int(time.time()))
    event = stripe.Webhook.construct_event(payload.decode(), header, "whsec_test")
    assert event["id"] == "evt_1"
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.Webhook.construct_event(payload.decode(), header, "whsec_other")


def instruction(destination: str = "acct_ok", key: str = "k" * 64) -> RailInstruction:
    return RailInstruction("s-1", "acme", key, destination, 1050, "EUR", PayoutMethod.TRANSFER)


async def test_the_in_process_rail_accepts_refuses_and_finds() -> None:
    rail = SimRail(RailSim())
    accepted = await rail.send(instruction())
    replayed = await rail.send(instruction())
    refused = await rail.send(instruction("acct_closed_9", key="r" * 64))

    assert accepted.outcome is RailOutcome.ACCEPTED and accepted.rail_reference
    assert replayed.rail_reference == accepted.rail_reference
    assert replayed.detail == "idempotent_replayed"
    assert (refused.outcome, refused.detail) == (RailOutcome.REFUSED, "account_closed")
    assert await rail.find(instruction()) == accepted.rail_reference


@pytest.mark.parametrize("fault", [{"fail_after": 1}, {"timeout_after": 1, "timeout_seconds": 30}])
async def test_the_in_process_rail_reports_ambiguity_while_the_effect_exists(
    fault: dict[str, float],
) -> None:
    sim = RailSim(faults=updated(Faults(), fault))
    result = await SimRail(sim, timeout=10).send(instruction())
    assert result.outcome is RailOutcome.AMBIGUOUS
    assert sim.effects_for("s-1")["transfers"] == 1


def test_rolls_while_a_fault_is_off_leave_its_later_decisions_as_a_fresh_run_makes_them() -> None:
    fresh, used = Dice(5), Dice(5)
    for _ in range(30):  # a fault that is off: nothing fires, nothing is kept per subject
        assert not used.chance("x", "a", 0.0)
    assert [used.chance("x", "a", 0.5) for _ in range(20)] == [
        fresh.chance("x", "a", 0.5) for _ in range(20)
    ]


async def test_the_faults_each_settlement_met_are_told_and_those_that_met_none_left_out() -> None:
    sim = RailSim(faults=Faults(fail_before=0.5, webhook_duplicate=0.5, seed=2))
    subjects = [f"s-{n}" for n in range(40)]
    failed = [
        s for s, status in zip(subjects, outcomes_of(sim, subjects), strict=True) if status == 500
    ]
    transport = httpx.ASGITransport(app=create_app(sim))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
        answer = await client.post("/_sim/faults/met", json={"settlement_ids": subjects})
        refused = await client.post("/_sim/faults/met", json={"settlement_ids": "s-1"})
    met: dict[str, list[str]] = answer.json()["met"]
    assert failed and {s for s, names in met.items() if "fail_before" in names} == set(failed)
    assert any(names == ["webhook_duplicate"] for names in met.values())
    assert set(subjects) - set(met)  # the settlements that met no fault are not listed
    assert refused.status_code == 400


def test_the_record_of_faults_met_forgets_the_oldest_subjects_past_its_limit() -> None:
    dice = Dice(1, met_limit=2)
    for subject in ("a", "b", "c"):
        assert dice.chance("fail_before", subject, 1.0)
    assert not dice.chance("refuse", "c", 0.0)  # a fault that does not fire is not met
    assert dice.met(["a", "b", "c"]) == {"b": ["fail_before"], "c": ["fail_before"]}
